"""The fake Messages API server: record, validate, then perform the scenario's action.

* The real ``anthropic`` SDK (2.x, built on httpx2, which respx/pytest-httpx cannot see) talks
  to this server over TCP: in-process (a ``ThreadingHTTPServer`` in a daemon thread), or from
  real Jupyter kernels via ``ANTHROPIC_BASE_URL``.
* Every request is recorded first (:mod:`~tests.fakes.messages_api.records`), then checked
  (:mod:`~tests.fakes.messages_api.validate`); one that passes gets its ``attempt`` and goes to
  the scenario (:mod:`~tests.fakes.messages_api.scenario`), whose action is sent in the wire
  format of :mod:`~tests.fakes.messages_api.wire` by :mod:`~tests.fakes.messages_api.answers`.
  An outcome is recorded before the answer is written, so a client that reacts fast finds it
  set.
* ``POST /v1/messages/count_tokens`` is validated like a message request and answered from
  the same token estimate; it never reaches the scenario. ``max_tokens: 0`` pre-warms the
  cache: it is answered with an empty ``max_tokens`` reply and never reaches the scenario.
* ``/v1/messages/batches`` and below are Message Batches (:mod:`~tests.fakes.messages_api.batches`):
  their requests reach the scenario when their batch ends; ``server.batches`` counts them.
* The server holds what outlives one request: the prompt cache (``server.cache``), the
  thinking signer (``server.signer``), and the answering model.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import socket
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any
from urllib.parse import urlsplit

from tests.fakes.messages_api.answers import count_tokens, perform, send_reply
from tests.fakes.messages_api.batches import FakeBatches, batch_route
from tests.fakes.messages_api.caching import PromptCache
from tests.fakes.messages_api.compose import ReplyContext
from tests.fakes.messages_api.connection import ClientGone, FakeHTTPServer, Handler
from tests.fakes.messages_api.content import new_id
from tests.fakes.messages_api.records import RecordedRequest, TurnStats, UsageTotals, turn_stats, usage_totals
from tests.fakes.messages_api.scenario import (
    Action,
    Error,
    Reply,
    Scenario,
    ScenarioExhausted,
    ScriptedScenario,
)
from tests.fakes.messages_api.strict import strict_violation
from tests.fakes.messages_api.thinking_rules import DEFAULT_SECRET, Signer
from tests.fakes.messages_api.tokens import answering, prompt_tokens
from tests.fakes.messages_api.validate import check_credentials, validate_body
from tests.fakes.messages_api.wire import error_body

ENDPOINTS = {"/v1/messages": "messages", "/v1/messages/count_tokens": "count_tokens"}


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
        answering_model: str | Mapping[str, str] | None = None,
        min_cacheable_tokens: int | Mapping[str, int] = 0,
        signing_secret: bytes | str = DEFAULT_SECRET,
        default_thinking: str = "disabled",
        refuse_sampling: Sequence[str] = (),
        thinking_types: Mapping[str, Sequence[str]] | None = None,
        clock: Callable[[], float] = time.monotonic,
        context_window: int | Mapping[str, int] | None = None,
        batch_delay: float = 0.0,
        count_tokens_error: Error | None = None,
    ) -> None:
        """Serve ``scenario``; the keywords set what the real API decides per model or account.

        ``answering_model``: the ``model`` replies name (None: the requested one; a mapping:
        requested -> answering). ``min_cacheable_tokens``: the shortest prefix that is cached
        (0 here, 1,024-4,096 on the real API; a mapping: per model). ``signing_secret``: the
        key of thinking signatures (the default is fixed, so restarts accept earlier blocks).
        ``default_thinking``: what a request without ``thinking`` gets. ``refuse_sampling``:
        model-name prefixes that refuse temperature/top_k/top_p. ``thinking_types``: per model,
        the thinking types it accepts. ``clock``: the cache's TTL clock. ``context_window``:
        tokens per model (None: unlimited); a longer prompt is a 400 "prompt is too long", and a
        reply that would not fit stops with ``model_context_window_exceeded``. ``batch_delay``:
        seconds from a Message Batch's creation to its end (``server.batches.delay`` changes it).
        ``count_tokens_error``: the answer to every ``count_tokens`` request instead of a count
        (a gateway without the endpoint: ``Error(404)``; an outage: ``Error(529)``).
        """
        self.scenario = scenario if isinstance(scenario, Scenario) else ScriptedScenario(scenario)
        self.api_key = api_key  # None: any key is accepted, but one is required
        self.cache = PromptCache(min_cacheable_tokens, clock)
        self.signer = Signer(signing_secret)
        self.context = ReplyContext(self.signer, self.cache, answering_model, default_thinking, context_window)
        self.refuse_sampling = tuple(refuse_sampling)
        self.thinking_types = {k: tuple(v) for k, v in (thinking_types or {}).items()}
        self.count_tokens_error = count_tokens_error
        self.batches = FakeBatches(self, batch_delay)
        """The Message Batches created so far, and when they end."""
        self._cond = threading.Condition()
        self._records: list[RecordedRequest] = []
        self._sent: dict[str, list[dict[str, Any]]] = {}
        """tool_use id -> the content of the latest reply that carried it (``_sent_with``)."""
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
        """The message requests of one turn."""
        return [r for r in self.requests if r.turn == turn and r.endpoint == "messages"]

    def requests_to(self, endpoint: str) -> list[RecordedRequest]:
        """The requests to one endpoint: "messages", "count_tokens", "batch_create",
        "batch_retrieve", "batch_results", "batch_cancel", "batch_list", or "batch_request"
        (one request of a batch, recorded when its batch ends)."""
        return [r for r in self.requests if r.endpoint == endpoint]

    def turn_stats(self) -> dict[int, TurnStats]:
        """Per-turn counters (see :func:`turn_stats`)."""
        return turn_stats(self.requests)

    def usage_totals(self) -> UsageTotals:
        """The usage reported over every message request so far (see :func:`usage_totals`)."""
        return usage_totals(self.requests)

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

    def once_batch_polled(self, then: Callable[[], None]) -> None:
        """Call ``then`` on a thread of its own once a Message Batch has been polled (a worker
        stopped, or a run's stop requested, while its batch is in flight)."""

        def wait() -> None:
            self.wait_for(lambda rs: any(r.endpoint == "batch_retrieve" for r in rs))
            then()

        threading.Thread(target=wait, daemon=True).start()

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
            content: list[dict[str, Any]] = (record.reply.get("content") or []) if "reply" in changes and record.reply else []
            for block in content:
                if block.get("type") == "tool_use":
                    self._sent[str(block.get("id"))] = list(content)
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
        route = batch_route(handler.command, handler.path)
        if route is not None:
            endpoint: str | None = route[0]
        else:
            endpoint = ENDPOINTS.get(urlsplit(handler.path).path.rstrip("/")) if handler.command == "POST" else None
        return self._record(handler.command, handler.path, headers, body, endpoint)

    def _record_inner(self, path: str, body: dict[str, Any]) -> RecordedRequest:
        """Record one request of a Message Batch as it is processed (``endpoint == "batch_request"``)."""
        return self._record("BATCH", path, {}, body, "batch_request")

    def _record(self, method: str, path: str, headers: dict[str, str], body: Any, endpoint: str | None) -> RecordedRequest:
        turn: int | None = None
        if isinstance(body, dict) and isinstance(body.get("messages"), list):
            turn = sum(1 for m in body["messages"] if isinstance(m, dict) and m.get("role") == "assistant")
        with self._cond:
            record = RecordedRequest(
                index=len(self._records),
                method=method,
                path=path,
                headers=headers,
                body=body,
                turn=turn,
                stream=isinstance(body, dict) and body.get("stream") is True,
                request_id=new_id("req"),
                received_at=time.time(),
                endpoint=endpoint,
            )
            self._records.append(record)
            self._write_log(record)
            self._cond.notify_all()
        return record

    def _sent_with(self, tool_use_id: str) -> list[dict[str, Any]] | None:
        """The content of the reply this server sent with that tool call, if any (the latest such):
        looked up, not searched for, as a long benchmark's records run to thousands."""
        with self._cond:
            content = self._sent.get(tool_use_id)
            return None if content is None else list(content)

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
            with answering(record.body):
                self._answer(h, record, raw)
        except ClientGone:
            self._update(record, outcome="aborted")

    def _reject(self, h: Handler, record: RecordedRequest, status: int, error_type: str, message: str) -> None:
        self._update(record, outcome="rejected", status=status, error_type=error_type, error_message=message)
        h.send_json(status, error_body(error_type, message, record.request_id), record.request_id)

    def _answer(self, h: Handler, record: RecordedRequest, raw: bytes) -> None:
        if record.endpoint is None:
            self._reject(h, record, 404, "not_found_error", f"Not found: {h.command} {h.path}")
            return
        problem = check_credentials(record.headers, self.api_key)
        if problem:
            self._reject(h, record, 401, "authentication_error", problem)
            return
        if "anthropic-version" not in record.headers:
            self._reject(h, record, 400, "invalid_request_error", "anthropic-version: header is required")
            return
        if record.endpoint.startswith("batch_"):
            self.batches.answer(h, record, raw)
            return
        if record.body is None:
            self._reject(h, record, 400, "invalid_request_error", f"There was an issue with your request body: {raw[:80]!r} is not valid JSON")
            return
        problem = validate_body(
            record.body,
            endpoint=record.endpoint,
            signer=self.signer,
            refuse_sampling=self.refuse_sampling,
            thinking_types=self.thinking_types,
            sent=self._sent_with,
            default_thinking=self.context.default_thinking,
        )
        if problem:
            self._reject(h, record, 400, "invalid_request_error", problem)
            return
        if record.endpoint == "count_tokens":
            if self.count_tokens_error is not None:
                perform(self, h, record, self.count_tokens_error)
            else:
                count_tokens(self, h, record)
            return
        window = self.context.window_for(str(record.body["model"]))
        if window is not None and prompt_tokens(record.body) > window:
            message = f"prompt is too long: {prompt_tokens(record.body)} tokens > {window} maximum"
            self._reject(h, record, 400, "invalid_request_error", message)
            return
        if record.body.get("max_tokens") == 0:
            send_reply(self, h, record, Reply([], stop_reason="max_tokens"), outcome="prewarm")
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
        broken = strict_violation(record.body, action.content) if isinstance(action, Reply) else None
        if broken:
            message = f"fake Messages API: {broken}"
            # Like an unscripted turn: a 400 ends the run at once instead of being retried.
            self._update(record, outcome="unscripted", status=400, error_type="invalid_request_error", error_message=message)
            h.send_json(400, error_body("invalid_request_error", message, record.request_id), record.request_id)
            return
        perform(self, h, record, action)
