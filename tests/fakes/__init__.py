"""Fakes for tests: a loopback server that speaks the Anthropic Messages API.

``from tests.fakes import MessagesAPIServer, ScriptedScenario, reply, tool_use, Error`` works;
the names are loaded lazily so that ``python -m tests.fakes.messages_api`` does not import the
module twice (runpy warns when a package pre-imports the module it is asked to run).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = (
    "Delay",
    "Drop",
    "Error",
    "FunctionScenario",
    "MessagesAPIProcess",
    "MessagesAPIServer",
    "RecordedRequest",
    "Reply",
    "STOP_REASONS",
    "Scenario",
    "ScenarioExhausted",
    "ScriptedScenario",
    "StreamError",
    "TurnStats",
    "assistant",
    "read_request_log",
    "reply",
    "text",
    "tool_result",
    "tool_use",
    "turn_stats",
    "usage",
    "user",
)
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    """Load the fake's public names on first use."""
    if name in _EXPORTS:
        return getattr(importlib.import_module(".messages_api", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
