"""What the fake answers: actions, and the scenarios that choose one per request.

* A :class:`Scenario` maps a validated request to an *action*: a :class:`Reply` (sent as JSON,
  or as Server-Sent Events when the body has ``"stream": true``) or a fault: :class:`Error`
  (any status, error type, retry-after headers), :class:`StreamError` (HTTP 200, then
  ``event: error``), :class:`Delay` (wait, then act), :class:`Drop` (close the connection
  without an answer, or mid-stream), :class:`BrokenStream` (a 200 stream that ends cleanly
  but too early: no events at all, or no ``message_stop``) or :class:`Stall` (a 200 stream
  that goes silent, or sends only pings); in a Message Batch, :class:`Expired` (a request that expired unprocessed).
  :class:`ScriptedScenario` scripts
  one entry per turn; a list entry is consumed one action per attempt at that turn, and its
  last action repeats.
* A reply is cut at the request's ``max_tokens`` (thinking counts) or at its own
  ``max_output_tokens``, whichever is lower, and then says ``stop_reason: "max_tokens"``;
  :func:`cut_off` scripts a cut mid-thinking or mid-text, :func:`refusal` a refusal with
  ``stop_details``.
* Replies depend on the conversation, not on a global queue. The *turn* of a request is the
  number of assistant messages in its ``messages``; a crashed-and-resumed agent that re-sends
  the request of an unfinished turn gets that turn's answer again.
* Actions and scripted scenarios have a JSON form, so a scenario can be handed to the server
  in another process (``--scenario FILE.json``).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypeAlias

from tests.fakes.messages_api.content import as_blocks, text
from tests.fakes.messages_api.records import RecordedRequest
from tests.fakes.messages_api.wire import ERROR_TYPES

STOP_REASONS = (
    "end_turn",
    "tool_use",
    "max_tokens",
    "stop_sequence",
    "pause_turn",
    "refusal",
    "model_context_window_exceeded",
)


# ---------------------------------------------------------------------------------------------
# Actions


@dataclass
class Reply:
    """A successful answer: a message with these content blocks (JSON, or SSE when streaming)."""

    kind: ClassVar[str] = "reply"
    content: list[dict[str, Any]]
    stop_reason: str = "end_turn"
    stop_sequence: str | None = None
    usage: dict[str, Any] | None = None  # None: the server's accounting (tokens, cache)
    model: str | None = None  # None: the server's answering model (default: the requested one)
    id: str | None = None  # None: a fresh msg_ id per response, as the real API does
    event_delay: float = 0.0  # seconds between SSE events, to kill a client mid-stream
    stop_details: dict[str, Any] | None = None  # RefusalStopDetails: {"type": "refusal", ...}
    max_output_tokens: int | None = None  # cut the content after this many output tokens


@dataclass
class Error:
    """An HTTP error answer: ``{"type":"error","error":{"type":...,"message":...}}``."""

    kind: ClassVar[str] = "error"
    status: int
    error_type: str | None = None  # None: the type the real API uses for this status
    message: str | None = None
    retry_after: str | int | float | None = None  # header `retry-after` (seconds)
    retry_after_ms: int | float | None = None  # header `retry-after-ms`
    headers: dict[str, str] = field(default_factory=dict)  # any extra response headers
    should_retry: bool | None = None  # header `x-should-retry: true|false`, which the SDK obeys

    def response_headers(self) -> dict[str, str]:
        """The headers sent with the error."""
        headers = dict(self.headers)
        if self.retry_after is not None:
            headers["retry-after"] = str(self.retry_after)
        if self.retry_after_ms is not None:
            headers["retry-after-ms"] = str(self.retry_after_ms)
        if self.should_retry is not None:
            headers["x-should-retry"] = "true" if self.should_retry else "false"
        return headers

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
    """Wait ``seconds`` (the request stays in flight), then perform ``then``; with ``until``,
    only until that event is set (a test releases the reply at the moment it means; an event
    lives in one process, so such a delay has no JSON form)."""

    kind: ClassVar[str] = "delay"
    seconds: float
    then: Action
    until: threading.Event | None = field(default=None, compare=False)


@dataclass
class Drop:
    """Close the connection without an answer; with ``mid_stream``, after a partial SSE stream."""

    kind: ClassVar[str] = "drop"
    mid_stream: bool = False


@dataclass
class BrokenStream:
    """HTTP 200 and a stream that ends cleanly but too early.

    ``kind="empty"``: headers, then the end of the body with no event at all;
    ``kind="no_message_stop"``: the whole reply up to ``message_delta``, then the end, with no
    ``message_stop``. A non-streaming request gets an empty 200 body, or the reply's JSON cut
    in half.
    """

    kind: ClassVar[str] = "broken_stream"
    shape: str = "empty"  # "empty" | "no_message_stop"
    reply: Reply | None = None  # what "no_message_stop" streams (default: a short text reply)

    def __post_init__(self) -> None:
        if self.shape not in BROKEN_SHAPES:
            raise ValueError(f"BrokenStream shape must be one of {BROKEN_SHAPES}, got {self.shape!r}")


@dataclass
class Stall:
    """HTTP 200 and a stream that stalls: the first ``after`` events of ``reply`` (by default
    ``message_start``, a ``ping`` and the first ``content_block_start``), then nothing for
    ``seconds`` (the connection held open, as a stuck upstream holds it), then a drop.
    With ``pings``, a ``ping`` event every that many seconds instead of nothing, as the real
    API keeps a stuck generation's connection alive (``after=0``: nothing but pings).
    A non-streaming request gets nothing for ``seconds``, then a drop."""

    kind: ClassVar[str] = "stall"
    seconds: float = 30.0
    after: int = 3
    reply: Reply | None = None
    pings: float | None = None


@dataclass
class Expired:
    """A request of a Message Batch that expired before it was processed (``result.type:
    "expired"``). Only a batch's request can expire: a plain request gets a 500 saying so."""

    kind: ClassVar[str] = "expired"


