"""What a model call sends: the run's fixed request fields, caching, and the blocks sent back.

The fixed part of every request (model, max_tokens, system, tools, thinking, effort) is
derived here from the run's settings and is what a step's request hash pins, together with
the conversation. Two things are added only at send time and never hashed: the top-level
``cache_control`` (caching changes what a turn costs, not what it answers) and the removal of
thinking blocks when a run continues with thinking off. A run recorded before thinking and
caching existed hashes exactly as it did then: no ``thinking`` field, no ``output_config``.

Thinking blocks go back to the API exactly as it returned them, signature included: the API
checks each block's signature against everything before it, and drops (without an error) a
block the current model cannot read. A model change (``resume --model``, a fallback switch)
cuts the thinking blocks of the messages before it at send time (``thinking_cut``), never in
what is hashed: another model cannot verify those signatures. Should that cut reach the
latest assistant message while it holds a tool call (mid-tool-loop), that one request goes
without ``thinking``: with thinking on, the API wants that message to start with a thinking
block, and none it could verify is left.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..settings import AgentSettings, CacheTTL, ThinkingMode
from ..tools.bad_input import strict_tools

__all__ = [
    "THINKING_BLOCKS",
    "complete_blocks",
    "cut_off",
    "cut_thinking",
    "fixed_request",
    "sendable",
    "strip_none",
    "thinking_param",
    "with_user_text",
    "without_thinking",
]

THINKING_BLOCKS = frozenset({"thinking", "redacted_thinking"})


def thinking_param(mode: ThinkingMode) -> dict[str, str] | None:
    """The request's ``thinking`` field: adaptive with its text shown, or none at all."""
    # "summarized" makes current models return the text they write between tool calls;
    # their default ("omitted") returns only signatures and the timeline would go blank.
    return {"type": "adaptive", "display": "summarized"} if mode == "adaptive" else None


def fixed_request(settings: AgentSettings) -> dict[str, Any]:
    """The fields every turn of a run sends unchanged (until a recorded settings change)."""
    request: dict[str, Any] = {"model": settings.model, "max_tokens": settings.max_tokens, "system": settings.system}
    if settings.tools:
        request["tools"] = [dict(t) for t in settings.tools]
    param = thinking_param(settings.thinking)
    if param is not None:
        request["thinking"] = param
    if settings.effort is not None:
        request["output_config"] = {"effort": settings.effort}
    return request


def sendable(
    fixed: Mapping[str, Any],
    messages: Sequence[Mapping[str, Any]],
    cache_ttl: CacheTTL,
    thinking_cut: int = 0,
    strict: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """The request to send: the fixed fields, the conversation, and the cache marker.

    ``thinking_cut``: the messages before it were answered by another model (a switch), so
    they go out without their thinking blocks. ``strict``: the tools sent with ``strict: true``
    (``tools.bad_input``; like caching, never part of what is hashed)."""
    if strict and fixed.get("tools"):
        fixed = {**fixed, "tools": strict_tools(fixed["tools"], strict)}
    if "thinking" not in fixed and any(_has_thinking(m) for m in messages):
        # Thinking turned off mid-run (another model): earlier thinking blocks stay out.
        messages = [without_thinking(m) for m in messages]
    request = cut_thinking({**fixed, "messages": list(messages)}, thinking_cut)
    if cache_ttl != "off":
        # Top-level cache_control marks the last cacheable block: each turn writes the
        # conversation so far, and the next turn reads it back at a tenth of the price.
        request["cache_control"] = {"type": "ephemeral", "ttl": cache_ttl}
    return request


def cut_thinking(request: Mapping[str, Any], upto: int) -> dict[str, Any]:
    """``request`` with the thinking blocks of its first ``upto`` messages cut (see the module docstring)."""
    messages = list(request.get("messages") or [])
    if not any(_has_thinking(m) for m in messages[:upto]):
        return dict(request)
    latest = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=-1)
    out = {**request, "messages": [*(without_thinking(m) for m in messages[:upto]), *messages[upto:]]}
    if 0 <= latest < upto and _has_thinking(messages[latest]) and _has_tool_use(messages[latest]):
        out.pop("thinking", None)
    return out


def complete_blocks(content: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The blocks of a reply cut off by ``max_tokens`` that can be sent back as they are.

    A thinking block cut off before its signature, an empty text block and a tool call whose
    input never finished cannot: the API would refuse them. With no text left, nothing is kept.
    """
    kept = []
    for block in content:
        kind = block.get("type")
        if kind == "thinking" and not block.get("signature"):
            continue
        if kind == "text" and not block.get("text"):
            continue
        if kind == "tool_use":
            continue
        kept.append(dict(block))
    # Thinking alone, with no answer after it, is not worth sending back: the turn is asked again.
    return kept if any(b.get("type") == "text" for b in kept) else []


def with_user_text(messages: list[dict[str, Any]], text: str) -> None:
    """Add ``text`` as the person's next words: to the last user message, or as a new one."""
    if messages and messages[-1]["role"] == "user":
        last = messages[-1]
        content = last["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
        messages[-1] = {"role": "user", "content": [*blocks, {"type": "text", "text": text}]}
    else:
        messages.append({"role": "user", "content": text})


def _has_thinking(message: Mapping[str, Any]) -> bool:
    content = message.get("content")
    return isinstance(content, list) and any(b.get("type") in THINKING_BLOCKS for b in content)


def _has_tool_use(message: Mapping[str, Any]) -> bool:
    content = message.get("content")
    return isinstance(content, list) and any(b.get("type") == "tool_use" for b in content)


def without_thinking(message: Mapping[str, Any]) -> Mapping[str, Any]:
    """``message`` without its thinking blocks (a placeholder if nothing else is left)."""
    content = message.get("content")
    if not isinstance(content, list):
        return message
    kept = [b for b in content if b.get("type") not in THINKING_BLOCKS]
    return {**message, "content": kept or [{"type": "text", "text": "(thought)"}]}


def strip_none(block: dict[str, Any]) -> dict[str, Any]:
    """A content block as the next request sends it: the SDK's ``exclude_none`` dump."""
    return {
        k: (strip_none(v) if isinstance(v, dict) and k != "input" else v)
        for k, v in block.items()
        if v is not None
    }


def cut_off(block: dict[str, Any], max_tokens: int) -> dict[str, Any]:
    """The tool_result for a tool call cut off by ``max_tokens`` before its input was complete."""
    return {
        "type": "tool_result",
        "tool_use_id": block["id"],
        "content": f"This {block.get('name')} call was cut off at max_tokens={max_tokens} before its input "
        "was complete, so it did not run. Call it again with a smaller input.",
        "is_error": True,
    }
