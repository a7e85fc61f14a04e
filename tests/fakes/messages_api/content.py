"""Building request and reply content: blocks and messages shaped like the API's.

Test code builds conversations with these (``user``, ``assistant``, ``tool_result``) and the
fake builds its replies with them (``text``, ``tool_use``, ``thinking``, ``redacted_thinking``,
``usage``). A scripted thinking block needs no signature: the server signs what it emits.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from typing import Any

_ALPHABET = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_TO_ALPHABET = bytes(_ALPHABET[b % len(_ALPHABET)] for b in range(256))
"""Random bytes to the id alphabet in one C call: a digit's slight bias does not matter to a fake."""


def new_id(prefix: str) -> str:
    """A fresh id shaped like the API's (``toolu_01...``, ``msg_01...``, ``req_01...``)."""
    return f"{prefix}_01" + secrets.token_bytes(22).translate(_TO_ALPHABET).decode()


def text(value: str) -> dict[str, Any]:
    """A text content block."""
    return {"type": "text", "text": value}


def tool_use(name: str, input: dict[str, Any] | None = None, *, id: str | None = None) -> dict[str, Any]:
    """A tool_use content block; the id is fixed when the block is built, so retries see the same."""
    return {"type": "tool_use", "id": id or new_id("toolu"), "name": name, "input": dict(input or {})}


def thinking(value: str, *, signature: str = "") -> dict[str, Any]:
    """A thinking block; an empty signature is filled in by the server when it emits the block."""
    return {"type": "thinking", "thinking": value, "signature": signature}


def redacted_thinking(data: str = "") -> dict[str, Any]:
    """A redacted_thinking block; empty ``data`` is filled in (opaque, signed) by the server."""
    return {"type": "redacted_thinking", "data": data}


def tool_result(tool_use_id: str, content: str | list[dict[str, Any]] = "ok", *, is_error: bool = False) -> dict[str, Any]:
    """A tool_result content block (for building request conversations)."""
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_use_id, "content": content}
    if is_error:
        block["is_error"] = True
    return block


def usage(
    input_tokens: int = 10,
    output_tokens: int = 5,
    *,
    cache_creation_input_tokens: int = 0,
    cache_read_input_tokens: int = 0,
    ephemeral_1h_input_tokens: int = 0,
) -> dict[str, Any]:
    """A usage object as the API reports it; cache writes split by TTL (the rest is 5m)."""
    return {
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "cache_creation_input_tokens": cache_creation_input_tokens,
        "cache_read_input_tokens": cache_read_input_tokens,
        "cache_creation": {
            "ephemeral_5m_input_tokens": cache_creation_input_tokens - ephemeral_1h_input_tokens,
            "ephemeral_1h_input_tokens": ephemeral_1h_input_tokens,
        },
    }


def as_blocks(parts: Iterable[str | dict[str, Any]]) -> list[dict[str, Any]]:
    """Content blocks from parts: strings become text blocks, blocks are copied."""
    return [text(p) if isinstance(p, str) else dict(p) for p in parts]


def user(*parts: str | dict[str, Any]) -> dict[str, Any]:
    """A user message: one string stays a string, anything else becomes a list of blocks."""
    if len(parts) == 1 and isinstance(parts[0], str):
        return {"role": "user", "content": parts[0]}
    return {"role": "user", "content": as_blocks(parts)}


def assistant(*parts: str | dict[str, Any]) -> dict[str, Any]:
    """An assistant message (pass ``*reply.content`` to echo a scripted reply)."""
    return {"role": "assistant", "content": as_blocks(parts)}
