"""A loopback HTTP server that speaks the Anthropic Messages API, for tests.

Design:

* The real ``anthropic`` SDK (2.x, built on httpx2, which respx/pytest-httpx cannot see) talks
  to this server over TCP: in-process (a ``ThreadingHTTPServer`` in a daemon thread), from real
  Jupyter kernels via ``ANTHROPIC_BASE_URL``, or as a separate process
  (``python -m tests.fakes.messages_api --port P --scenario FILE.json --log FILE.jsonl``).
* Replies depend on the conversation, not on a global queue. The *turn* of a request is the
  number of assistant messages in its ``messages``; a crashed-and-resumed agent that re-sends
  the request of an unfinished turn gets that turn's answer again.
* A :class:`Scenario` maps a validated request to an *action*: a :class:`Reply` (sent as JSON,
  or as Server-Sent Events when the body has ``"stream": true``) or a fault: :class:`Error`
  (any status, error type, retry-after headers), :class:`StreamError` (HTTP 200, then
  ``event: error``), :class:`Delay` (wait, then act) or :class:`Drop` (close the connection
  without an answer, or mid-stream). :class:`ScriptedScenario` scripts one entry per turn; a
  list entry is consumed one action per attempt at that turn, and its last action repeats.
* Strict where the real API is strict: 401 without credentials; 400 without ``model`` or
  ``max_tokens``, for an empty conversation, a first message not from the user, roles that do
  not alternate, empty content, a ``tool_use`` not answered by a ``tool_result`` in the next
  message, a ``tool_result`` answering no ``tool_use``. Refused requests are recorded
  (``outcome == "rejected"``) and never reach the scenario.
* Every request is recorded as a :class:`RecordedRequest`. The per-turn bookkeeping
  (:func:`turn_stats`) is a pure function of the records, so the same numbers come out of an
  in-process server and out of the JSON-lines log of a server in another process.
* Standard library only: the subprocess starts fast and never imports anthropic.

Turn bookkeeping: a turn is *answered* when a :class:`Reply` for it was sent in full; it is
*completed* when, in addition, a later request carries one of those replies as its assistant
message number ``turn`` (compared block by block: text, tool_use id/name/input; empty text
blocks ignored). "Answered" alone proves little: a reply written to a client that was just
killed can still land in the kernel's socket buffer. A request that arrives for a completed
turn is a *repeat*: a durable agent never sends one, because it logged the reply before it
moved on.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import IO, Any, ClassVar, TypeAlias
from urllib.parse import urlsplit

STOP_REASONS = (
    "end_turn",
    "tool_use",
    "max_tokens",
    "stop_sequence",
    "pause_turn",
    "refusal",
    "model_context_window_exceeded",
)

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

REPO = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------------------------------------
# Building messages


def new_id(prefix: str) -> str:
    """A fresh id shaped like the API's (``toolu_01...``, ``msg_01...``, ``req_01...``)."""
    alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
    return f"{prefix}_01" + "".join(secrets.choice(alphabet) for _ in range(22))


def text(value: str) -> dict[str, Any]:
    """A text content block."""
    return {"type": "text", "text": value}


def tool_use(name: str, input: dict[str, Any] | None = None, *, id: str | None = None) -> dict[str, Any]:
    """A tool_use content block; the id is fixed when the block is built, so retries see the same."""
    return {"type": "tool_use", "id": id or new_id("toolu"), "name": name, "input": dict(input or {})}


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
) -> dict[str, int]:
    """A usage object as the API reports it."""
    return {
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "cache_creation_input_tokens": cache_creation_input_tokens,
        "cache_read_input_tokens": cache_read_input_tokens,
    }


def _blocks(parts: Iterable[str | dict[str, Any]]) -> list[dict[str, Any]]:
    return [text(p) if isinstance(p, str) else dict(p) for p in parts]


def user(*parts: str | dict[str, Any]) -> dict[str, Any]:
    """A user message: one string stays a string, anything else becomes a list of blocks."""
    if len(parts) == 1 and isinstance(parts[0], str):
        return {"role": "user", "content": parts[0]}
    return {"role": "user", "content": _blocks(parts)}


def assistant(*parts: str | dict[str, Any]) -> dict[str, Any]:
    """An assistant message (pass ``*reply.content`` to echo a scripted reply)."""
    return {"role": "assistant", "content": _blocks(parts)}


# ---------------------------------------------------------------------------------------------
# Actions


