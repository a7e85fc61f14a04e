"""Prompt caching as the platform docs describe it: breakpoints, prefixes, TTLs, accounting.

* A *breakpoint* is a block with ``cache_control`` (tools, system blocks, message content
  blocks), plus the request's top-level ``cache_control``, which marks the last cacheable
  block (the last message block that is not a thinking block). At most 4 per request (the
  top-level marker takes a slot unless it lands on a block already marked); a ``1h``
  breakpoint may not follow a ``5m`` one. Thinking blocks and empty text blocks cannot carry
  one. Each rule is a 400, as from the real API.
* The cache is per server and per model: the key is the model and the hash of the canonical
  prompt elements (:mod:`~tests.fakes.messages_api.tokens`) up to and including the
  breakpoint; the message part of the chain also depends on the request's ``thinking`` config,
  since the docs say a change of thinking parameters invalidates cached message prefixes (tools
  and system stay cached). A request reads the longest cached prefix that ends at one of its breakpoints or
  at most ``LOOKBACK`` blocks before one (the docs' "about 20 blocks" automatic lookback), writes every
  breakpoint prefix beyond it (each segment at the TTL of the breakpoint that ends it), and
  pays the rest as ``input_tokens``. A read refreshes the entry's lifetime; marking a live
  prefix with a longer TTL extends it to that TTL.
* A prefix shorter than the minimum cacheable length is neither written nor read, as on the
  real API (1,024 to 4,096 tokens depending on the model); the fake's minimum is 0 by default
  so tests with short prompts see caching, and is configurable per model.
"""

from __future__ import annotations

import hashlib
import itertools
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tests.fakes.messages_api.tokens import Element, canonical_json, prompt_elements

MAX_BREAKPOINTS = 4
LOOKBACK = 20
TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}
UNCACHEABLE = ("thinking", "redacted_thinking")


@dataclass(frozen=True)
class Breakpoint:
    """A cache breakpoint: the prefix ends after element ``end - 1``."""

    end: int  # prefix length, in elements
    ttl: str  # "5m" | "1h"
    where: str


def _check_marker(where: str, marker: Any) -> str | None:
    if not isinstance(marker, dict):
        return f"{where}.cache_control: Input should be a valid dictionary"
    if marker.get("type") != "ephemeral":
        return f"{where}.cache_control.type: Input should be 'ephemeral'"
    extra = sorted(set(marker) - {"type", "ttl"})
    if extra:
        return f"{where}.cache_control.{extra[0]}: Extra inputs are not permitted"
    if "ttl" in marker and marker["ttl"] not in TTL_SECONDS:
        return f"{where}.cache_control.ttl: Input should be '5m' or '1h'"
    return None


def breakpoints(body: dict[str, Any], elements: list[Element] | None = None) -> tuple[list[Breakpoint], str | None]:
    """The request's breakpoints in prompt order, or the API's 400 message."""
    elements = prompt_elements(body) if elements is None else elements
    found: list[Breakpoint] = []
    for k, e in enumerate(elements):
        if e.cache_control is None:
            continue
        problem = _check_marker(e.where, e.cache_control)
        if problem:
            return [], problem
        if e.block_type in UNCACHEABLE:
            return [], f"{e.where}: `cache_control` cannot be set on `{e.block_type}` blocks"
        if e.empty:
            return [], f"{e.where}: cache_control cannot be set for empty text blocks"
        found.append(Breakpoint(k + 1, e.cache_control.get("ttl", "5m"), e.where))
    top = body.get("cache_control")
    if top is not None:
        problem = _check_marker("body", top)
        if problem:
            return [], problem.replace("body.", "", 1)
        last = max((k for k, e in enumerate(elements) if e.where.startswith("messages.") and e.block_type not in UNCACHEABLE), default=None)
        if last is not None and all(b.end != last + 1 for b in found):
            found.append(Breakpoint(last + 1, top.get("ttl", "5m"), "cache_control"))
    if len(found) > MAX_BREAKPOINTS:
        return [], f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {len(found)}."
    found.sort(key=lambda b: b.end)
    for earlier, later in itertools.pairwise(found):
        if earlier.ttl == "5m" and later.ttl == "1h":
            return [], (
                f"{later.where}: a cache_control breakpoint with ttl='1h' cannot come after one with ttl='5m' "
                f"({earlier.where}); longer TTLs must come first"
            )
    return found, None


