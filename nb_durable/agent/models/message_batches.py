"""Message Batches: many runs' model calls gathered into one batch, then polled, at half price.

A ``Gatherer`` (one per endpoint and credential in a process, ``gatherer_for``) collects the
requests that batch-mode model steps hand it (``submit``) and sends them as one Message Batch
when every run that joined it (``member``) is waiting on a model call, or ``window`` seconds
after the first request came, or when the batch is full (``MAX_REQUESTS`` requests or
``MAX_BYTES``): so a worker running many batch-mode runs at once pays for one batch per round
of their turns, and a run alone makes a batch of one (after ``settle`` seconds, in which runs
started together join). Each step gets its batch's id back and records it; ``result`` then
polls that batch (one poller per batch in the process, backing off from ``first_poll`` to
``most_poll`` seconds), fetches its results once, and hands each step its own, by custom id.

A custom id is derived, never chosen: ``custom_id_of(run_id, step_id)`` is a hash of the
step's idempotency key, so it always matches the API's ``^[a-zA-Z0-9_-]{1,64}$`` and is the
same on every resume. The backend (``MessageBatches``: create, retrieve, results, list) is
the only part that speaks HTTP: ``models.anthropic`` (the SDK), or a test's.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ...errors import ModelError, TransientModelError

__all__ = [
    "MAX_BYTES",
    "MAX_REQUESTS",
    "Gatherer",
    "Member",
    "MessageBatches",
    "custom_id_of",
    "gatherer_for",
]

MAX_REQUESTS = 100_000
"""The most requests one Message Batch may hold."""
MAX_BYTES = 256 * 1024 * 1024
"""The largest Message Batch the API takes (the request body)."""


def custom_id_of(run_id: str, step_id: str) -> str:
    """The custom id of a step's request in a batch: ``nbd-`` and 40 hex digits of a hash of
    ``<run_id>:<step_id>`` (the step's idempotency key), valid whatever the ids hold."""
    return "nbd-" + hashlib.sha256(f"{run_id}:{step_id}".encode()).hexdigest()[:40]


class MessageBatches(Protocol):
    """A backend that speaks the Message Batches API (``AnthropicModel.message_batches()``)."""

    def create(self, requests: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
        """Create a batch of ``(custom_id, params)``; return its id. Raise ``ModelError`` (or
        ``TransientModelError``) as a model call does."""
        ...

    def retrieve(self, batch_id: str) -> Mapping[str, Any]:
        """The batch as the API says it (``processing_status``, ``request_counts``, ...)."""
        ...

    def results(self, batch_id: str) -> Mapping[str, Mapping[str, Any]]:
        """An ended batch's results by custom id: each a ``MessageBatchResult`` as JSON."""
        ...

    def created_between(self, start: float, end: float) -> list[str]:
        """The ids of the batches created from ``start`` to ``end`` (seconds since the epoch)."""
        ...


@dataclass
class _Pending:
    custom_id: str
    request: Mapping[str, Any]
    size: int
    batch_id: str | None = None
    error: BaseException | None = None


@dataclass
class _Poll:
    """One batch being polled: by one thread at a time, for every step waiting on it."""

    batch_id: str
    wait: float
    next_at: float = 0.0
    polling: bool = False
    waiters: int = 0
    results: Mapping[str, Mapping[str, Any]] | None = None
    error: ModelError | None = None
    polls: int = 0
    trouble: str = ""
    """How its last poll failed (``529 overloaded_error``), while it fails: '' once one answers."""
    expected: set[str] | None = None
    """The custom ids still to take, for a batch this gatherer sent: its results are kept for
    them, however far apart they come, while the runs that sent them run (``Gatherer.member``);
    a batch sent before (a resume's) is kept while polled."""

    def done(self) -> bool:
        """Whether nothing more will be taken from it (its entry can go)."""
        if self.results is None and self.error is None:
            return False
        return not self.expected if self.expected is not None else self.waiters == 0


@dataclass
class Gatherer:
    """Gathers batch-mode model calls into Message Batches, and polls them (thread-safe)."""

    batches: MessageBatches
    window: float = 2.0
    """Seconds a first request waits for other runs' before its batch is sent anyway."""
    settle: float = 0.25
    """Seconds after a run joins before a batch is sent for want of others: runs a worker
    starts together join one after another, and the first should not go alone."""
    first_poll: float = 0.25
    most_poll: float = 60.0
    max_requests: int = MAX_REQUESTS
    max_bytes: int = MAX_BYTES
    sleep: Callable[[float], None] = time.sleep
    sent: int = field(default=0, init=False)
    """Batches created through this gatherer."""
    _cond: threading.Condition = field(default_factory=threading.Condition, init=False, repr=False)
    _members: int = field(default=0, init=False)
    _polling: int = field(default=0, init=False)
    _pending: list[_Pending] = field(default_factory=list, init=False, repr=False)
    _opened: float | None = field(default=None, init=False)
    _joined: float = field(default=0.0, init=False)
    _sending: bool = field(default=False, init=False)
    _polls: dict[str, _Poll] = field(default_factory=dict, init=False, repr=False)

    @contextlib.contextmanager
    def member(self) -> Iterator[Member]:
        """A batch-mode run while it runs: its next model call is waited for before a batch is
        sent. When it ends, the results of requests it sent and never took are not kept for it:
        a resume polls their batch again (its log names it), and sends nothing again."""
        member = Member(self)
        with self._cond:
            self._members += 1
            self._joined = time.monotonic()
        try:
            yield member
        finally:
            with self._cond:
                self._members -= 1
                for batch_id, poll in list(self._polls.items()):
                    if poll.expected is not None and poll.expected & member.sent:
                        poll.expected -= member.sent
                        if not poll.expected and poll.waiters == 0:
                            del self._polls[batch_id]
                self._cond.notify_all()

    # -- sending ----------------------------------------------------------------------------

    def submit(self, custom_id: str, request: Mapping[str, Any]) -> str:
        """Put one request in the next batch; return that batch's id once it is created."""
        size = len(json.dumps(request)) + len(custom_id) + 40
        if size > self.max_bytes:
            raise ModelError(f"a request of {size} bytes is larger than a Message Batch may be ({self.max_bytes} bytes)")
        mine = _Pending(custom_id, request, size)
        with self._cond:
            self._pending.append(mine)
            if self._opened is None:
                self._opened = time.monotonic()
            self._cond.notify_all()
            try:
                while mine.batch_id is None and mine.error is None:
                    left = self._left()
                    if not self._sending and left <= 0:
                        self._send()
                    else:
                        self._cond.wait(0.05 if self._sending else min(left, 0.05))
            except BaseException:
                # Interrupted before its batch was sent: it must not be sent (and paid) without its step.
                if mine in self._pending:
                    self._pending.remove(mine)
                raise
        if mine.error is not None:
            raise mine.error
        assert mine.batch_id is not None
        return mine.batch_id

    def _left(self) -> float:
        """Seconds before the pending requests are due to be sent (0: now); the lock is held."""
        if not self._pending:
            return 1.0
        if len(self._pending) >= self.max_requests or sum(p.size for p in self._pending) >= self.max_bytes:
            return 0.0
        now = time.monotonic()
        window = (self._opened or now) + self.window - now
        if len(self._pending) + self._polling >= self._members:  # nobody else to wait for, once they have joined
            return max(0.0, min(window, self._joined + self.settle - now))
        return max(0.0, window)

    def _send(self) -> None:
        """Send the oldest pending requests as one batch (the lock is held, and released meanwhile)."""
        taken: list[_Pending] = []
        size = 0
        for p in self._pending:
            if len(taken) >= self.max_requests or (taken and size + p.size > self.max_bytes):
                break
            taken.append(p)
            size += p.size
        del self._pending[: len(taken)]
        self._opened = time.monotonic() if self._pending else None
        self._sending = True
        self._cond.release()
        try:
            batch_id: str | None = self.batches.create([(p.custom_id, p.request) for p in taken])
            error: BaseException | None = None
        except BaseException as e:  # every step of the batch hears of it, and retries or fails
            batch_id, error = None, e
        finally:
            self._cond.acquire()
        self._sending = False
        if batch_id is not None:
            self.sent += 1
            self._polls[batch_id] = _Poll(batch_id, self.first_poll, expected={p.custom_id for p in taken})
        for p in taken:
            p.batch_id, p.error = batch_id, error
        self._cond.notify_all()

    # -- polling ----------------------------------------------------------------------------

    def result(
        self, batch_id: str, custom_id: str, stop: Callable[[], None] = lambda: None, told: Callable[[str], None] | None = None
    ) -> Mapping[str, Any]:
        """The result of ``custom_id`` in ``batch_id`` once the batch has ended (a
        ``MessageBatchResult`` as JSON; ``{"type": "missing"}`` if the batch has none for it).
        ``stop`` is called while it waits and may raise to stop waiting. A batch that cannot be
        read (gone, refused) raises ``ModelError``; transient failures are polled through, and
        ``told`` hears how the polls fail each time that changes ('' once one answers again)."""
        with self._cond:
            poll = self._polls.get(batch_id)
            if poll is None:
                poll = self._polls[batch_id] = _Poll(batch_id, self.first_poll)
            poll.waiters += 1
            self._polling += 1
            self._cond.notify_all()  # a run now waits on a model call: a batch may be due
            said = ""
            try:
                while poll.results is None and poll.error is None:
                    if poll.polling:
                        self._cond.wait(0.1)
                        stop()
                    else:
                        self._poll(poll, stop)
                    if told is not None and poll.trouble != said:
                        said = poll.trouble
                        self._cond.release()  # told writes (a lease's mark): other runs poll on meanwhile
                        try:
                            told(said)
                        finally:
                            self._cond.acquire()
                if poll.expected is not None:
                    poll.expected.discard(custom_id)
                if poll.error is not None:
                    raise poll.error
                assert poll.results is not None
                return dict(poll.results.get(custom_id) or {"type": "missing"})
            finally:
                poll.waiters -= 1
                self._polling -= 1
                if poll.done():
                    self._polls.pop(batch_id, None)

    def _poll(self, poll: _Poll, stop: Callable[[], None]) -> None:
        """Wait for the poll's next time, then ask once (the lock is held, and released meanwhile)."""
        poll.polling = True
        self._cond.release()
        try:
            while (left := poll.next_at - time.monotonic()) > 0:
                stop()
                self.sleep(min(left, 0.1))
            stop()
            try:
                status = self.batches.retrieve(poll.batch_id)
                results = self.batches.results(poll.batch_id) if status.get("processing_status") == "ended" else None
            except TransientModelError as e:
                poll.trouble = f"{e.status or ''} {e.error_type or 'error'}".strip()
                results = None
            except ModelError as e:
                poll.error = e
                return
            else:
                poll.trouble = ""
            poll.polls += 1
            if results is not None:
                poll.results = results
            else:
                poll.next_at = time.monotonic() + poll.wait
                poll.wait = min(self.most_poll, poll.wait * 1.5)
        finally:
            self._cond.acquire()
            poll.polling = False
            self._cond.notify_all()


@dataclass
class Member:
    """A batch-mode run in its gatherer (``Gatherer.member``): what it sends is sent as its own."""

    gatherer: Gatherer
    sent: set[str] = field(default_factory=set)
    """The custom ids of the requests this run sent in batches."""

    def submit(self, custom_id: str, request: Mapping[str, Any]) -> str:
        """``Gatherer.submit``, as this run's."""
        batch_id = self.gatherer.submit(custom_id, request)
        self.sent.add(custom_id)
        return batch_id


_GATHERERS: dict[str, Gatherer] = {}
_LOCK = threading.Lock()


def gatherer_for(endpoint: Mapping[str, str], batches: Callable[[], MessageBatches], **options: Any) -> Gatherer:
    """The process's gatherer for an endpoint (its URL and kind of credential) and account (the
    backend's ``account``, a digest of its credential, if it says), made on first use with
    ``options``: runs sending to one endpoint with one credential share their batches."""
    backend = batches()
    key = json.dumps([dict(endpoint), str(getattr(backend, "account", ""))], sort_keys=True)
    with _LOCK:
        gatherer = _GATHERERS.get(key)
        if gatherer is None:
            gatherer = _GATHERERS[key] = Gatherer(backend, **options)
        return gatherer
