"""Fakes for tests: a loopback server that speaks the Anthropic Messages API.

``from tests.fakes import MessagesAPIServer, ScriptedScenario, reply, tool_use, Error`` works;
the fake itself is the package :mod:`tests.fakes.messages_api`, whose ``__all__`` is the one
list of what this package offers.
"""

from __future__ import annotations

from tests.fakes.messages_api import *  # noqa: F403
from tests.fakes.messages_api import __all__ as __all__