@dataclass
class Reply:
    """A successful answer: a message with these content blocks (JSON, or SSE when streaming)."""

    kind: ClassVar[str] = "reply"
    content: list[dict[str, Any]]
    stop_reason: str = "end_turn"
    stop_sequence: str | None = None
    usage: dict[str, int] | None = None  # None: estimated from the request and reply sizes
    model: str | None = None  # None: echo the request's model
    id: str | None = None  # None: a fresh msg_ id per response, as the real API does
    event_delay: float = 0.0  # seconds between SSE events, to kill a client mid-stream


@dataclass
class Error:
    """An HTTP error answer: ``{"type":"error","error":{"type":...,"message":...}}``."""

    kind: ClassVar[str] = "error"
    status: int
    error_type: str | None = None  # None: the type the real API uses for this status
    message: str | None = None
    retry_after: str | int | float | None = None  # header `retry-after` (seconds)
    retry_after_ms: int | float | None = None  # header `retry-after-ms`
    headers: dict[str, str] = field(default_factory=dict)  # e.g. {"x-should-retry": "false"}

    def resolved_type(self) -> str:
        """The error type sent."""
        if self.error_type:
            return self.error_type
        return ERROR_TYPES.get(self.status, "api_error" if self.status >= 500 else "invalid_request_error")


@dataclass
class StreamError:
    """HTTP 200, ``message_start`` (and ``partial_text``, if any), then an ``event: error``.

    A non-streaming request gets the HTTP status of the error type instead (529 for
    ``overloaded_error``), since the real API can only fail mid-stream on a stream.
    """

    kind: ClassVar[str] = "stream_error"
    error_type: str = "overloaded_error"
    message: str | None = None
    partial_text: str = ""


@dataclass
class Delay:
    """Wait ``seconds`` (the request stays in flight), then perform ``then``."""

    kind: ClassVar[str] = "delay"
    seconds: float
    then: Action


@dataclass
class Drop:
    """Close the connection without an answer; with ``mid_stream``, after a partial SSE stream."""

    kind: ClassVar[str] = "drop"
    mid_stream: bool = False


Action: TypeAlias = "Reply | Error | StreamError | Delay | Drop"
ACTION_TYPES: dict[str, type[Any]] = {c.kind: c for c in (Reply, Error, StreamError, Delay, Drop)}


def reply(
    *parts: str | dict[str, Any],
    stop_reason: str | None = None,
    stop_sequence: str | None = None,
    usage: dict[str, int] | None = None,
    model: str | None = None,
    id: str | None = None,
    event_delay: float = 0.0,
) -> Reply:
    """A :class:`Reply`; strings become text blocks; stop_reason defaults from the blocks."""
    content = _blocks(parts)
    if stop_reason is None:
        stop_reason = "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn"
    return Reply(content, stop_reason, stop_sequence, usage, model, id, event_delay)


def action_to_json(action: Action) -> dict[str, Any]:
    """The JSON form of an action: its fields plus ``"type"``."""
    data: dict[str, Any] = {"type": action.kind}
    for f in dataclasses.fields(action):
        value = getattr(action, f.name)
        data[f.name] = action_to_json(value) if f.name == "then" else copy.deepcopy(value)
    return data


def action_from_json(data: dict[str, Any]) -> Action:
    """An action from its JSON form; ``{"type": "reply", "text": "hi"}`` is a shorthand."""
    fields = dict(data)
    cls = ACTION_TYPES[fields.pop("type")]
    if cls is Reply and "content" not in fields:
        fields["content"] = [text(fields.pop("text"))]
    if cls is Delay:
        fields["then"] = action_from_json(fields["then"])
    action: Action = cls(**fields)
    return action


# ---------------------------------------------------------------------------------------------
# Records and per-turn bookkeeping


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
    # | rejected (401/400/404 from validation) | unscripted (the scenario had no answer)
    outcome: str = "pending"
    status: int | None = None  # HTTP status sent; None if no status line was sent
    error_type: str | None = None
    error_message: str | None = None
    reply: dict[str, Any] | None = None  # the message sent, when outcome == "reply"
    request_id: str = ""
    received_at: float = 0.0
    finished_at: float | None = None

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
        if r.turn is None:
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


# ---------------------------------------------------------------------------------------------
# Scenarios


class ScenarioExhausted(LookupError):
    """The scenario has no answer for this request (answered with a 400, outcome "unscripted")."""