@dataclass(frozen=True)
class CacheAccount:
    """How one request's input tokens split between cache reads, cache writes and plain input."""

    input_tokens: int
    cache_read_input_tokens: int
    ephemeral_5m_input_tokens: int
    ephemeral_1h_input_tokens: int
    breakpoints: tuple[Breakpoint, ...] = ()

    @property
    def cache_creation_input_tokens(self) -> int:
        """Tokens written to the cache, both TTLs."""
        return self.ephemeral_5m_input_tokens + self.ephemeral_1h_input_tokens

    @property
    def total(self) -> int:
        """All input tokens: what count_tokens answers for the same request."""
        return self.input_tokens + self.cache_read_input_tokens + self.cache_creation_input_tokens

    def usage(self, output_tokens: int) -> dict[str, Any]:
        """The ``usage`` object of a reply, shaped like ``anthropic.types.Usage``."""
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": output_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
            "cache_creation": {
                "ephemeral_5m_input_tokens": self.ephemeral_5m_input_tokens,
                "ephemeral_1h_input_tokens": self.ephemeral_1h_input_tokens,
            },
        }


@dataclass
class _Entry:
    tokens: int
    ttl: str
    expires: float


@dataclass
class PromptCache:
    """The server's cache of prompt prefixes, keyed by (model, prefix hash)."""

    min_cacheable_tokens: int | Mapping[str, int] = 0  # per model: a mapping (missing: 0)
    clock: Callable[[], float] = time.monotonic
    _entries: dict[tuple[str, str], _Entry] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def minimum(self, model: str) -> int:
        """The minimum cacheable prefix length for ``model``."""
        if isinstance(self.min_cacheable_tokens, Mapping):
            return int(self.min_cacheable_tokens.get(model, 0))
        return int(self.min_cacheable_tokens)

    def clear(self) -> None:
        """Forget every entry (as if every TTL had run out)."""
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def account(self, body: dict[str, Any], *, commit: bool = True) -> CacheAccount:
        """Split the request's input tokens; with ``commit``, write and refresh its prefixes."""
        model = str(body.get("model"))
        elements = prompt_elements(body)
        marks, _ = breakpoints(body, elements)
        cumulative = [0]
        hashes = [hashlib.sha256(model.encode()).hexdigest()]
        salted = False
        for e in elements:
            cumulative.append(cumulative[-1] + e.tokens)
            salt = ""
            if e.where.startswith("messages.") and not salted:
                salt, salted = "thinking=" + canonical_json(body.get("thinking")), True
            hashes.append(hashlib.sha256((hashes[-1] + salt + "\n" + e.canonical).encode()).hexdigest())
        floor = self.minimum(model)
        marks = [b for b in marks if cumulative[b.end] >= floor and cumulative[b.end] > 0]
        now = self.clock()
        with self._lock:
            hit = 0
            for b in marks:
                for end in range(b.end, max(0, b.end - LOOKBACK - 1), -1):
                    entry = self._entries.get((model, hashes[end]))
                    if entry is not None and entry.expires > now and end > hit:
                        hit = end
                        break
            written = {"5m": 0, "1h": 0}
            start = hit
            for b in marks:
                if b.end > start:
                    written[b.ttl] += cumulative[b.end] - cumulative[start]
                    start = b.end
            if commit:
                self._commit(model, hashes, cumulative, marks, hit, now)
        read = cumulative[hit]
        total = cumulative[-1]
        return CacheAccount(total - read - written["5m"] - written["1h"], read, written["5m"], written["1h"], tuple(marks))

    def _commit(self, model: str, hashes: list[str], cumulative: list[int], marks: list[Breakpoint], hit: int, now: float) -> None:
        """Write the breakpoint prefixes; a read (or a re-marked live prefix) refreshes, never shortens, a lifetime."""
        if hit:
            entry = self._entries[(model, hashes[hit])]
            entry.expires = max(entry.expires, now + TTL_SECONDS[entry.ttl])
        for b in marks:
            key = (model, hashes[b.end])
            old = self._entries.get(key)
            if old is None or old.expires <= now:
                self._entries[key] = _Entry(cumulative[b.end], b.ttl, now + TTL_SECONDS[b.ttl])
            elif TTL_SECONDS[b.ttl] > TTL_SECONDS[old.ttl] or old.expires < now + TTL_SECONDS[b.ttl]:
                longer = b.ttl if TTL_SECONDS[b.ttl] > TTL_SECONDS[old.ttl] else old.ttl
                self._entries[key] = _Entry(old.tokens, longer, max(old.expires, now + TTL_SECONDS[b.ttl]))
