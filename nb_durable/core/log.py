"""``EventLog`` and ``run_step``: record a step's result, or replay it.

``EventLog`` is here; what ``run_step`` decides at the cursor is ``stepping``'s (imported
from here as ever).

The seed design's two names, hardened (docs/design.md, "Replay"). A run is a sequence of steps. ``run_step(log,
step_id, fn)`` looks at the log's cursor: if the log holds a result for the step at that
position, it checks that the step is the same one (id, and request hash when given),
returns the recorded result and executes nothing; past the end of the log it runs ``fn``,
writes the result (flushed to stable storage) and only then lets the run move on::

    log = EventLog("fix-tests")                       # runs/fix-tests.jsonl
    files = run_step(log, "list", lambda: os.listdir("src"))

The invariants it keeps:

* A completed step never runs again in this run. Its record is written, and synced when
  ``durability="full"``, before ``run_step`` returns.
* A step with external effects writes its intent (``step_started``, synced) before the
  effect. If the process dies between intent and record the step is *in doubt* and the
  in-doubt policy decides (rerun, skip, fail, or a person via a callable); the decision is
  recorded, so replay never asks again. Pure and idempotent steps simply run again.
* Every step has an idempotency key, ``<run_id>:<step_id>``, the same on every replay,
  available to the running step as ``current_step().key``.
* One writer per run: opening takes the run's lease. A newer ``EventLog`` of the same run
  in the same process supersedes an older one (a notebook cell run twice); another process
  gets ``RunLockedError``.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import SettingError, StepResultError
from .codec import encode_json, round_trips
from .events import (
    RUN_OUTCOMES,
    AttemptFailed,
    Decision,
    Event,
    RunFinished,
    RunOutcome,
    RunStarted,
)
from .history import History
from .in_doubt import InDoubtPolicy, check_policy
from .stepping import run_step
from .steps import RunStatus, StepRecord
from .stores import Store, StoreSpec, check_run_id, open_store
from .writing.interrupts import interrupts_watched
from .writing.writer import DURABILITIES, Durability, RunWriter

__all__ = ["EventLog", "idempotency_key", "run_step"]

def idempotency_key(run_id: str, step_id: str) -> str:
    """A step's idempotency key, ``<run_id>:<step_id>``: the same on every replay."""
    return f"{run_id}:{step_id}"


def _as_recorded(text: str) -> str:
    return text


