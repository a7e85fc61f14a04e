"""What the server received: recorded requests, their JSON-lines log, and turn bookkeeping.

* Every request is recorded as a :class:`RecordedRequest`. The per-turn bookkeeping
  (:func:`turn_stats`) is a pure function of the records, so the same numbers come out of an
  in-process server and out of the JSON-lines log of a server in another process.

Turn bookkeeping: a turn is *answered* when a :class:`Reply` for it was sent in full; it is
*completed* when, in addition, a later request carries one of those replies as its assistant
message number ``turn`` (compared block by block: text, tool_use id/name/input; empty text
blocks ignored). "Answered" alone proves little: a reply written to a client that was just
killed can still land in the kernel's socket buffer. A request that arrives for a completed
turn is a *repeat*: a durable agent never sends one, because it logged the reply before it
moved on. Only ``/v1/messages`` requests count toward turns: ``count_tokens`` calls and
cache pre-warming requests (``max_tokens: 0``) are recorded with their ``endpoint`` and
``outcome`` but never touch the turn counters or the scenario's attempts. A request of a Message
Batch (``endpoint == "batch_request"``) counts toward its turn like a message request.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.fakes.messages_api.content import text


@dataclass
class RecordedRequest:
    """One request the server received, and what it did about it."""

    index: int  # arrival order, from 0
    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    body: Any  # the parsed JSON body, or None when it was not JSON
    turn: int | None  # number of assistant messages in body["messages"]; None when unreadable
    stream: bool
    attempt: int | None = None  # 1-based, among this turn's requests that reached the scenario
    # pending | reply | error | stream_error | dropped | aborted (client left mid-answer)
    # | broken_stream | rejected (401/400/404 from validation) | unscripted (the scenario had no
    # answer) | counted (count_tokens answered) | prewarm (max_tokens 0: cache written, no reply)
    outcome: str = "pending"
    status: int | None = None  # HTTP status sent; None if no status line was sent
    error_type: str | None = None
    error_message: str | None = None
    reply: dict[str, Any] | None = None  # the message sent, when outcome == "reply"
    request_id: str = ""
    received_at: float = 0.0
    finished_at: float | None = None
    # "messages" | "count_tokens" | "batch_*" (the Message Batches endpoints; "batch_request": one
    # request of a batch, recorded when its batch ends) | None (any other path)
    endpoint: str | None = "messages"
    # The usage reported (a reply's, or message_start's for a stream that broke), or
    # {"input_tokens": N} for count_tokens: how to read cache reads/writes per request.
    usage: dict[str, Any] | None = None

    @property
    def rejected(self) -> bool:
        """Refused by the server's validation (credentials, conversation shape)."""
        return self.outcome == "rejected"

    @property
    def messages(self) -> list[Any]:
        """The request's ``messages`` (empty when absent or malformed)."""
        msgs = self.body.get("messages") if isinstance(self.body, dict) else None
        return msgs if isinstance(msgs, list) else []

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RecordedRequest:
        """The record back from :meth:`to_json`."""
        return cls(**data)


@dataclass
class TurnStats:
    """What happened at one turn."""

    turn: int
    requests: int = 0  # requests that reached the scenario (not refused by validation)
    rejected: int = 0  # requests refused by validation (400/401)
    replies: int = 0  # successful replies sent in full
    completed: bool = False  # a reply was sent and a later request carried it
    repeats: int = 0  # requests that arrived after the turn was completed (should be 0)


def _content_key(content: Any) -> tuple[tuple[str, ...], ...]:
    """A comparable form of message content: text and tool_use blocks, empty text ignored."""
    blocks = [text(content)] if isinstance(content, str) else content if isinstance(content, list) else []
    key: list[tuple[str, ...]] = []
    for b in blocks:
        if not isinstance(b, dict):
            continue
        if b.get("type") == "text":
            if b.get("text"):
                key.append(("text", str(b["text"])))
        elif b.get("type") == "tool_use":
            key.append(("tool_use", str(b.get("id")), str(b.get("name")), json.dumps(b.get("input"), sort_keys=True)))
        else:
            key.append((str(b.get("type")),))
    return tuple(key)


def turn_stats(records: Iterable[RecordedRequest]) -> dict[int, TurnStats]:
    """Per-turn counters from the records, in arrival order (see the module docstring)."""
    stats: dict[int, TurnStats] = {}
    sent: dict[int, set[tuple[tuple[str, ...], ...]]] = {}
    for r in sorted(records, key=lambda r: r.index):
        if r.turn is None or r.endpoint not in ("messages", "batch_request") or r.outcome == "prewarm":
            continue
        s = stats.setdefault(r.turn, TurnStats(r.turn))
        if s.completed:
            s.repeats += 1
        if r.rejected:
            s.rejected += 1
        else:
            s.requests += 1
        # Any request that carries a reply shows the client had it, even one refused later.
        said = [m for m in r.messages if isinstance(m, dict) and m.get("role") == "assistant"]
        for u, msg in enumerate(said):
            if u in sent and not stats[u].completed and _content_key(msg.get("content")) in sent[u]:
                stats[u].completed = True
        if r.outcome == "reply" and r.reply is not None:
            s.replies += 1
            sent.setdefault(r.turn, set()).add(_content_key(r.reply["content"]))
    return stats


@dataclass(frozen=True)
class UsageTotals:
    """The usage the server reported over a set of message requests (what a bill is made of)."""

    requests: int = 0  # message requests that reported a usage
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_input_tokens: int = 0
    ephemeral_5m_input_tokens: int = 0
    ephemeral_1h_input_tokens: int = 0

    @property
    def cache_creation_input_tokens(self) -> int:
        """Cache writes, both TTLs."""
        return self.ephemeral_5m_input_tokens + self.ephemeral_1h_input_tokens


def usage_totals(records: Iterable[RecordedRequest]) -> UsageTotals:
    """Sum the usage of every message request that reported one (replies, pre-warms, streams cut
    after ``message_start``); ``count_tokens`` calls cost nothing and are left out."""
    sums = dict.fromkeys(("requests", "input_tokens", "output_tokens", "cache_read_input_tokens",
                          "ephemeral_5m_input_tokens", "ephemeral_1h_input_tokens"), 0)
    for r in records:
        if r.endpoint != "messages" or not r.usage:
            continue
        used = r.usage
        split = used.get("cache_creation") or {}
        written = int(used.get("cache_creation_input_tokens") or 0)
        one_hour = int(split.get("ephemeral_1h_input_tokens") or 0)
        sums["requests"] += 1
        sums["input_tokens"] += int(used.get("input_tokens") or 0)
        sums["output_tokens"] += int(used.get("output_tokens") or 0)
        sums["cache_read_input_tokens"] += int(used.get("cache_read_input_tokens") or 0)
        sums["ephemeral_1h_input_tokens"] += one_hour
        sums["ephemeral_5m_input_tokens"] += written - one_hour
    return UsageTotals(**sums)


def read_request_log(path: str | Path) -> list[RecordedRequest]:
    """The records in a JSON-lines request log (the last line per request wins; a torn line is skipped)."""
    latest: dict[int, RecordedRequest] = {}
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    for line in lines:
        try:
            rec = RecordedRequest.from_json(json.loads(line))
        except (ValueError, TypeError):
            continue  # the server was killed while writing this line
        latest[rec.index] = rec
    return [latest[i] for i in sorted(latest)]
