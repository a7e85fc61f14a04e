"""Messages as the API returns them, built without the SDK: for scripts, tests and the demo.

Every builder returns exactly the JSON that the SDK's ``Message.model_dump(mode="json")``
gives (anthropic 2.x field set, every field present, in its order), so the loop, the log and
the cost accounting cannot tell a built message from a real one. Ids and token counts derive
from the content (never a clock or a random source), so the same script gives the same
transcript on every replay. ``api_error`` builds the failure the real model would raise.
Nothing here imports ``anthropic``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ...errors import ModelError, TransientModelError
from .failures import error_type_for, is_transient

__all__ = [
    "ToolCall",
    "api_error",
    "make_message",
    "request_tokens",
    "stable_id",
    "stream_pieces",
    "text_message",
    "texts_of",
    "thinking_block",
    "tool_use_message",
    "usage",
]

# The tool-use system prompt the API adds when tools are offered costs input tokens too.
_TOOL_USE_OVERHEAD = 346
_B62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def stable_id(prefix: str, *parts: object) -> str:
    """An id shaped like the API's (``msg_01...``) derived from ``parts``, so replays agree."""
    data = json.dumps(parts, sort_keys=True, default=str, ensure_ascii=False).encode()
    number = int.from_bytes(hashlib.sha256(data).digest()[:18], "big")
    chars = []
    for _ in range(22):
        number, digit = divmod(number, 62)
        chars.append(_B62[digit])
    return prefix + "01" + "".join(chars)


def _tokens(value: Any) -> int:
    """About one token per four characters of the value's JSON for English and code, and one
    per two bytes of UTF-8 for every other character: 1.5 a CJK character (Claude's tokenizer
    gives about one or more), 1 a Cyrillic or accented one, 2 an emoji. It stands in for
    ``count_tokens`` before a budget is checked, so it must not undercount text that is not
    ASCII; ASCII text's estimate is what it always was (scripted and demo figures keep theirs)."""
    if not isinstance(value, str):
        value = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if value.isascii():
        return max(1, round(len(value) / 4))
    ascii_chars = len(value.encode("ascii", "ignore"))
    other_bytes = len(value.encode("utf-8", "surrogatepass")) - ascii_chars
    return max(1, round(ascii_chars / 4 + other_bytes / 2))


def _output_tokens(content: Sequence[Mapping[str, Any]]) -> int:
    """Tokens a model spends saying ``content``: its text and its tool calls' names and inputs."""
    total = 0
    for block in content:
        if block.get("type") == "text":
            total += _tokens(str(block.get("text", "")))
        elif block.get("type") == "tool_use":
            total += _tokens({"name": block.get("name"), "input": block.get("input")}) + 8
        else:
            total += _tokens(block)
    return max(1, total)


def request_tokens(request: Mapping[str, Any]) -> int:
    """Tokens a request costs: its system prompt, messages and tool schemas (``_tokens``'s estimate)."""
    payload = {k: request.get(k) for k in ("system", "messages", "tools") if request.get(k)}
    return _tokens(payload) + (_TOOL_USE_OVERHEAD if request.get("tools") else 0)


def usage(
    input_tokens: int,
    output_tokens: int,
    *,
    cache_creation_input_tokens: int = 0,
    cache_read_input_tokens: int = 0,
) -> dict[str, Any]:
    """A ``usage`` object as the API reports it (every field of the SDK's ``Usage``)."""
    return {
        "cache_creation": {
            "ephemeral_1h_input_tokens": 0,
            "ephemeral_5m_input_tokens": cache_creation_input_tokens,
        },
        "cache_creation_input_tokens": cache_creation_input_tokens,
        "cache_read_input_tokens": cache_read_input_tokens,
        "inference_geo": None,
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "output_tokens_details": None,
        "server_tool_use": None,
        "service_tier": "standard",
        "speed": None,
    }


class _Draft(dict):  # type: ignore[type-arg]
    """A message from the helpers; remembers what the caller left for ScriptedModel to fill in."""

    estimate_input: bool = False
    auto_tool_ids: frozenset[str] = frozenset()


def _block(block: Mapping[str, Any]) -> dict[str, Any]:
    """A content block with every field the SDK's dump has, in its order."""
    kind = block.get("type")
    if kind == "text":
        return {"citations": block.get("citations"), "text": str(block["text"]), "type": "text"}
    if kind == "thinking":
        return {
            "signature": str(block.get("signature", "")),
            "thinking": str(block["thinking"]),
            "type": "thinking",
        }
    if kind == "tool_use":
        return {
            "id": str(block["id"]),
            "caller": block.get("caller"),
            "input": dict(block.get("input") or {}),
            "name": str(block["name"]),
            "type": "tool_use",
            "toolset_name": block.get("toolset_name"),
        }
    return dict(block)


