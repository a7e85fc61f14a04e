"""How each action goes on the wire, once the server has chosen it.

Every function records the outcome (and the usage reported) before it writes, so a client that
reacts fast finds it set; a failed write surfaces as ``ClientGone`` and the server turns the
outcome into "aborted". A stream that got as far as ``message_start`` has had its prompt
processed, so its cache prefixes are written like a full reply's.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from tests.fakes.messages_api.compose import compose_message
from tests.fakes.messages_api.connection import ClientGone
from tests.fakes.messages_api.content import text
from tests.fakes.messages_api.scenario import (
    Action,
    BrokenStream,
    Delay,
    Drop,
    Error,
    Expired,
    Reply,
    Stall,
    StreamError,
    reply,
)
from tests.fakes.messages_api.tokens import prompt_tokens
from tests.fakes.messages_api.wire import (
    DEFAULT_ERROR_MESSAGES,
    ERROR_STATUS,
    block_events,
    error_body,
    public,
    sse_events,
    start_events,
)

if TYPE_CHECKING:
    from tests.fakes.messages_api.connection import Handler
    from tests.fakes.messages_api.records import RecordedRequest
    from tests.fakes.messages_api.server import MessagesAPIServer


def perform(server: MessagesAPIServer, h: Handler, record: RecordedRequest, action: Action) -> None:
    """Send ``action`` as the answer to ``record``."""
    if isinstance(action, Delay):
        # Wait on the closing event, so close() does not hang on a long delay.
        if _delayed_until_closing(server, action):
            h.drop()
            server._update(record, outcome="dropped")
            return
        perform(server, h, record, action.then)
    elif isinstance(action, Drop):
        _drop(server, h, record, action)
    elif isinstance(action, Error):
        _send_error(server, h, record, action)
    elif isinstance(action, StreamError):
        _stream_error(server, h, record, action)
    elif isinstance(action, BrokenStream):
        _broken_stream(server, h, record, action)
    elif isinstance(action, Stall):
        _stall(server, h, record, action)
    elif isinstance(action, Reply):
        send_reply(server, h, record, action)
    elif isinstance(action, Expired):
        _send_error(server, h, record, Error(500, "api_error", "fake Messages API: only a Message Batch's request can expire"))
    else:
        raise TypeError(f"not an action: {action!r}")


def _delayed_until_closing(server: MessagesAPIServer, action: Delay) -> bool:
    """Wait out ``action`` (its seconds, or until its event is set first): whether the server closed meanwhile."""
    if action.until is None:
        return server._closing.wait(action.seconds)
    ends = time.monotonic() + action.seconds
    while not server._closing.is_set():
        left = ends - time.monotonic()
        if left <= 0 or action.until.wait(min(left, 0.02)):
            return False
    return True


def _body(record: RecordedRequest) -> dict[str, Any]:
    return record.body if isinstance(record.body, dict) else {}


def _send_error(server: MessagesAPIServer, h: Handler, record: RecordedRequest, action: Error) -> None:
    error_type = action.resolved_type()
    message = action.message or DEFAULT_ERROR_MESSAGES.get(error_type, error_type)
    server._update(record, outcome="error", status=action.status, error_type=error_type, error_message=message)
    h.send_json(action.status, error_body(error_type, message, record.request_id), record.request_id, action.response_headers())


def _start(server: MessagesAPIServer, h: Handler, record: RecordedRequest, spec: Reply) -> dict[str, Any]:
    """Start a stream with ``message_start`` and a ping; the message it began."""
    message = compose_message(spec, _body(record), server.context)
    server._update(record, usage=message["usage"])
    h.start_stream(record.request_id)
    for name, data in start_events(message):
        h.send_event(name, data)
    return message


def _stream_error(server: MessagesAPIServer, h: Handler, record: RecordedRequest, action: StreamError) -> None:
    message = action.message or DEFAULT_ERROR_MESSAGES.get(action.error_type, action.error_type)
    if not record.stream:
        _send_error(server, h, record, Error(ERROR_STATUS.get(action.error_type, 500), action.error_type, message))
        return
    _start(server, h, record, reply())
    if action.partial_text:
        for name, data in block_events(0, text(action.partial_text))[:-1]:  # started, never stopped
            h.send_event(name, data)
    server._update(record, outcome="stream_error", status=200, error_type=action.error_type, error_message=message)
    h.send_event("error", {"type": "error", "error": {"type": action.error_type, "message": message}})
    h.end_stream()


def _drop(server: MessagesAPIServer, h: Handler, record: RecordedRequest, action: Drop) -> None:
    if action.mid_stream and record.stream:
        _start(server, h, record, reply())
        for name, data in block_events(0, text("Partial answer, then the line goes"))[:-1]:
            h.send_event(name, data)
        server._update(record, outcome="dropped", status=200)
    else:
        server._update(record, outcome="dropped")
    h.drop()


def _broken_stream(server: MessagesAPIServer, h: Handler, record: RecordedRequest, action: BrokenStream) -> None:
    spec = action.reply or reply("An answer whose stream never says it is over.")
    if action.shape == "empty":
        server._update(record, outcome="broken_stream", status=200)
        if record.stream:
            h.start_stream(record.request_id)
            h.end_stream()
        else:
            h.send_raw(200, b"", record.request_id)
        return
    message = compose_message(spec, _body(record), server.context)
    server._update(record, outcome="broken_stream", status=200, usage=message["usage"])
    if not record.stream:
        whole = json.dumps(public(message)).encode()
        h.send_raw(200, whole[: len(whole) // 2], record.request_id)
        return
    h.start_stream(record.request_id)
    for name, data in sse_events(message)[:-1]:  # everything but message_stop
        h.send_event(name, data)
    h.end_stream()


def _stall(server: MessagesAPIServer, h: Handler, record: RecordedRequest, action: Stall) -> None:
    if record.stream:
        message = compose_message(action.reply or reply("An answer that never comes."), _body(record), server.context)
        server._update(record, usage=message["usage"])
        h.start_stream(record.request_id)
        for name, data in sse_events(message)[: action.after]:
            h.send_event(name, data)
    server._update(record, outcome="stalled", status=200 if record.stream else None)
    if record.stream and action.pings:
        _ping(server, h, action.seconds, action.pings)
    else:
        server._closing.wait(action.seconds)
    h.drop()


def _ping(server: MessagesAPIServer, h: Handler, seconds: float, every: float) -> None:
    """A ping every ``every`` seconds for ``seconds``: a stream kept alive that says nothing."""
    deadline = time.monotonic() + seconds
    while not server._closing.wait(min(every, max(0.0, deadline - time.monotonic()))):
        if time.monotonic() >= deadline:
            return
        try:
            h.send_event("ping", {"type": "ping"})
        except ClientGone:  # the client gave up on the stall: the outcome stays "stalled"
            return


def send_reply(server: MessagesAPIServer, h: Handler, record: RecordedRequest, spec: Reply, outcome: str = "reply") -> None:
    """Send a reply as JSON or SSE (``outcome`` is what the record says once it is sent)."""
    message = compose_message(spec, _body(record), server.context)
    if not record.stream:
        body = public(message)
        server._update(record, outcome=outcome, status=200, reply=body, usage=message["usage"])
        h.send_json(200, body, record.request_id)
        return
    server._update(record, usage=message["usage"])
    h.start_stream(record.request_id)
    events = sse_events(message)
    if not spec.event_delay:
        h.send_events(events)  # nothing paces them: one write (a client may read them so anyway)
    else:
        for k, (name, data) in enumerate(events):
            h.send_event(name, data)
            if k < len(events) - 1 and server._closing.wait(spec.event_delay):
                h.drop()
                server._update(record, outcome="dropped", status=200)
                return
    server._update(record, outcome=outcome, status=200, reply=public(message))
    h.end_stream()


def count_tokens(server: MessagesAPIServer, h: Handler, record: RecordedRequest) -> None:
    """Answer ``POST /v1/messages/count_tokens``: ``{"input_tokens": N}``, never cached."""
    answer = {"input_tokens": prompt_tokens(_body(record))}
    server._update(record, outcome="counted", status=200, usage=answer)
    h.send_json(200, answer, record.request_id)
