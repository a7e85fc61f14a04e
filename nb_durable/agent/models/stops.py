"""The stop reasons this version knows, and how a reply that gives another is recorded.

A reply says why the model stopped (``stop_reason``); the loop decides from it whether the
run's work is done (``run.outcomes``). The API may add a reason this version has never heard
of, and a run must not claim it completed, nor guess another outcome, for a reason nobody
here can interpret. So a live reply that stops for an unknown reason is recorded as any reply
is (it was paid for, and the budget counts it), marked ``unknown_stop``; the run ends
*unknown_stop*, and a resume asks the turn again, or an upgraded version that knows the reason
takes it from there. The mark is what tells such a reply from one an earlier version recorded
without it, and ended *completed*: that log replays as it was recorded. Standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["KNOWN_STOPS", "PROMPT_TOO_LONG", "UNKNOWN_STOP", "marked", "refused_as_too_long"]

KNOWN_STOPS = frozenset(
    {"end_turn", "stop_sequence", "tool_use", "pause_turn", "max_tokens", "refusal", "model_context_window_exceeded"}
)
"""Every stop reason the loop interprets (the SDK's ``StopReason`` of anthropic 2.17)."""

UNKNOWN_STOP = "unknown_stop"
"""The key a recorded model step's result carries (true) when its reply stopped for a reason its recorder did not know."""

PROMPT_TOO_LONG = "context_full"
"""The ``stop_details`` type of the reply a model step records when the API refused its prompt as
too long (``compaction.full_reply``): a full window, though no model answered."""


def refused_as_too_long(message: Mapping[str, Any]) -> bool:
    """Whether a recorded reply is the one a refusal of the prompt as too long stands for: it came
    from the refused attempt itself, never from an attempt after it (which a real reply needs)."""
    details = message.get("stop_details")
    usage = message.get("usage")
    return (
        isinstance(details, Mapping)
        and details.get("type") == PROMPT_TOO_LONG
        and isinstance(usage, Mapping)
        and not usage.get("input_tokens")
    )


def marked(reply: dict[str, Any]) -> dict[str, Any]:
    """A live model step's result, marked when its reply stopped for a reason this version does not know."""
    message = reply.get("message")
    stop = message.get("stop_reason") if isinstance(message, Mapping) else None
    if stop is None or stop in KNOWN_STOPS:
        return reply
    return {**reply, UNKNOWN_STOP: True}
