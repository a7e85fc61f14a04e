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

__all__ = ["Model", "TextCallback", "endpoint_of"]

TextCallback = Callable[[str], None]
"""Receives text as a model streams it (a UI shows it live; only the final message is recorded)."""


class Model(Protocol):
    """Anything that answers a Messages API request: the real API, a script, the demo."""

    name: str
    """A short label for displays: 'anthropic', 'demo', 'scripted'."""

    def create(
        self,
        request: Mapping[str, Any],
        on_text: TextCallback | None = None,
        on_thinking: TextCallback | None = None,
    ) -> dict[str, Any]:
        """Send one request; return ``{"message": {...}, "request_id": str | None}``.

        ``on_text`` receives answer text and ``on_thinking`` thinking text as they stream (a
        UI shows them live; only the final message is recorded). Raise
        ``TransientModelError`` for failures worth retrying and ``ModelError`` for the rest.

        A model may also have ``count_tokens(request) -> int`` (the request's input tokens,
        for budgets) and ``endpoint() -> dict`` (where it sends requests and with which kind
        of credential, never the credential itself).
        """
        ...


def endpoint_of(model: object) -> dict[str, str]:
    """Where ``model`` sends requests, if it says (``endpoint()``); {} otherwise."""
    endpoint = getattr(model, "endpoint", None)
    if endpoint is None:
        return {}
    try:
        return {str(k): str(v) for k, v in endpoint().items()}
    except Exception:
        return {}