class EventLog:
    """One run's append-only log, opened for writing: record-or-replay with a cursor.

    ``root`` is a folder (JSONL files; by default ``stores.default_store()``), a
    store URL such as ``sqlite:///runs.db``, or a ``Store``. A store this log opened itself
    is closed with it; a ``Store`` handed in stays open for its owner.
    """

    def __init__(
        self,
        run_id: str,
        root: StoreSpec = None,
        *,
        durability: Durability = "full",
        in_doubt: InDoubtPolicy = "fail",
        scrub: Callable[[str], str] | None = None,
    ) -> None:
        """``scrub``: what every exception's text passes through before this log records it (an
        attempt's message, a run's error); the agent masks known secrets with it, since a step's
        exception may quote a credential and the log outlives the process."""
        interrupts_watched()  # a Ctrl-C swallowed while the store opens or the lease is taken is sent again
        if durability not in DURABILITIES:
            raise SettingError(setting="durability", value=durability, reason=f"of run {run_id!r} must be 'full', 'process' or 'none'")
        check_policy(in_doubt)
        self.run_id = check_run_id(run_id)
        self.store: Store = open_store(root)
        self._owns_store = self.store is not root
        self.durability: Durability = durability
        self.in_doubt: InDoubtPolicy = in_doubt
        self.cursor = 0
        self.listeners: list[Callable[[Event, bool], None]] = []
        self.scrub: Callable[[str], str] = scrub or _as_recorded
        # Results of steps with effects that ran but that the store could not take for now (a full
        # disk, a server short of capacity: ``StoreShortError``), by position: running the step
        # again with this log records them instead of the effect.
        self._unrecorded: dict[int, tuple[str, Any, float]] = {}
        try:
            self._writer = RunWriter(self.store, self.run_id, durability)
        except BaseException:
            if self._owns_store:
                self.store.close()
            raise

    @property
    def _history(self) -> History:
        # Asked each time: the writer rebuilds its history if the store refuses a write.
        return self._writer.history

    # -- reading -------------------------------------------------------------------------

    @property
    def location(self) -> str:
        """Where the run is kept ('runs/fix.jsonl')."""
        return self.store.location(self.run_id)

    @property
    def writer(self) -> RunWriter:
        """The run's one write path (for core code that appends lines as they are: fork)."""
        return self._writer

    @property
    def writable(self) -> bool:
        """Whether this log still holds the run's lease (not closed, not superseded)."""
        return self._writer.open

    @property
    def events(self) -> list[Event]:
        """Every recorded event, typed."""
        return self._history.events

    @property
    def steps(self) -> list[StepRecord]:
        """Every recorded step, in order."""
        history = self._history
        return [history.record(i) for i in range(history.step_count)]

    @property
    def settings(self) -> dict[str, Any]:
        """The settings the run started with ({} if it has not started)."""
        return self._history.settings

    @property
    def status(self) -> RunStatus:
        """The run's status; "running" while this log is open and the run unfinished."""
        return self._history.status(writer_alive=self._writer.open)

    @property
    def replaying(self) -> bool:
        """Whether the cursor is still inside the recorded steps."""
        return self.cursor < self._history.step_count

    @property
    def output(self) -> Any:
        """The final output recorded by ``finish_run``, if the run has finished."""
        finished = self._history.finished
        return finished.output if finished else None

    def failed_attempts(self, position: int) -> int:
        """How many attempts of the step at ``position`` failed (were retried) before its result."""
        return self._history.step(position).attempts

    def record_at(self, position: int, *, result: bool = True) -> StepRecord:
        """The step recorded at ``position``, as a frozen record (``result=False``: without its result)."""
        return self._history.record(position, result=result)

    def idempotency_key(self, step_id: str) -> str:
        """The key a step's effect can hand to a service so it can deduplicate."""
        return idempotency_key(self.run_id, step_id)

    def __repr__(self) -> str:
        return (
            f"EventLog({self.run_id!r}, {self.store.url!r}: {self._history.step_count} steps, "
            f"cursor {self.cursor}, {self.status})"
        )

    # -- writing -------------------------------------------------------------------------

    def start_run(self, settings: dict[str, Any] | None = None) -> dict[str, Any]:
        """Record the run's settings if it is new; return the settings it started with."""
        if self._history.started is None:
            self._record(RunStarted, run_id=self.run_id, settings=dict(settings or {}))
        return self._history.settings

    @property
    def parent(self) -> dict[str, Any] | None:
        """For a child run, the run and step that started it (``core.whole_runs.children``)."""
        started = self._history.started
        return dict(started.parent) if started is not None and started.parent is not None else None

    def finish_run(self, status: RunOutcome, *, output: Any = None, error: str | None = None) -> None:
        """Record how the run ended, unless the log already ends that very way."""
        if status not in RUN_OUTCOMES:
            raise SettingError(setting="status", value=status, reason=f"of run {self.run_id!r} must be one of {', '.join(RUN_OUTCOMES)}")
        error = None if error is None else self.scrub(error)
        done = self._history.finished
        if done is not None and (done.status, done.output, done.error) == (status, output, error):
            return
        self._record(RunFinished, status=status, output=output, error=error)

    def record_decision(
        self, step_id: str, decision: str, *, by: str, note: str = "", carries: Mapping[str, Any] | None = None
    ) -> Decision:
        """Record how a step was settled (an in-doubt outcome, an approval) and by whom;
        ``carries``: the result that step is to be recorded with, written before it."""
        event = self._record(Decision, step=step_id, decision=decision, by=by, note=note, carries=carries)
        assert isinstance(event, Decision)
        return event

    def record_attempt_failed(
        self,
        step_id: str,
        attempt: int,
        error: str,
        *,
        message: str = "",
        status: int | None = None,
        delay: float | None = None,
        error_type: str | None = None,
        usage: Mapping[str, Any] | None = None,
    ) -> AttemptFailed:
        """Record that an attempt at a step raised; ``delay`` is the wait before the next one,
        ``error_type`` the failure's own type, ``usage`` what it reported using (``AttemptFailed``)."""
        # An exception's text may hold a file name that is not UTF-8 (a lone surrogate).
        message = self.scrub(message.encode("utf-8", "backslashreplace").decode("utf-8"))
        event = self._record(
            AttemptFailed, step=step_id, attempt=attempt, error=error, message=message, status=status, delay=delay,
            error_type=error_type, usage=usage,
        )  # fmt: skip
        assert isinstance(event, AttemptFailed)
        return event

    def close(self) -> None:
        """Release the run's lease; the log can no longer be written. Safe to call twice."""
        self._writer.close()
        if self._owns_store:
            self._owns_store = False
            self.store.close()

    def __enter__(self) -> EventLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        # A log dropped without close() still gives its lease back; at interpreter exit the
        # OS would anyway, and errors there have nobody to report to.
        with contextlib.suppress(Exception):
            self.close()

    def _record(self, event_type: type[Event], **fields: Any) -> Event:
        if self._history.started is None and event_type is not RunStarted:
            self._record(RunStarted, run_id=self.run_id, settings={})
        event = self._writer.append(event_type, **fields)
        self._notify(event, False)
        return event

    def _record_result(self, step_id: str, digest: str | None, value: Any, text: str, ms: float) -> None:
        if self._history.started is None:
            self._record(RunStarted, run_id=self.run_id, settings={})
        event = self._writer.append_result(step_id, digest, value, text, ms)
        if self.listeners:
            self._notify(event, False)

    def _notify(self, event: Event, replayed: bool) -> None:
        for listener in self.listeners:
            listener(event, replayed)

    # -- recording a result (``stepping`` decides when) -----------------------------------

    def complete_step(
        self, position: int, step_id: str, digest: str | None, result: Any, ms: float, *, what: str, after: str = ""
    ) -> Any:
        """Record the result of the step at ``position`` and move the cursor past it; return
        what replay will hand back (a step run live, or one a check found had taken effect).
        ``what`` and ``after`` name the step and say what became of it, should JSON not hold
        its result."""
        try:
            text = encode_json(result)
        except (TypeError, ValueError) as e:
            raise StepResultError(
                run_id=self.run_id,
                step_id=step_id,
                what=what,
                reason=f"{type(result).__name__} that JSON cannot hold ({e})",
                after=after,
            ) from e
        # Live and replay must hand back equal values: a tuple comes back from JSON a list.
        value = result if round_trips(result) else json.loads(text)
        try:
            self._record_result(step_id, digest, value, text, ms)
        except UnicodeEncodeError as e:
            # Raised while encoding the line, before any byte of it is written.
            raise StepResultError(
                run_id=self.run_id,
                step_id=step_id,
                what=what,
                reason=f"text that UTF-8 cannot hold: a lone surrogate ({e.object[e.start : e.end]!r}), as "
                "os.listdir and friends return for a file name that is not UTF-8. Turn such names into "
                "text first, losslessly: os.fsencode(name).decode('utf-8', 'backslashreplace')",
                after=after,
            ) from None
        self.cursor = position + 1
        return value
