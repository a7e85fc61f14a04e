"""What a model call sends: the run's fixed request fields, caching, and the blocks sent back.

The fixed part of every request (model, max_tokens, system, tools, thinking, effort) is
derived here from the run's settings and is what a step's request hash pins, together with
the conversation. Two things are added only at send time and never hashed: the top-level
``cache_control`` (caching changes what a turn costs, not what it answers) and the removal of
thinking blocks when a run continues with thinking off. A run recorded before thinking and
caching existed hashes exactly as it did then: no ``thinking`` field, no ``output_config``.

Thinking blocks go back to the API exactly as it returned them, signature included: the API
checks each block's signature against everything before it, and drops (without an error) a
block the current model cannot read, so a model change needs no rewriting either.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..settings import AgentSettings, CacheTTL, ThinkingMode

__all__ = [
    "THINKING_BLOCKS",
    "complete_blocks",
    "fixed_request",
    "sendable",
    "thinking_param",
    "with_user_text",
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
    fixed: Mapping[str, Any], messages: Sequence[Mapping[str, Any]], cache_ttl: CacheTTL
) -> dict[str, Any]:
    """The request to send: the fixed fields, the conversation, and the cache marker."""
    if "thinking" not in fixed and any(_has_thinking(m) for m in messages):
        # Thinking turned off mid-run (another model): earlier thinking blocks stay out.
        messages = [_without_thinking(m) for m in messages]
    request = {**fixed, "messages": list(messages)}
    if cache_ttl != "off":
        # Top-level cache_control marks the last cacheable block: each turn writes the
        # conversation so far, and the next turn reads it back at a tenth of the price.
        request["cache_control"] = {"type": "ephemeral", "ttl": cache_ttl}
    return request


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


def _without_thinking(message: Mapping[str, Any]) -> Mapping[str, Any]:
    content = message.get("content")
    if not isinstance(content, list):
        return message
    kept = [b for b in content if b.get("type") not in THINKING_BLOCKS]
    return {**message, "content": kept or [{"type": "text", "text": "(thought)"}]}