class Scenario:
    """Maps a validated request (its ``turn`` and ``attempt`` set) to an action.

    Called under the server's lock, so a stateful scenario needs no lock of its own.
    """

    def action(self, request: RecordedRequest) -> Action:
        """The action for this request."""
        raise NotImplementedError


class FunctionScenario(Scenario):
    """A scenario given as a function of the request."""

    def __init__(self, fn: Callable[[RecordedRequest], Action]) -> None:
        self.fn = fn

    def action(self, request: RecordedRequest) -> Action:
        """``fn(request)``."""
        return self.fn(request)


class ScriptedScenario(Scenario):
    """``turns[t]`` answers turn t: one action, or a list consumed one action per attempt.

    When a list runs out its last action repeats, so a resumed agent that re-sends an answered
    turn gets the same reply again.
    """

    def __init__(self, turns: Sequence[Action | Sequence[Action]]) -> None:
        self.turns: list[list[Action]] = []
        for t, entry in enumerate(turns):
            actions: list[Any] = list(entry) if isinstance(entry, list | tuple) else [entry]
            if not actions or not all(isinstance(a, tuple(ACTION_TYPES.values())) for a in actions):
                raise TypeError(f"turn {t}: expected an action or a non-empty list of actions, got {entry!r}")
            self.turns.append(actions)

    def action(self, request: RecordedRequest) -> Action:
        """The scripted action for this turn and attempt."""
        turn, attempt = request.turn or 0, request.attempt or 1
        if turn >= len(self.turns):
            raise ScenarioExhausted(f"the scenario has {len(self.turns)} turn(s); no reply for turn {turn}")
        script = self.turns[turn]
        return script[min(attempt, len(script)) - 1]

    def to_json(self) -> dict[str, Any]:
        """``{"turns": [[action, ...], ...]}``."""
        return {"turns": [[action_to_json(a) for a in actions] for actions in self.turns]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ScriptedScenario:
        """From :meth:`to_json`'s form; a turn may also be a single action object."""
        turns: list[Action | list[Action]] = []
        for entry in data["turns"]:
            if isinstance(entry, list):
                turns.append([action_from_json(a) for a in entry])
            else:
                turns.append(action_from_json(entry))
        return cls(turns)

    def dump(self, path: str | Path) -> Path:
        """Write the JSON form to ``path``."""
        path = Path(path)
        path.write_text(json.dumps(self.to_json(), indent=1), encoding="utf-8")
        return path

    @classmethod
    def load(cls, path: str | Path) -> ScriptedScenario:
        """Read a JSON scenario file."""
        return cls.from_json(json.loads(Path(path).read_text(encoding="utf-8")))


# ---------------------------------------------------------------------------------------------
# Validation: the rules the real API enforces that an agent loop can break


def check_credentials(headers: dict[str, str], api_key: str | None = None) -> str | None:
    """None if the request carries credentials (``x-api-key`` or a Bearer token), else a message."""
    auth = headers.get("authorization", "")
    bearer = auth[7:].strip() if auth.lower().startswith("bearer ") else ""
    given = headers.get("x-api-key", "").strip() or bearer
    if not given:
        return "x-api-key header is required"
    if api_key is not None and given != api_key:
        return "invalid x-api-key"
    return None


def validate_body(body: Any) -> str | None:
    """None if the body is a valid Messages request, else the API's 400 message."""
    if not isinstance(body, dict):
        return "body: Input should be a valid dictionary"
    if "model" not in body:
        return "model: Field required"
    if "max_tokens" not in body:
        return "max_tokens: Field required"
    max_tokens = body["max_tokens"]
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        return "max_tokens: Input should be an integer greater than or equal to 1"
    messages = body.get("messages")
    if messages is None:
        return "messages: Field required"
    if not isinstance(messages, list):
        return "messages: Input should be a valid list"
    if not messages:
        return "messages: at least one message is required"
    return _validate_messages(messages)


def _validate_messages(messages: list[Any]) -> str | None:
    tool_use_ids: list[list[str]] = []  # per message
    tool_result_ids: list[list[str]] = []
    seen_tool_use: set[str] = set()
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ("user", "assistant"):
            return f"messages.{i}.role: Input should be 'user' or 'assistant'"
        content = m.get("content")
        if isinstance(content, str):
            blocks: list[Any] = [text(content)] if content else []
        elif isinstance(content, list):
            blocks = content
        else:
            return f"messages.{i}.content: Input should be a valid string or list"
        if not blocks and not (i == len(messages) - 1 and m["role"] == "assistant"):
            return f"messages.{i}: all messages must have non-empty content except for the optional final assistant message"
        uses: list[str] = []
        results: list[str] = []
        for j, b in enumerate(blocks):
            if not isinstance(b, dict) or not isinstance(b.get("type"), str):
                return f"messages.{i}.content.{j}: Input should be a valid content block with a `type`"
            kind = b["type"]
            if kind == "text" and not (isinstance(b.get("text"), str) and b["text"]):
                return "messages: text content blocks must be non-empty"
            if kind == "tool_use":
                if m["role"] != "assistant":
                    return f"messages.{i}.content.{j}: `tool_use` blocks can only be in `assistant` messages"
                if b.get("id") in seen_tool_use:
                    return f"messages.{i}.content.{j}: `tool_use` ids must be unique: {b.get('id')}"
                seen_tool_use.add(str(b.get("id")))
                uses.append(str(b.get("id")))
            if kind == "tool_result":
                if m["role"] != "user":
                    return f"messages.{i}.content.{j}: `tool_result` blocks can only be in `user` messages"
                if len(results) != j:
                    return f"messages.{i}.content.{j}: `tool_result` blocks must come first in the content, before any other block"
                results.append(str(b.get("tool_use_id")))
        tool_use_ids.append(uses)
        tool_result_ids.append(results)
    if messages[0]["role"] != "user":
        return 'messages: first message must use the "user" role'
    for i in range(1, len(messages)):
        if messages[i]["role"] == messages[i - 1]["role"]:
            role = messages[i]["role"]
            return f'messages: roles must alternate between "user" and "assistant", but found multiple "{role}" roles in a row'
    for i in range(len(messages)):
        previous = set(tool_use_ids[i - 1]) if i > 0 else set()
        for j, rid in enumerate(tool_result_ids[i]):
            if rid not in previous:
                return (
                    f"messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: {rid}. "
                    "Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
                )
        following = set(tool_result_ids[i + 1]) if i + 1 < len(messages) else set()
        missing = [u for u in tool_use_ids[i] if u not in following]
        if missing:
            return (
                f"messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: "
                f"{', '.join(missing)}. Each `tool_use` block must have a corresponding `tool_result` block "
                "in the next message."
            )
    return None


# ---------------------------------------------------------------------------------------------
# Wire format


def error_body(error_type: str, message: str, request_id: str) -> dict[str, Any]:
    """The real API's error body."""
    return {"type": "error", "error": {"type": error_type, "message": message}, "request_id": request_id}


def _estimate_tokens(value: Any) -> int:
    # About four characters per token, so a timeline shows plausible numbers.
    return max(1, len(json.dumps(value)) // 4)


def build_message(spec: Reply, request: RecordedRequest) -> dict[str, Any]:
    """The message JSON for a reply to this request."""
    body = request.body if isinstance(request.body, dict) else {}
    content = copy.deepcopy(spec.content)
    used = dict(spec.usage) if spec.usage is not None else usage(
        _estimate_tokens([body.get("system"), body.get("tools"), body.get("messages")]), _estimate_tokens(content)
    )
    return {
        "id": spec.id or new_id("msg"),
        "type": "message",
        "role": "assistant",
        "model": spec.model or body.get("model") or "claude-fake",
        "content": content,
        "stop_reason": spec.stop_reason,
        "stop_sequence": spec.stop_sequence,
        "usage": used,
    }


def _pieces(value: str, n: int) -> list[str]:
    """``value`` cut into about ``n`` pieces (at least one, possibly empty)."""
    size = max(1, -(-len(value) // n))
    return [value[k : k + size] for k in range(0, len(value), size)] or [""]


def _block_events(index: int, block: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """content_block_start, deltas and content_block_stop for one block."""
    kind = block.get("type")
    deltas: list[dict[str, Any]] = []
    if kind == "text":
        start: dict[str, Any] = {**block, "text": ""}
        # Word by word (keeping the spaces), so text_stream yields several pieces.
        deltas = [{"type": "text_delta", "text": w} for w in re.findall(r"\s*\S+\s*|\s+", block["text"])]
    elif kind == "tool_use":
        start = {**block, "input": {}}
        raw = json.dumps(block.get("input", {}))
        # Cut mid-token, as the real API does: the SDK parses partial JSON.
        deltas = [{"type": "input_json_delta", "partial_json": p} for p in _pieces(raw, 3)]
    elif kind == "thinking":
        start = {**block, "thinking": "", "signature": ""}
        deltas = [{"type": "thinking_delta", "thinking": block.get("thinking", "")}]
        deltas.append({"type": "signature_delta", "signature": block.get("signature", "")})
    else:
        start = block  # other blocks (redacted_thinking, server tool blocks) arrive whole
    events = [("content_block_start", {"type": "content_block_start", "index": index, "content_block": start})]
    events += [("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d}) for d in deltas]
    events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    return events


def _start_events(message: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    used = message["usage"]
    start = {
        **message,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {**used, "output_tokens": min(1, used.get("output_tokens", 0))},
    }
    return [("message_start", {"type": "message_start", "message": start}), ("ping", {"type": "ping"})]


def sse_events(message: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The Server-Sent Events (name, data) that stream ``message``."""
    events = _start_events(message)
    for i, block in enumerate(message["content"]):
        events += _block_events(i, block)
    delta = {"stop_reason": message["stop_reason"], "stop_sequence": message["stop_sequence"]}
    # The final usage is cumulative: the SDK overwrites its snapshot with these numbers.
    events.append(("message_delta", {"type": "message_delta", "delta": delta, "usage": dict(message["usage"])}))
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def _sse_bytes(name: str, data: dict[str, Any]) -> bytes:
    # Both lines are needed: the SDK drops events that have no `event:` line.
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


# ---------------------------------------------------------------------------------------------
# The server


class _ClientGone(Exception):
    """The client closed the connection while we were answering."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the SDK's connection pool expects
    server_version = "FakeMessagesAPI/1.0"
    timeout = 120  # an idle keep-alive connection must not pin a thread forever
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests read ``server.requests`` instead."""

    def setup(self) -> None:
        """Track the socket so close() can end idle keep-alive connections."""
        super().setup()
        # Headers and body go out in separate writes: without NODELAY, Nagle's algorithm and
        # the client's delayed ACK add ~40 ms to every response.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.fake._track(self.connection, add=True)

    def finish(self) -> None:
        """Untrack the socket."""
        try:
            super().finish()
        finally:
            self.server.fake._track(self.connection, add=False)

    def do_POST(self) -> None:
        """Every method goes through one path: record, validate, act."""
        self.server.fake._handle(self)

    do_GET = do_PUT = do_DELETE = do_PATCH = do_POST

    # -- writing -------------------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        """Write, turning a vanished client into _ClientGone."""
        try:
            self.wfile.write(data)
            self.wfile.flush()
        except OSError as e:  # BrokenPipe, ConnectionReset
            self.close_connection = True
            raise _ClientGone from e

    def send_json(self, status: int, payload: Any, request_id: str, headers: dict[str, str] | None = None) -> None:
        """A complete JSON response."""
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("request-id", request_id)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        try:
            self.end_headers()
        except OSError as e:
            self.close_connection = True
            raise _ClientGone from e
        self.write(data)

    def start_stream(self, request_id: str) -> None:
        """Status line and headers of an SSE response (chunked, as the real API sends it)."""
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.send_header("request-id", request_id)
        try:
            self.end_headers()
        except OSError as e:
            self.close_connection = True
            raise _ClientGone from e

    def send_event(self, name: str, data: dict[str, Any]) -> None:
        """One SSE event as one chunk."""
        payload = _sse_bytes(name, data)
        self.write(b"%X\r\n%s\r\n" % (len(payload), payload))

    def end_stream(self) -> None:
        """The last chunk."""
        self.write(b"0\r\n\r\n")

    def drop(self) -> None:
        """Close the connection now, whatever was (not) sent."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    fake: MessagesAPIServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Connection resets are part of the game (kills, drops); print anything else."""
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


class MessagesAPIServer:
    """The fake Messages API on 127.0.0.1, serving from a daemon thread until close()."""

    def __init__(
        self,
        scenario: Scenario | Sequence[Action | Sequence[Action]],
        *,
        port: int = 0,
        host: str = "127.0.0.1",
        api_key: str | None = None,
        log_path: str | Path | None = None,
    ) -> None:
        self.scenario = scenario if isinstance(scenario, Scenario) else ScriptedScenario(scenario)
        self.api_key = api_key  # None: any key is accepted, but one is required
        self._cond = threading.Condition()
        self._records: list[RecordedRequest] = []
        self._attempts: dict[int, int] = {}
        self._sockets: set[socket.socket] = set()
        self._closing = threading.Event()
        self._log: IO[str] | None = open(log_path, "a", encoding="utf-8") if log_path else None  # noqa: SIM115
        self._httpd = _HTTPServer((host, port), _Handler)
        self._httpd.fake = self
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, name="fake-messages-api", daemon=True
        )
        self._thread.start()

    # -- public --------------------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The TCP port."""
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """The base URL for ``Anthropic(base_url=...)`` and ``ANTHROPIC_BASE_URL``."""
        return f"http://{self._httpd.server_address[0]!s}:{self.port}"

    @property
    def requests(self) -> list[RecordedRequest]:
        """Copies of every request received so far, in arrival order."""
        with self._cond:
            return [dataclasses.replace(r) for r in self._records]

    @property
    def rejected(self) -> list[RecordedRequest]:
        """The requests refused by validation (401/400/404)."""
        return [r for r in self.requests if r.rejected]

    def requests_at(self, turn: int) -> list[RecordedRequest]:
        """The requests of one turn."""
        return [r for r in self.requests if r.turn == turn]

    def turn_stats(self) -> dict[int, TurnStats]:
        """Per-turn counters (see :func:`turn_stats`)."""
        return turn_stats(self.requests)

    def wait_for(
        self, predicate: Callable[[list[RecordedRequest]], bool], timeout: float = 10.0
    ) -> list[RecordedRequest]:
        """Block until ``predicate(requests)`` holds; return the requests; TimeoutError if not."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                snapshot = [dataclasses.replace(r) for r in self._records]
                if predicate(snapshot):
                    return snapshot
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"fake Messages API: condition not met after {timeout}s; got {snapshot!r}")
                self._cond.wait(left)

    def wait_for_requests(self, count: int, timeout: float = 10.0) -> list[RecordedRequest]:
        """Block until at least ``count`` requests have arrived."""
        return self.wait_for(lambda rs: len(rs) >= count, timeout)

    def close(self) -> None:
        """Stop serving, end open connections and delays; idempotent."""
        if self._closing.is_set():
            return
        self._closing.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        with self._cond:
            sockets = list(self._sockets)
        for s in sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
        with self._cond:
            if self._log is not None:
                self._log.close()
                self._log = None

    def __enter__(self) -> MessagesAPIServer:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<MessagesAPIServer {self.url} requests={len(self._records)}>"

    # -- bookkeeping ---------------------------------------------------------------------------

    def _track(self, sock: socket.socket, *, add: bool) -> None:
        with self._cond:
            if add:
                self._sockets.add(sock)
            else:
                self._sockets.discard(sock)

    def _update(self, record: RecordedRequest, **changes: Any) -> None:
        """Change a record under the lock, log it, and wake waiters."""
        with self._cond:
            for name, value in changes.items():
                setattr(record, name, value)
            if record.outcome != "pending" and record.finished_at is None:
                record.finished_at = time.time()
            self._write_log(record)
            self._cond.notify_all()

    def _write_log(self, record: RecordedRequest) -> None:
        if self._log is not None:
            self._log.write(json.dumps(record.to_json()) + "\n")
            self._log.flush()

    def _receive(self, handler: _Handler, body: Any) -> RecordedRequest:
        headers: dict[str, str] = {}
        for name, value in handler.headers.items():
            key = name.lower()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        turn: int | None = None
        if isinstance(body, dict) and isinstance(body.get("messages"), list):
            turn = sum(1 for m in body["messages"] if isinstance(m, dict) and m.get("role") == "assistant")
        with self._cond:
            record = RecordedRequest(
                index=len(self._records),
                method=handler.command,
                path=handler.path,
                headers=headers,
                body=body,
                turn=turn,
                stream=isinstance(body, dict) and body.get("stream") is True,
                request_id=new_id("req"),
                received_at=time.time(),
            )
            self._records.append(record)
            self._write_log(record)
            self._cond.notify_all()
        return record

    def _choose(self, record: RecordedRequest) -> Action:
        with self._cond:
            turn = record.turn or 0
            self._attempts[turn] = self._attempts.get(turn, 0) + 1
            record.attempt = self._attempts[turn]
            return self.scenario.action(record)

    # -- handling ------------------------------------------------------------------------------

    def _handle(self, h: _Handler) -> None:
        length = int(h.headers.get("content-length") or 0)
        raw = h.rfile.read(length) if length else b""
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = None
        record = self._receive(h, body)
        try:
            self._answer(h, record, raw)
        except _ClientGone:
            self._update(record, outcome="aborted")

    def _reject(self, h: _Handler, record: RecordedRequest, status: int, error_type: str, message: str) -> None:
        self._update(record, outcome="rejected", status=status, error_type=error_type, error_message=message)
        h.send_json(status, error_body(error_type, message, record.request_id), record.request_id)

    def _answer(self, h: _Handler, record: RecordedRequest, raw: bytes) -> None:
        if h.command != "POST" or urlsplit(h.path).path.rstrip("/") != "/v1/messages":
            self._reject(h, record, 404, "not_found_error", f"Not found: {h.command} {h.path}")
            return
        problem = check_credentials(record.headers, self.api_key)
        if problem:
            self._reject(h, record, 401, "authentication_error", problem)
            return
        if "anthropic-version" not in record.headers:
            self._reject(h, record, 400, "invalid_request_error", "anthropic-version: header is required")
            return
        if record.body is None:
            self._reject(h, record, 400, "invalid_request_error", f"There was an issue with your request body: {raw[:80]!r} is not valid JSON")
            return
        problem = validate_body(record.body)
        if problem:
            self._reject(h, record, 400, "invalid_request_error", problem)
            return
        try:
            action = self._choose(record)
        except ScenarioExhausted as e:
            message = f"fake Messages API: {e}"
            self._update(record, outcome="unscripted", status=400, error_type="invalid_request_error", error_message=message)
            h.send_json(400, error_body("invalid_request_error", message, record.request_id), record.request_id)
            return
        except Exception as e:
            traceback.print_exc()
            message = f"fake Messages API: the scenario raised {e!r}"
            self._update(record, outcome="error", status=500, error_type="api_error", error_message=message)
            h.send_json(500, error_body("api_error", message, record.request_id), record.request_id)
            return
        self._perform(h, record, action)

    def _perform(self, h: _Handler, record: RecordedRequest, action: Action) -> None:
        if isinstance(action, Delay):
            # Wait on the closing event, so close() does not hang on a long delay.
            if self._closing.wait(action.seconds):
                h.drop()
                self._update(record, outcome="dropped")
                return
            self._perform(h, record, action.then)
        elif isinstance(action, Drop):
            self._drop(h, record, action)
        elif isinstance(action, Error):
            self._send_error(h, record, action)
        elif isinstance(action, StreamError):
            self._stream_error(h, record, action)
        elif isinstance(action, Reply):
            self._send_reply(h, record, action)
        else:
            raise TypeError(f"not an action: {action!r}")

    def _send_error(self, h: _Handler, record: RecordedRequest, action: Error) -> None:
        error_type = action.resolved_type()
        message = action.message or DEFAULT_ERROR_MESSAGES.get(error_type, error_type)
        headers = dict(action.headers)
        if action.retry_after is not None:
            headers["retry-after"] = str(action.retry_after)
        if action.retry_after_ms is not None:
            headers["retry-after-ms"] = str(action.retry_after_ms)
        # Record before sending: a client that reacts fast must find the outcome set.
        self._update(record, outcome="error", status=action.status, error_type=error_type, error_message=message)
        h.send_json(action.status, error_body(error_type, message, record.request_id), record.request_id, headers)

    def _stream_error(self, h: _Handler, record: RecordedRequest, action: StreamError) -> None:
        message = action.message or DEFAULT_ERROR_MESSAGES.get(action.error_type, action.error_type)
        if not record.stream:
            self._send_error(h, record, Error(ERROR_STATUS.get(action.error_type, 500), action.error_type, message))
            return
        h.start_stream(record.request_id)
        for name, data in _start_events(build_message(reply(), record)):
            h.send_event(name, data)
        if action.partial_text:
            events = _block_events(0, text(action.partial_text))[:-1]  # started, never stopped
            for name, data in events:
                h.send_event(name, data)
        self._update(record, outcome="stream_error", status=200, error_type=action.error_type, error_message=message)
        h.send_event("error", {"type": "error", "error": {"type": action.error_type, "message": message}})
        h.end_stream()

    def _drop(self, h: _Handler, record: RecordedRequest, action: Drop) -> None:
        if action.mid_stream and record.stream:
            h.start_stream(record.request_id)
            for name, data in _start_events(build_message(reply(), record)):
                h.send_event(name, data)
            for name, data in _block_events(0, text("Partial answer, then the line goes"))[:-1]:
                h.send_event(name, data)
            self._update(record, outcome="dropped", status=200)
        else:
            self._update(record, outcome="dropped")
        h.drop()

    def _send_reply(self, h: _Handler, record: RecordedRequest, spec: Reply) -> None:
        message = build_message(spec, record)
        if not record.stream:
            # Record first: a client that reacts fast must find the outcome set; a failed
            # write turns it into "aborted".
            self._update(record, outcome="reply", status=200, reply=message)
            h.send_json(200, message, record.request_id)
            return
        h.start_stream(record.request_id)
        events = sse_events(message)
        for k, (name, data) in enumerate(events):
            h.send_event(name, data)
            if spec.event_delay and k < len(events) - 1 and self._closing.wait(spec.event_delay):
                h.drop()
                self._update(record, outcome="dropped", status=200)
                return
        self._update(record, outcome="reply", status=200, reply=message)
        h.end_stream()


# ---------------------------------------------------------------------------------------------
# As a separate process


class MessagesAPIProcess:
    """The fake in a child process (``python -m tests.fakes.messages_api``); reads its request log."""

    def __init__(
        self,
        scenario: ScriptedScenario,
        directory: str | Path,
        *,
        port: int = 0,
        api_key: str | None = None,
        startup_timeout: float = 15.0,
    ) -> None:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.scenario_path = scenario.dump(directory / "fake_api_scenario.json")
        self.log_path = directory / "fake_api_requests.jsonl"
        cmd = [sys.executable, "-m", "tests.fakes.messages_api", "--port", str(port)]
        cmd += ["--scenario", str(self.scenario_path), "--log", str(self.log_path)]
        if api_key is not None:
            cmd += ["--api-key", api_key]
        env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
        env["PYTHONPATH"] = str(REPO) + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        self.proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, text=True)
        self.url = self._read_url(startup_timeout)

    def _read_url(self, timeout: float) -> str:
        box: list[str] = []
        assert self.proc.stdout is not None
        reader = threading.Thread(target=lambda: box.append(self.proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
        reader.start()
        reader.join(timeout)
        if not box or not box[0].startswith("http://"):
            self.close()
            raise RuntimeError(f"fake Messages API process did not start (exit code {self.proc.poll()}, said {box!r})")
        return box[0].strip()

    @property
    def requests(self) -> list[RecordedRequest]:
        """What the server has received so far (from its log)."""
        return read_request_log(self.log_path)

    def turn_stats(self) -> dict[int, TurnStats]:
        """Per-turn counters from the log."""
        return turn_stats(self.requests)

    def wait_for(
        self, predicate: Callable[[list[RecordedRequest]], bool], timeout: float = 10.0
    ) -> list[RecordedRequest]:
        """Poll the log until ``predicate(requests)`` holds; TimeoutError if it does not."""
        deadline = time.monotonic() + timeout
        while True:
            records = self.requests
            if predicate(records):
                return records
            if time.monotonic() > deadline:
                raise TimeoutError(f"fake Messages API process: condition not met after {timeout}s; got {records!r}")
            time.sleep(0.02)

    def close(self) -> None:
        """Terminate the process (SIGTERM, then SIGKILL)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def __enter__(self) -> MessagesAPIProcess:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


def main(argv: Sequence[str] | None = None) -> int:
    """Serve a JSON scenario until SIGTERM/SIGINT; print the URL when ready."""
    parser = argparse.ArgumentParser(prog="python -m tests.fakes.messages_api", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0: any free port (read the printed URL)")
    parser.add_argument("--scenario", required=True, help="a JSON ScriptedScenario: {\"turns\": [...]}")
    parser.add_argument("--log", help="append every request to this JSON-lines file")
    parser.add_argument("--api-key", help="accept only this key (default: any non-empty key)")
    args = parser.parse_args(argv)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    scenario = ScriptedScenario.load(args.scenario)
    with MessagesAPIServer(scenario, host=args.host, port=args.port, api_key=args.api_key, log_path=args.log) as server:
        print(server.url, flush=True)
        while not stop.wait(0.5):
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