BROKEN_SHAPES = ("empty", "no_message_stop")
Action: TypeAlias = "Reply | Error | StreamError | Delay | Drop | BrokenStream | Stall | Expired"
ACTION_TYPES: dict[str, type[Any]] = {
    c.kind: c for c in (Reply, Error, StreamError, Delay, Drop, BrokenStream, Stall, Expired)
}


def reply(
    *parts: str | dict[str, Any],
    stop_reason: str | None = None,
    stop_sequence: str | None = None,
    usage: dict[str, Any] | None = None,
    model: str | None = None,
    id: str | None = None,
    event_delay: float = 0.0,
    stop_details: dict[str, Any] | None = None,
    max_output_tokens: int | None = None,
) -> Reply:
    """A :class:`Reply`; strings become text blocks; stop_reason defaults from the blocks."""
    content = as_blocks(parts)
    if stop_reason is None:
        stop_reason = "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn"
    return Reply(content, stop_reason, stop_sequence, usage, model, id, event_delay, stop_details, max_output_tokens)


def refusal(*parts: str | dict[str, Any], category: str | None = None, explanation: str | None = None, **kw: Any) -> Reply:
    """A refusal: ``stop_reason: "refusal"`` with ``stop_details`` shaped like ``RefusalStopDetails``."""
    details = {"type": "refusal", "category": category, "explanation": explanation}
    return reply(*parts, stop_reason="refusal", stop_details=details, **kw)


def cut_off(*parts: str | dict[str, Any], after: int, **kw: Any) -> Reply:
    """A reply cut after ``after`` output tokens (``stop_reason: "max_tokens"``), e.g. mid-thinking."""
    return reply(*parts, max_output_tokens=after, **kw)


def action_to_json(action: Action) -> dict[str, Any]:
    """The JSON form of an action: its fields plus ``"type"``."""
    data: dict[str, Any] = {"type": action.kind}
    for f in dataclasses.fields(action):
        value = getattr(action, f.name)
        nested = f.name in ("then", "reply") and value is not None
        data[f.name] = action_to_json(value) if nested else copy.deepcopy(value)
    return data


def action_from_json(data: dict[str, Any]) -> Action:
    """An action from its JSON form; ``{"type": "reply", "text": "hi"}`` is a shorthand."""
    fields = dict(data)
    cls = ACTION_TYPES[fields.pop("type")]
    if cls is Reply and "content" not in fields:
        fields["content"] = [text(fields.pop("text"))]
    if cls is Delay:
        fields["then"] = action_from_json(fields["then"])
    if cls in (BrokenStream, Stall) and fields.get("reply") is not None:
        fields["reply"] = action_from_json(fields["reply"])
    action: Action = cls(**fields)
    return action


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


class OverloadStorm(Scenario):
    """A 529 storm on some models, as the real API has them: every request for one of
    ``models`` gets HTTP 529 with an ``overloaded_error`` body (while ``lasts`` says so); any
    other request goes to ``inner``.

    ``lasts(request)`` (default: always) ends the storm, e.g. after so many seconds;
    ``retry_after_ms`` is sent as the header when given (the real API sends none with most).
    """

    def __init__(
        self,
        inner: Scenario | Sequence[Action | Sequence[Action]],
        models: Sequence[str],
        *,
        lasts: Callable[[RecordedRequest], bool] | None = None,
        retry_after_ms: float | None = None,
    ) -> None:
        self.inner = inner if isinstance(inner, Scenario) else ScriptedScenario(inner)
        self.models = frozenset(models)
        self.lasts = lasts
        self.retry_after_ms = retry_after_ms
        self.overloaded = 0
        """How many requests the storm answered."""

    def action(self, request: RecordedRequest) -> Action:
        """529 for a stormy model while the storm lasts; else the inner scenario's action."""
        model = request.body.get("model") if isinstance(request.body, dict) else None
        if model in self.models and (self.lasts is None or self.lasts(request)):
            self.overloaded += 1
            return Error(529, "overloaded_error", "Overloaded", retry_after_ms=self.retry_after_ms)
        return self.inner.action(request)


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
