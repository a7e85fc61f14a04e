"""Token counts: one deterministic estimate, used by replies, caching and count_tokens alike.

* The prompt is a sequence of *elements* in the order the API caches it: each tool, each
  system block, then each content block of each message (a string content is one text block,
  so both spellings count and hash the same). ``cache_control`` markers are not part of an
  element: moving a breakpoint changes neither the count nor the cached prefix.
* An element costs ``ceil(len(canonical JSON) / 4)`` tokens (at least 1), so a prefix's count
  is the sum over its elements and ``input + cache_read + cache_creation`` of a reply always
  equals what ``count_tokens`` says for the same request.
* While the server answers one request (:func:`answering`) the body is not changed, so its
  prompt is split into elements once, however many rules (validation, caching, usage) ask.
* Output is estimated the same way per block (text, thinking, tool name and input);
  :func:`truncate` cuts a reply's content at an output budget, as ``max_tokens`` does.
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

CHARS_PER_TOKEN = 4

CUT_JSON = "_cut_json"
"""The key of a cut tool_use block that holds its streamed, unfinished input JSON (never sent as a field)."""


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_json(value: Any) -> str:
    """The one JSON spelling of ``value`` that counts and hashes use."""
    return _CANONICAL.encode(value)


def estimate_tokens(value: Any) -> int:
    """Tokens of a value: a string by its length, anything else by its canonical JSON."""
    spelled = value if isinstance(value, str) else canonical_json(value)
    return max(1, math.ceil(len(spelled) / CHARS_PER_TOKEN))


@dataclass(frozen=True)
class Element:
    """One cacheable unit of the prompt."""

    where: str  # "tools.0", "system.1", "messages.2.content.0": the API's spelling
    canonical: str  # what is hashed and counted (without cache_control)
    tokens: int
    block_type: str  # "tool", "text", "thinking", "tool_use", ...
    cache_control: Any  # the block's marker (None when unmarked), as sent
    empty: bool = False  # a text block with no text


def _without_cache_control(block: Any) -> Any:
    if isinstance(block, dict) and "cache_control" in block:
        return {k: v for k, v in block.items() if k != "cache_control"}
    return block


def _element(where: str, value: Any, block: Any, block_type: str) -> Element:
    canonical = canonical_json(value)
    marker = block.get("cache_control") if isinstance(block, dict) else None
    empty = block_type == "text" and isinstance(block, dict) and not block.get("text")
    return Element(where, canonical, estimate_tokens(canonical), block_type, marker, empty)


def _blocks(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content) if isinstance(content, list) else []


_ANSWERING: ContextVar[tuple[Any, list[Element]] | None] = ContextVar("answering", default=None)


@contextlib.contextmanager
def answering(body: Any) -> Iterator[None]:
    """The server answers ``body`` inside this: its elements are made once, for every rule that asks."""
    token = _ANSWERING.set((body, list(_iter_elements(body))) if isinstance(body, dict) else None)
    try:
        yield
    finally:
        _ANSWERING.reset(token)


def prompt_elements(body: dict[str, Any]) -> list[Element]:
    """The request's prompt as elements, in cache order: tools, system, messages."""
    held = _ANSWERING.get()
    if held is not None and held[0] is body:
        return list(held[1])
    return list(_iter_elements(body))


def _iter_elements(body: dict[str, Any]) -> Iterator[Element]:
    tools = body.get("tools")
    for i, tool in enumerate(tools if isinstance(tools, list) else []):
        yield _element(f"tools.{i}", _without_cache_control(tool), tool, "tool")
    for i, block in enumerate(_blocks(body.get("system"))):
        kind = str(block.get("type")) if isinstance(block, dict) else "?"
        yield _element(f"system.{i}", _without_cache_control(block), block, kind)
    messages = body.get("messages")
    for i, message in enumerate(messages if isinstance(messages, list) else []):
        if not isinstance(message, dict):
            continue
        for j, block in enumerate(_blocks(message.get("content"))):
            kind = str(block.get("type")) if isinstance(block, dict) else "?"
            value = [message.get("role"), _without_cache_control(block)]
            yield _element(f"messages.{i}.content.{j}", value, block, kind)


def prompt_tokens(body: dict[str, Any]) -> int:
    """The input tokens of a request: what count_tokens answers, and what usage adds up to."""
    return sum(e.tokens for e in prompt_elements(body))


# -- output ------------------------------------------------------------------------------------


def _output_text(block: dict[str, Any]) -> str | None:
    """The cuttable text of a block (text, thinking), or None for a block that is not cut."""
    if block.get("type") == "text":
        return str(block.get("text", ""))
    if block.get("type") == "thinking":
        return str(block.get("thinking", ""))
    return None


def block_output_tokens(block: dict[str, Any]) -> int:
    """Output tokens a reply block costs (hidden thinking included)."""
    said = _output_text(block)
    if said is not None:
        return estimate_tokens(said) if said else 0
    if block.get("type") == "tool_use":
        return estimate_tokens({"name": block.get("name"), "input": block.get("input")})
    return estimate_tokens(_without_cache_control(block))


def output_tokens(content: list[dict[str, Any]]) -> int:
    """Output tokens of a reply's content (at least 1, as the API reports for an empty reply)."""
    return max(1, sum(block_output_tokens(b) for b in content))


def thinking_tokens(content: list[dict[str, Any]]) -> int:
    """The part of :func:`output_tokens` spent thinking."""
    return sum(block_output_tokens(b) for b in content if b.get("type") in ("thinking", "redacted_thinking"))


def truncate(content: list[dict[str, Any]], limit: int) -> tuple[list[dict[str, Any]], bool]:
    """``content`` cut after ``limit`` output tokens, and whether it was cut.

    A text or thinking block that does not fit is cut mid-way (an empty remainder is dropped);
    a tool_use block that does not fit is kept with an empty ``input``, and under ``CUT_JSON``
    the prefix of its input's JSON a stream sends before the cut (unfinished JSON, as the real
    API streams it); nothing after the cut survives.
    """
    kept: list[dict[str, Any]] = []
    left = limit
    for block in content:
        cost = block_output_tokens(block)
        if cost <= left:
            kept.append(copy.deepcopy(block))
            left -= cost
            continue
        said = _output_text(block)
        if said is not None:
            part = said[: left * CHARS_PER_TOKEN]
            if part:
                key = "text" if block.get("type") == "text" else "thinking"
                kept.append({**copy.deepcopy(block), key: part})
        elif block.get("type") == "tool_use":
            raw = json.dumps(block.get("input", {}))
            kept.append({**copy.deepcopy(block), "input": {}, CUT_JSON: raw[: min(len(raw) - 1, left * CHARS_PER_TOKEN)]})
        return kept, True
    return kept, False
