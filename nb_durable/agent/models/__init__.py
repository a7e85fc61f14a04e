"""Models: what answers the agent's Messages API requests.

``base`` holds the ``Model`` protocol every model speaks; ``anthropic`` is the real API (the
only module that imports the SDK, and only when a call is made); ``scripted`` and
``messages`` answer from a script, for tests; ``demo`` is an offline agent for the bundled
demo project. ``failures`` is the one rule for which API failures are worth retrying. This
package imports only ``base``, so naming a model never loads another.
"""

from __future__ import annotations

from .base import Model, TextCallback

__all__ = ["Model", "TextCallback"]
