"""The model seam: one Messages API request in, one JSON reply out.

A *model* takes a Messages API request (plain JSON: model, max_tokens, system, messages,
tools) and returns a *reply*, ``{"message": <the Message as JSON>, "request_id": ...}``.
The agent loop records replies as step results and rebuilds the conversation from them, so
it never touches SDK objects and the log holds only JSON. Every model (the real API, a
script, the demo) speaks this one protocol, so the loop cannot tell them apart.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

__all__ = ["Model", "TextCallback"]

TextCallback = Callable[[str], None]
"""Receives text as a model streams it (a UI shows it live; only the final message is recorded)."""


class Model(Protocol):
    """Anything that answers a Messages API request: the real API, a script, the demo."""

    name: str
    """A short label for displays: 'anthropic', 'demo', 'scripted'."""

    def create(self, request: Mapping[str, Any], on_text: TextCallback | None = None) -> dict[str, Any]:
        """Send one request; return ``{"message": {...}, "request_id": str | None}``.

        ``on_text`` receives text as it streams (a UI shows it live; only the final message
        is recorded). Raise ``TransientModelError`` for failures worth retrying and
        ``ModelError`` for the rest.
        """
        ...