def make_message(
    content: Sequence[Mapping[str, Any]],
    *,
    stop_reason: str,
    model: str = "scripted",
    input_tokens: int | None = None,
    output_tokens: int | None = None,
    id: str | None = None,
    stop_details: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """An assistant message as ``Message.model_dump(mode="json")`` gives it.

    Without ``output_tokens`` the count is estimated from the content (``_tokens``); without
    ``input_tokens`` it is 0 here and ``ScriptedModel`` estimates it from each request.
    """
    blocks = [_block(b) for b in content]
    message = _Draft(
        id=id or stable_id("msg_", blocks, stop_reason),
        container=None,
        content=blocks,
        diagnostics=None,
        model=model,
        role="assistant",
        stop_details=None if stop_details is None else dict(stop_details),
        stop_reason=stop_reason,
        stop_sequence=None,
        type="message",
        usage=usage(input_tokens or 0, _output_tokens(blocks) if output_tokens is None else output_tokens),
    )
    message.estimate_input = input_tokens is None
    return message


def thinking_block(thinking: str) -> dict[str, Any]:
    """A thinking block as the API returns it, with a signature derived from its text."""
    return {"signature": stable_id("sig_", thinking), "thinking": thinking, "type": "thinking"}


def text_message(
    text: str,
    *,
    stop_reason: str = "end_turn",
    model: str = "scripted",
    input_tokens: int | None = None,
    output_tokens: int | None = None,
    id: str | None = None,
    thinking: str | None = None,
    stop_details: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A reply that says ``text`` (``end_turn`` unless another stop reason is given).

    ``thinking`` puts a signed thinking block first; an empty ``text`` leaves the text out
    (a reply cut off while thinking).
    """
    content = [thinking_block(thinking)] if thinking else []
    if text:
        content.append({"type": "text", "text": text})
    return make_message(
        content,
        stop_reason=stop_reason,
        model=model,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        id=id,
        stop_details=stop_details,
    )


ToolCall = tuple[str, Mapping[str, Any]] | tuple[str, Mapping[str, Any], str] | Mapping[str, Any]
"""``(name, input)``, ``(name, input, id)`` or ``{"name": ..., "input": ..., "id": ...}``."""


def tool_use_message(
    calls: Sequence[ToolCall],
    *,
    text: str | None = None,
    model: str = "scripted",
    input_tokens: int | None = None,
    output_tokens: int | None = None,
    id: str | None = None,
    thinking: str | None = None,
) -> dict[str, Any]:
    """A reply that calls tools (``stop_reason="tool_use"``), optionally thinking and saying ``text`` first.

    Tool-use ids default to ones derived from the call; ScriptedModel renames such an id if
    the conversation already holds it (the same call scripted twice).
    """
    if not calls:
        raise ValueError("tool_use_message needs at least one call; use text_message for text only")
    content: list[dict[str, Any]] = [thinking_block(thinking)] if thinking else []
    if text:
        content.append({"type": "text", "text": text})
    auto: set[str] = set()
    for index, call in enumerate(calls):
        if isinstance(call, Mapping):
            name, tool_input, call_id = call["name"], call.get("input") or {}, call.get("id")
        elif isinstance(call, tuple) and len(call) in (2, 3):
            name, tool_input, call_id = call[0], call[1], call[2] if len(call) == 3 else None
        else:
            raise TypeError(f"a tool call is (name, input), (name, input, id) or a dict, not {call!r}")
        if call_id is None:
            call_id = stable_id("toolu_", name, tool_input, index, text)
            auto.add(call_id)
        content.append({"type": "tool_use", "id": call_id, "name": name, "input": dict(tool_input)})
    message = make_message(
        content,
        stop_reason="tool_use",
        model=model,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        id=id,
    )
    assert isinstance(message, _Draft)
    message.auto_tool_ids = frozenset(auto)
    return message


def api_error(
    status: int,
    *,
    error_type: str | None = None,
    retry_after: float | None = None,
    message: str | None = None,
    should_retry: bool | None = None,
) -> ModelError:
    """The error ``AnthropicModel`` would raise for this status and type (status 200: mid-stream).

    Transient or not by the same rule (``failures.is_transient``); without ``error_type``, the
    type the API sends with ``status``.
    """
    error_type = error_type or error_type_for(status)
    text = message or f"the Messages API answered {status} ({error_type}) (scripted)"
    if is_transient(status, error_type, should_retry=should_retry):
        return TransientModelError(text, status=status, error_type=error_type, retry_after=retry_after)
    return ModelError(text, status=status, error_type=error_type)


def texts_of(message: Mapping[str, Any], kind: str = "text") -> list[str]:
    """The texts of a message's text blocks (or, with ``kind="thinking"``, its thinking)."""
    return [b[kind] for b in message.get("content") or [] if b.get("type") == kind and b.get(kind)]


def stream_pieces(text: str, words: int) -> list[str]:
    """``text`` cut after every ``words`` words, the way a stream delivers it."""
    parts = re.findall(r"\S+\s*|\s+", text)
    return ["".join(parts[i : i + words]) for i in range(0, len(parts), words)] or [text]
