"""The Message Batches endpoints of the fake, strict where the real API is.

* ``POST /v1/messages/batches`` takes ``{"requests": [{"custom_id", "params"}, ...]}``: 400 for
  no requests, more than ``max_requests`` (100,000 on the real API), a ``custom_id`` that does
  not match ``^[a-zA-Z0-9_-]{1,64}$``, a duplicate ``custom_id``, an item with other fields, a
  streaming ``params`` or one the Messages API would refuse (the same ``validate_body``); 413
  for a body past ``max_bytes`` (256 MB). It answers a ``MessageBatch`` (``in_progress``).
* ``GET /v1/messages/batches/{id}`` (404 for an unknown id), ``GET .../results`` (JSON lines of
  ``MessageBatchIndividualResponse``; 400 while the batch is still processing, as the real API
  has no results before the end), ``POST .../cancel`` (``canceling``, as the real API answers;
  the batch ends, every request canceled, at the next look) and ``GET /v1/messages/batches``
  (newest first, ``limit``/``after_id``/``before_id`` pages) answer as the SDK's types say.
* A batch ends ``delay`` seconds after it was created (``FakeBatches.delay``, changeable while
  it runs: ``float("inf")`` holds every batch until a test lets go). When it ends, each of its
  requests goes to the server's scenario like a message request, by turn and attempt, recorded
  as a ``RecordedRequest`` with ``endpoint == "batch_request"`` (so ``turn_stats`` counts it):
  a ``Reply`` succeeds, an ``Error`` (or any other fault) errors, ``Expired`` expires.
* Faults: ``list_faults`` (the list refuses), ``retrieve_faults`` (a look at one batch
  refuses), ``create_faults`` (the create refuses, no batch made), ``lost_creations`` (a batch made, its answer lost).
* Counters tests read: ``created`` (every batch), ``request_count`` (requests in them all).
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from tests.fakes.messages_api.compose import compose_message
from tests.fakes.messages_api.content import new_id
from tests.fakes.messages_api.scenario import Delay, Error, Expired, Reply, ScenarioExhausted
from tests.fakes.messages_api.strict import strict_violation
from tests.fakes.messages_api.validate import validate_body
from tests.fakes.messages_api.wire import error_body, public

if TYPE_CHECKING:
    from tests.fakes.messages_api.connection import Handler
    from tests.fakes.messages_api.records import RecordedRequest
    from tests.fakes.messages_api.server import MessagesAPIServer

CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
MAX_REQUESTS = 100_000
MAX_BYTES = 256 * 1024 * 1024
ROOT = "/v1/messages/batches"


def batch_route(method: str, path: str) -> tuple[str, str | None] | None:
    """The batch endpoint a request names, and its batch id: None if it names none."""
    parts = urlsplit(path).path.rstrip("/")
    if parts == ROOT:
        return ("batch_create" if method == "POST" else "batch_list" if method == "GET" else "batch_other"), None
    if not parts.startswith(ROOT + "/"):
        return None
    rest = parts[len(ROOT) + 1 :].split("/")
    if len(rest) == 1:
        return ("batch_retrieve" if method == "GET" else "batch_other"), rest[0]
    if len(rest) == 2 and rest[1] == "results" and method == "GET":
        return "batch_results", rest[0]
    if len(rest) == 2 and rest[1] == "cancel" and method == "POST":
        return "batch_cancel", rest[0]
    return "batch_other", rest[0]


def _when(epoch: float | None) -> str | None:
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat().replace("+00:00", "Z")


@dataclass
class FakeBatch:
    """One Message Batch: its requests, and their results once it has ended."""

    id: str
    requests: list[tuple[str, dict[str, Any]]]
    created_at: float = field(default_factory=time.time)
    started: float = field(default_factory=time.monotonic)
    ended_at: float | None = None
    cancel_initiated_at: float | None = None
    results: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ended(self) -> bool:
        return self.ended_at is not None

    def counts(self) -> dict[str, int]:
        """``request_counts``: all processing until the end, then by result type."""
        counts = dict.fromkeys(("processing", "succeeded", "errored", "canceled", "expired"), 0)
        if not self.ended:
            counts["processing"] = len(self.requests)
        for r in self.results:
            counts[r["result"]["type"]] += 1
        return counts

    def to_json(self, base_url: str) -> dict[str, Any]:
        """The ``MessageBatch`` the API answers."""
        status = "ended" if self.ended else "canceling" if self.cancel_initiated_at else "in_progress"
        return {
            "id": self.id,
            "type": "message_batch",
            "processing_status": status,
            "request_counts": self.counts(),
            "created_at": _when(self.created_at),
            "expires_at": _when(self.created_at + 24 * 3600),
            "ended_at": _when(self.ended_at),
            "cancel_initiated_at": _when(self.cancel_initiated_at),
            "archived_at": None,
            "results_url": f"{base_url}{ROOT}/{self.id}/results" if self.ended else None,
        }


class FakeBatches:
    """The server's Message Batches: created, processed when due, answered."""

    def __init__(self, server: MessagesAPIServer, delay: float = 0.0, max_requests: int = MAX_REQUESTS, max_bytes: int = MAX_BYTES) -> None:
        self.server = server
        self.delay = delay
        """Seconds from a batch's creation to its end (``inf``: held until changed)."""
        self.max_requests = max_requests
        self.max_bytes = max_bytes
        self._lock = threading.RLock()
        self._batches: dict[str, FakeBatch] = {}
        self.list_faults: list[tuple[int, str]] = []
        """Answers (status, error type) the list endpoint gives, one a request, before it lists."""
        self.retrieve_faults: list[tuple[int, str]] = []
        """Answers (status, error type) a look at one batch gives, one a request, before it answers."""
        self.create_faults: list[tuple[int, str]] = []
        """Answers (status, error type) the create endpoint gives, one a request, before it makes
        a batch: a refusal to start (a 529 when overloaded), so no batch exists."""
        self.lost_creations: list[tuple[int, str] | None] = []
        """Answers the create endpoint gives, one a request, in place of the batch it has made:
        (status, error type), or None for a connection closed without an answer. The batch
        exists and runs; its creator never hears of it (a response lost on the way back)."""

    @property
    def created(self) -> list[FakeBatch]:
        """Every batch created so far, oldest first."""
        with self._lock:
            return list(self._batches.values())

    @property
    def request_count(self) -> int:
        """The requests in every batch created so far."""
        return sum(len(b.requests) for b in self.created)

    # -- answering ---------------------------------------------------------------------------

    def answer(self, h: Handler, record: RecordedRequest, raw: bytes) -> None:
        """Answer one request to a batch endpoint (credentials already checked)."""
        route = batch_route(record.method, record.path)
        assert route is not None
        endpoint, batch_id = route
        if endpoint == "batch_create":
            self._create(h, record, raw)
            return
        if endpoint == "batch_list":
            with self._lock:
                fault = self.list_faults.pop(0) if self.list_faults else None
            if fault is not None:
                self._refuse(h, record, fault[0], fault[1], f"fake Messages API: {fault[1]} listing batches")
                return
            self._list(h, record)
            return
        if endpoint == "batch_retrieve":
            with self._lock:
                fault = self.retrieve_faults.pop(0) if self.retrieve_faults else None
            if fault is not None:
                self._refuse(h, record, fault[0], fault[1], f"fake Messages API: {fault[1]} reading batch {batch_id}")
                return
        if endpoint == "batch_other":
            self._refuse(h, record, 404, "not_found_error", f"Not found: {record.method} {record.path}")
            return
        with self._lock:
            batch = self._batches.get(batch_id or "")
            if batch is not None:
                self._end_if_due(batch)
        if batch is None:
            self._refuse(h, record, 404, "not_found_error", f"message_batch not found: {batch_id}")
            return
        if endpoint == "batch_cancel":
            with self._lock:
                if not batch.ended and batch.cancel_initiated_at is None:
                    batch.cancel_initiated_at = time.time()  # canceling now; ended (canceled) at the next look
        if endpoint == "batch_results":
            if not batch.ended:
                self._refuse(h, record, 400, "invalid_request_error", f"Message Batch {batch.id} is still processing; results are available once it has ended")
                return
            lines = "".join(json.dumps(r) + "\n" for r in batch.results).encode()
            self.server._update(record, outcome="batch", status=200)
            h.send_raw(200, lines, record.request_id, content_type="application/binary")
            return
        self._send(h, record, batch.to_json(self.server.url))

    def _send(self, h: Handler, record: RecordedRequest, payload: dict[str, Any]) -> None:
        self.server._update(record, outcome="batch", status=200)
        h.send_json(200, payload, record.request_id)

    def _refuse(self, h: Handler, record: RecordedRequest, status: int, error_type: str, message: str) -> None:
        self.server._update(record, outcome="rejected", status=status, error_type=error_type, error_message=message)
        h.send_json(status, error_body(error_type, message, record.request_id), record.request_id)

    def _create(self, h: Handler, record: RecordedRequest, raw: bytes) -> None:
        with self._lock:
            refused = self.create_faults.pop(0) if self.create_faults else None
        if refused is not None:
            self._refuse(h, record, refused[0], refused[1], f"fake Messages API: {refused[1]} creating a batch")
            return
        if len(raw) > self.max_bytes:
            self._refuse(h, record, 413, "request_too_large", f"Request exceeds the maximum size of {self.max_bytes} bytes")
            return
        problem = self._problem(record.body)
        if problem:
            self._refuse(h, record, 400, "invalid_request_error", problem)
            return
        requests = [(str(r["custom_id"]), dict(r["params"])) for r in record.body["requests"]]
        batch = FakeBatch(new_id("msgbatch"), requests)
        with self._lock:
            self._batches[batch.id] = batch
            self._end_if_due(batch)
            faulty = bool(self.lost_creations)
            lost = self.lost_creations.pop(0) if faulty else None
        if not faulty:
            self._send(h, record, batch.to_json(self.server.url))
        elif lost is None:
            self.server._update(record, outcome="dropped")
            h.drop()
        else:
            self._refuse(h, record, lost[0], lost[1], f"fake Messages API: {lost[1]} after the batch {batch.id} was made")

    def _problem(self, body: Any) -> str | None:
        """None for a good batch, else the 400's message."""
        if not isinstance(body, dict) or not isinstance(body.get("requests"), list):
            return "requests: Field required"
        extra = sorted(set(body) - {"requests"})
        if extra:
            return f"{extra[0]}: Extra inputs are not permitted"
        items = body["requests"]
        if not items:
            return "requests: List should have at least 1 item after validation, not 0"
        if len(items) > self.max_requests:
            return f"requests: a Message Batch holds at most {self.max_requests} requests, not {len(items)}"
        seen: set[str] = set()
        server = self.server
        for i, item in enumerate(items):
            if not isinstance(item, dict):
                return f"requests.{i}: Input should be a valid dictionary"
            extra = sorted(set(item) - {"custom_id", "params"})
            if extra:
                return f"requests.{i}.{extra[0]}: Extra inputs are not permitted"
            custom_id = item.get("custom_id")
            if not isinstance(custom_id, str) or not CUSTOM_ID.match(custom_id):
                return f"requests.{i}.custom_id: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'"
            if custom_id in seen:
                return f"requests: custom_id values must be unique within a batch ({custom_id!r} is repeated)"
            seen.add(custom_id)
            params = item.get("params")
            if not isinstance(params, dict):
                return f"requests.{i}.params: Field required"
            if params.get("stream"):
                return f"requests.{i}.params.stream: streaming is not supported in a Message Batch"
            problem = validate_body(
                params,
                endpoint="messages",
                signer=server.signer,
                refuse_sampling=server.refuse_sampling,
                thinking_types=server.thinking_types,
                default_thinking=server.context.default_thinking,
            )
            if problem:
                return f"requests.{i}.params.{problem}"
        return None

    def _list(self, h: Handler, record: RecordedRequest) -> None:
        query = parse_qs(urlsplit(record.path).query)
        limit = int((query.get("limit") or ["20"])[0])
        if not 1 <= limit <= 1000:
            self._refuse(h, record, 400, "invalid_request_error", "limit: Input should be between 1 and 1000")
            return
        with self._lock:
            for batch in self._batches.values():
                self._end_if_due(batch)
            newest = list(reversed(self._batches.values()))
        ids = [b.id for b in newest]
        after, before = (query.get("after_id") or [""])[0], (query.get("before_id") or [""])[0]
        if after in ids:
            newest = newest[ids.index(after) + 1 :]
        elif before in ids:
            newest = newest[: ids.index(before)]
        page = newest[:limit]
        data = [b.to_json(self.server.url) for b in page]
        self._send(h, record, {
            "data": data,
            "has_more": len(newest) > limit,
            "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None,
        })  # fmt: skip

    # -- processing --------------------------------------------------------------------------

    def _end_if_due(self, batch: FakeBatch) -> None:
        if not batch.ended and batch.cancel_initiated_at is not None:
            self._end(batch, canceled=True)
        elif not batch.ended and not math.isinf(self.delay) and time.monotonic() >= batch.started + self.delay:
            self._end(batch)

    def _end(self, batch: FakeBatch, *, canceled: bool = False) -> None:
        """Process every request of ``batch`` (or cancel them) and end it."""
        results = []
        for custom_id, params in batch.requests:
            if canceled:
                result: dict[str, Any] = {"type": "canceled"}
            else:
                result = self._process(batch, custom_id, params)
            results.append({"custom_id": custom_id, "result": result})
        batch.results = results
        batch.ended_at = time.time()

    def _process(self, batch: FakeBatch, custom_id: str, params: dict[str, Any]) -> dict[str, Any]:
        """One request of a batch through the scenario: its ``MessageBatchResult``."""
        server = self.server
        record = server._record_inner(f"{ROOT}/{batch.id}#{custom_id}", params)
        try:
            action = server._choose(record)
        except ScenarioExhausted as e:
            action = Error(400, "invalid_request_error", f"fake Messages API: {e}")
        while isinstance(action, Delay):
            action = action.then
        if isinstance(action, Reply):
            broken = strict_violation(params, action.content)
            if broken:
                action = Error(400, "invalid_request_error", f"fake Messages API: {broken}")
        if isinstance(action, Reply):
            message = public(compose_message(action, params, server.context))
            server._update(record, outcome="reply", status=200, reply=message, usage=message["usage"])
            return {"type": "succeeded", "message": message}
        if isinstance(action, Expired):
            server._update(record, outcome="expired")
            return {"type": "expired"}
        if isinstance(action, Error):
            error_type, message_text = action.resolved_type(), action.message or action.resolved_type()
        else:  # a stream fault has no meaning in a batch: the request errors
            error_type, message_text = "api_error", f"fake Messages API: {action.kind} in a batch"
        server._update(record, outcome="error", error_type=error_type, error_message=message_text)
        body = error_body(error_type, message_text, record.request_id)
        return {"type": "errored", "error": body}
