"""The fake Messages API server: record, validate, then perform the scenario's action.

* The real ``anthropic`` SDK (2.x, built on httpx2, which respx/pytest-httpx cannot see) talks
  to this server over TCP: in-process (a ``ThreadingHTTPServer`` in a daemon thread), or from
  real Jupyter kernels via ``ANTHROPIC_BASE_URL``.
* Every request is recorded first (:mod:`~tests.fakes.messages_api.records`), then checked
  (:mod:`~tests.fakes.messages_api.validate`); one that passes gets its ``attempt`` and goes to
  the scenario (:mod:`~tests.fakes.messages_api.scenario`), whose action is sent in the wire
  format of :mod:`~tests.fakes.messages_api.wire`. An outcome is recorded before the answer is
  written, so a client that reacts fast finds it set.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import socket
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any
from urllib.parse import urlsplit

from tests.fakes.messages_api.connection import ClientGone, FakeHTTPServer, Handler
from tests.fakes.messages_api.content import new_id, text
from tests.fakes.messages_api.records import RecordedRequest, TurnStats, turn_stats
from tests.fakes.messages_api.scenario import (
    Action,
    Delay,
    Drop,
    Error,
    Reply,
    Scenario,
    ScenarioExhausted,
    ScriptedScenario,
    StreamError,
    reply,
)
from tests.fakes.messages_api.validate import check_credentials, validate_body
from tests.fakes.messages_api.wire import (
    DEFAULT_ERROR_MESSAGES,
    ERROR_STATUS,
    block_events,
    build_message,
    error_body,
    sse_events,
    start_events,
)


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
        self._httpd = FakeHTTPServer((host, port), Handler)
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

    def _receive(self, handler: Handler, body: Any) -> RecordedRequest:
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

    def _handle(self, h: Handler) -> None:
        length = int(h.headers.get("content-length") or 0)
        raw = h.rfile.read(length) if length else b""
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = None
        record = self._receive(h, body)
        try:
            self._answer(h, record, raw)
        except ClientGone:
            self._update(record, outcome="aborted")

    def _reject(self, h: Handler, record: RecordedRequest, status: int, error_type: str, message: str) -> None:
        self._update(record, outcome="rejected", status=status, error_type=error_type, error_message=message)
        h.send_json(status, error_body(error_type, message, record.request_id), record.request_id)

    def _answer(self, h: Handler, record: RecordedRequest, raw: bytes) -> None:
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

    def _perform(self, h: Handler, record: RecordedRequest, action: Action) -> None:
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

    def _send_error(self, h: Handler, record: RecordedRequest, action: Error) -> None:
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

    def _stream_error(self, h: Handler, record: RecordedRequest, action: StreamError) -> None:
        message = action.message or DEFAULT_ERROR_MESSAGES.get(action.error_type, action.error_type)
        if not record.stream:
            self._send_error(h, record, Error(ERROR_STATUS.get(action.error_type, 500), action.error_type, message))
            return
        h.start_stream(record.request_id)
        for name, data in start_events(build_message(reply(), record)):
            h.send_event(name, data)
        if action.partial_text:
            events = block_events(0, text(action.partial_text))[:-1]  # started, never stopped
            for name, data in events:
                h.send_event(name, data)
        self._update(record, outcome="stream_error", status=200, error_type=action.error_type, error_message=message)
        h.send_event("error", {"type": "error", "error": {"type": action.error_type, "message": message}})
        h.end_stream()

    def _drop(self, h: Handler, record: RecordedRequest, action: Drop) -> None:
        if action.mid_stream and record.stream:
            h.start_stream(record.request_id)
            for name, data in start_events(build_message(reply(), record)):
                h.send_event(name, data)
            for name, data in block_events(0, text("Partial answer, then the line goes"))[:-1]:
                h.send_event(name, data)
            self._update(record, outcome="dropped", status=200)
        else:
            self._update(record, outcome="dropped")
        h.drop()

    def _send_reply(self, h: Handler, record: RecordedRequest, spec: Reply) -> None:
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
