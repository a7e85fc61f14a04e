"""The wire format of answers: message JSON, error bodies, and Server-Sent Events.

A reply is sent as JSON, or as Server-Sent Events when the request body has
``"stream": true``: ``message_start`` (the input side of the usage, with the TTL split in
``cache_creation``, and ``output_tokens`` of at most 1), a ``ping``, per block
``content_block_start``, deltas (text and thinking word by word, then one ``signature_delta``
just before the thinking block's ``content_block_stop``; tool input as partial JSON cut
mid-token) and ``content_block_stop``, then ``message_delta`` (stop reason, ``stop_details``,
and the cumulative usage, which the SDK overwrites its snapshot with) and ``message_stop``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tests.fakes.messages_api.tokens import CUT_JSON

# The error type the real API sends with each status, and the status of each error type.
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}
ERROR_STATUS = {v: k for k, v in ERROR_TYPES.items()}
DEFAULT_ERROR_MESSAGES = {
    "overloaded_error": "Overloaded",
    "rate_limit_error": "Number of request tokens has exceeded your per-minute rate limit",
    "api_error": "Internal server error",
    "timeout_error": "Request timeout",
}


DELTA_USAGE_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
    "output_tokens_details",
    "server_tool_use",
)


def error_body(error_type: str, message: str, request_id: str) -> dict[str, Any]:
    """The real API's error body."""
    return {"type": "error", "error": {"type": error_type, "message": message}, "request_id": request_id}


def _pieces(value: str, n: int) -> list[str]:
    """``value`` cut into about ``n`` pieces (at least one, possibly empty)."""
    size = max(1, -(-len(value) // n))
    return [value[k : k + size] for k in range(0, len(value), size)] or [""]


def _words(value: str) -> list[str]:
    """Word by word, keeping the spaces, so a stream yields several pieces."""
    return re.findall(r"\s*\S+\s*|\s+", value)


def block_events(index: int, block: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """content_block_start, deltas and content_block_stop for one block."""
    kind = block.get("type")
    deltas: list[dict[str, Any]] = []
    if kind == "text":
        start: dict[str, Any] = {**block, "text": ""}
        # Word by word (keeping the spaces), so text_stream yields several pieces.
        deltas = [{"type": "text_delta", "text": w} for w in _words(block["text"])]
    elif kind == "tool_use":
        start = {k: v for k, v in block.items() if k != CUT_JSON} | {"input": {}}
        raw = block[CUT_JSON] if CUT_JSON in block else json.dumps(block.get("input", {}))
        # Cut mid-token, as the real API does: the SDK parses partial JSON.
        deltas = [{"type": "input_json_delta", "partial_json": p} for p in _pieces(raw, 3)]
    elif kind == "thinking":
        start = {**block, "thinking": "", "signature": ""}
        deltas = [{"type": "thinking_delta", "thinking": w} for w in _words(block.get("thinking", ""))]
        deltas.append({"type": "signature_delta", "signature": block.get("signature", "")})
    else:
        start = block  # other blocks (redacted_thinking, server tool blocks) arrive whole
    events = [("content_block_start", {"type": "content_block_start", "index": index, "content_block": start})]
    events += [("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d}) for d in deltas]
    events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    return events


def public(message: dict[str, Any]) -> dict[str, Any]:
    """``message`` as a JSON body carries it: a cut tool_use without its streamed JSON."""
    content = [{k: v for k, v in b.items() if k != CUT_JSON} for b in message.get("content") or []]
    return {**message, "content": content}


def start_events(message: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """message_start (no content, no stop reason yet) and a ping."""
    used = message["usage"]
    start = {
        **message,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {**used, "output_tokens": min(1, used.get("output_tokens", 0))},
    }
    start["usage"].pop("output_tokens_details", None)
    return [("message_start", {"type": "message_start", "message": start}), ("ping", {"type": "ping"})]


def sse_events(message: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The Server-Sent Events (name, data) that stream ``message``."""
    events = start_events(message)
    for i, block in enumerate(message["content"]):
        events += block_events(i, block)
    delta = {key: message.get(key) for key in ("stop_reason", "stop_sequence", "stop_details")}
    # Cumulative, shaped like MessageDeltaUsage (no cache_creation split: message_start has it).
    final = {k: v for k, v in message["usage"].items() if k in DELTA_USAGE_FIELDS}
    events.append(("message_delta", {"type": "message_delta", "delta": delta, "usage": final}))
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def sse_bytes(name: str, data: dict[str, Any]) -> bytes:
    """One event on the wire."""
    # Both lines are needed: the SDK drops events that have no `event:` line.
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
