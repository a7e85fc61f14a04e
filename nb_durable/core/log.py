"""``EventLog`` and ``run_step``: record a step's result, or replay it.

This is the reference design, hardened. A run is a sequence of steps. ``run_step(log,
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
import hashlib
import json
import os
import time
import weakref
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from ..errors import (
    DivergenceError,
    InDoubtError,
    InvalidStepIdError,
    LeaseLostError,
    RunError,
    StepResultError,
)
from .events import (
    AttemptFailed,
    Decision,
    Effect,
    Event,
    RawJSON,
    RunFinished,
    RunOutcome,
    RunStarted,
    StepCompleted,
    StepStarted,
    encode_event,
    encode_json,
    scan_line,
)
from .history import History, RunStatus, StepRecord, _Step
from .stores import Store, StoreWriter, check_run_id, open_store

__all__ = [
    "Durability",
    "EventLog",
    "InDoubtPolicy",
    "OutcomeUnknown",
    "StepContext",
    "current_step",
    "fork",
    "request_hash",
    "run_step",
]

T = TypeVar("T")

Durability = Literal["full", "process", "none"]
"""full: every record and intent is fsynced (survives power loss). process: only intents of
external steps and decisions are fsynced; other records reach the OS, so they survive a
crashed or killed process, and a power loss may make the latest steps run again. none:
nothing is fsynced (tests, throwaway runs)."""

Verdict = Literal["rerun", "skip", "fail"]
InDoubtPolicy = Verdict | Callable[[StepRecord], "Verdict | tuple[Verdict, str]"]
"""What to do with an external step that started and never completed: run it again, skip it
(the caller gets ``OutcomeUnknown``), fail, or ask a callable (a person in a notebook) that
returns one of those, optionally with who decided: ``("skip", "person")``."""

EFFECTS: frozenset[str] = frozenset({"pure", "idempotent", "external"})
_RERUN = object()


@dataclass(frozen=True, slots=True)
class OutcomeUnknown:
    """What replay hands back for an in-doubt step that was skipped: nobody knows if it ran."""

    run_id: str
    step_id: str
    key: str

    @property
    def message(self) -> str:
        return (
            f"The process died while step {self.step_id!r} of run {self.run_id!r} was running, "
            "so whether its effect happened is unknown. Check before doing it again "
            f"(idempotency key {self.key})."
        )


class StepContext:
    """The step now running live: its identity, key, and a way to record failed attempts."""

    __slots__ = ("log", "step_id", "key", "effect", "position", "attempts", "gave_up")

    def __init__(self, log: EventLog, step_id: str, key: str, effect: Effect, position: int) -> None:
        self.log = log
        self.step_id = step_id
        self.key = key
        self.effect: Effect = effect
        self.position = position
        self.attempts = 0
        self.gave_up = False

    def record_attempt_failed(
        self,
        attempt: int,
        error: str,
        *,
        message: str = "",
        status: int | None = None,
        delay: float | None = None,
    ) -> AttemptFailed:
        """Record that an attempt raised; ``delay`` is the wait before the next one, None if none."""
        event = self.log._append(
            AttemptFailed,
            step=self.step_id,
            attempt=attempt,
            error=error,
            message=message,
            status=status,
            delay=delay,
        )
        assert isinstance(event, AttemptFailed)
        self.attempts = max(self.attempts, attempt)
        self.gave_up = delay is None
        return event

    def __repr__(self) -> str:
        return f"StepContext({self.log.run_id!r}, {self.step_id!r}, {self.effect})"


_current: ContextVar[StepContext | None] = ContextVar("nb_durable_current_step", default=None)
_writers: dict[tuple[str, str], weakref.ref[EventLog]] = {}


def current_step() -> StepContext | None:
    """The step running live in this context, or None (outside steps, and during replay)."""
    return _current.get()


def request_hash(request: Any) -> str:
    """A short stable hash of a step's request (canonical JSON, SHA-256, 16 hex digits)."""
    text = json.dumps(request, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


_hash_request = request_hash  # run_step's keyword of the same name shadows it there


class EventLog:
    """One run's append-only log, opened for writing: record-or-replay with a cursor.

    ``root`` is a folder (JSONL files, ``runs`` by default or ``$NB_DURABLE_STORE``), a
    store URL such as ``sqlite:///runs.db``, or a ``Store``.
    """

    def __init__(
        self,
        run_id: str,
        root: str | os.PathLike[str] | Store | None = None,
        *,
        durability: Durability = "full",
        in_doubt: InDoubtPolicy = "fail",
    ) -> None:
        if durability not in ("full", "process", "none"):
            raise ValueError(f"durability must be 'full', 'process' or 'none', not {durability!r}")
        _check_policy(in_doubt)
        self.run_id = check_run_id(run_id)
        self.store: Store = open_store(root)
        self.durability: Durability = durability
        self.in_doubt: InDoubtPolicy = in_doubt
        self.cursor = 0
        self.listeners: list[Callable[[Event, bool], None]] = []
        self._writer: StoreWriter | None = None
        self._lost = ""
        self._registry_key = (self.store.key, self.run_id)
        older = _writers.pop(self._registry_key, None)
        if older is not None and older() is not None:
            older()._supersede()  # type: ignore[union-attr]
        writer = self.store.open_writer(self.run_id)
        try:
            stored = writer.load()
            self._history = History.load(self.run_id, stored)
            if len(self._history.lines) < stored.data.count(b"\n") or stored.tail:
                writer.truncate(len(self._history.lines))
        except BaseException:
            writer.close()
            raise
        self._writer = writer
        _writers[self._registry_key] = weakref.ref(self)

    # -- reading -------------------------------------------------------------------------

    @property
    def location(self) -> str:
        """Where the run is kept ('runs/fix.jsonl')."""
        return self.store.location(self.run_id)

    @property
    def events(self) -> list[Event]:
        """Every recorded event, typed."""
        return self._history.events

    @property
    def steps(self) -> list[StepRecord]:
        """Every recorded step, in order."""
        history = self._history
        return [history.record(history.step(i)) for i in range(history.step_count)]

    @property
    def settings(self) -> dict[str, Any]:
        """The settings the run started with ({} if it has not started)."""
        return self._history.settings

    @property
    def status(self) -> RunStatus:
        """The run's status; "running" while this log is open and the run unfinished."""
        return self._history.status(writer_alive=self._writer is not None)

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

    def idempotency_key(self, step_id: str) -> str:
        """The key a step's effect can hand to a service so it can deduplicate."""
        return f"{self.run_id}:{step_id}"

    def __repr__(self) -> str:
        return (
            f"EventLog({self.run_id!r}, {self.store.url!r}: {self._history.step_count} steps, "
            f"cursor {self.cursor}, {self.status})"
        )

    # -- writing -------------------------------------------------------------------------

    def start_run(self, settings: dict[str, Any] | None = None) -> dict[str, Any]:
        """Record the run's settings if it is new; return the settings it started with."""
        if self._history.started is not None:
            return self._history.settings
        self._append(RunStarted, run_id=self.run_id, settings=dict(settings or {}))
        return self._history.settings

    def finish_run(self, status: RunOutcome, *, output: Any = None, error: str | None = None) -> None:
        """Record how the run ended, unless the log already ends that very way."""
        if status not in ("completed", "failed", "interrupted"):
            raise ValueError(f"a run finishes 'completed', 'failed' or 'interrupted', not {status!r}")
        done = self._history.finished
        if done is not None and (done.status, done.output, done.error) == (status, output, error):
            return
        self._append(RunFinished, status=status, output=output, error=error)

    def record_decision(self, step_id: str, decision: str, *, by: str, note: str = "") -> Decision:
        """Record how a step was settled (an in-doubt outcome, an approval) and by whom."""
        event = self._append(Decision, step=step_id, decision=decision, by=by, note=note)
        assert isinstance(event, Decision)
        return event

    def close(self) -> None:
        """Release the run's lease; the log can no longer be written. Safe to call twice."""
        writer, self._writer = self._writer, None
        if writer is not None:
            self._lost = "closed"
            ref = _writers.get(self._registry_key)
            if ref is not None and ref() is self:
                del _writers[self._registry_key]
            writer.close()

    def __enter__(self) -> EventLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        # A log dropped without close() still gives its lease back; at interpreter exit the
        # OS would anyway, and errors there have nobody to report to.
        with contextlib.suppress(Exception):
            self.close()

    def _supersede(self) -> None:
        self.close()
        self._lost = "superseded"

    def _check_writable(self) -> StoreWriter:
        if self._writer is None:
            if self._lost == "superseded":
                why = "a newer EventLog of the same run was opened in this process; use that one"
            else:
                why = "it was closed; open a new EventLog to go on"
            raise LeaseLostError(
                f"this EventLog can no longer write run {self.run_id!r}: {why}.",
                run_id=self.run_id,
                holder=None,
            )
        return self._writer

    def _sync(self, event_type: type[Event], effect: str | None = None) -> bool:
        if self.durability == "none":
            return False
        if self.durability == "full":
            return event_type is not AttemptFailed and effect != "idempotent"
        return event_type is Decision or (event_type is StepStarted and effect == "external")

    def _append(self, event_type: type[Event], **fields: Any) -> Event:
        """Write one event and tell the listeners."""
        writer = self._check_writable()
        history = self._history
        if history.started is None and event_type is not RunStarted:
            self._append(RunStarted, run_id=self.run_id, settings={})
        seq = len(history.lines)
        ts = round(time.time(), 3)
        event = event_type(seq=seq, ts=ts, **fields)
        line = encode_event(seq, ts, event_type.kind, event.fields())
        writer.append([line], seq, sync=self._sync(event_type, fields.get("effect")))
        history.add(line[:-1], event)
        self._notify(event, False)
        return event

    def _append_result(self, step_id: str, digest: str | None, value: Any, text: str, ms: float) -> None:
        """Write a step_completed event from its result's JSON text (the hot path of a run)."""
        writer = self._check_writable()
        history = self._history
        if history.started is None:
            self._append(RunStarted, run_id=self.run_id, settings={})
        seq = len(history.lines)
        ts = time.time()
        fields: dict[str, Any] = {"step": step_id, "hash": digest, "result": RawJSON(text), "ms": RawJSON("%.3f" % ms)}
        if digest is None:
            del fields["hash"]
        line = encode_event(seq, ts, StepCompleted.kind, fields)
        writer.append([line], seq, sync=self.durability == "full")
        history._add(line[:-1], StepCompleted.kind, step_id, digest, None)
        if self.listeners:
            event = StepCompleted(seq=seq, ts=round(ts, 3), step=step_id, hash=digest, result=value, ms=round(ms, 3))
            self._notify(event, False)

    def _import(self, lines: Sequence[bytes]) -> None:
        """Append already-encoded lines (a fork's prefix) in one synced write."""
        writer = self._check_writable()
        seq = len(self._history.lines)
        headers = [scan_line(line) for line in lines]
        for i, (line_seq, *_) in enumerate(headers):
            if line_seq != seq + i:
                raise RunError(f"line {i + 1} to import has seq {line_seq}, expected {seq + i}", run_id=self.run_id)
        writer.append([line + b"\n" for line in lines], seq, sync=self.durability != "none")
        for line, (_, kind, step_id, digest) in zip(lines, headers, strict=True):
            self._history._add(line, kind, step_id, digest, None)

    def _notify(self, event: Event, replayed: bool) -> None:
        for listener in self.listeners:
            listener(event, replayed)

    # -- record or replay ----------------------------------------------------------------

    def _run_step(
        self,
        step_id: str,
        fn: Callable[[], Any],
        effect: Effect,
        digest: str | None,
        in_doubt: InDoubtPolicy | None,
        check: Callable[[], Any] | None,
    ) -> Any:
        self._check_writable()
        history = self._history
        position = self.cursor
        if position < history.step_count:
            entry = history._entries[position]
            if type(entry) is tuple:
                # The common case of replay: a step recorded by one line, its result at hand.
                recorded_id, recorded_hash, seq = entry
                if recorded_id == step_id and not (digest and recorded_hash and digest != recorded_hash):
                    self.cursor = position + 1
                    if self.listeners:
                        self._notify(history._decode(seq), True)
                    return history.result_at(seq)
            step = history.step(position)
            if step.step_id != step_id or (digest and step.hash and digest != step.hash):
                raise self._divergence(position, step, step_id, digest)
            if step.completed is not None:
                self.cursor = position + 1
                if self.listeners:
                    self._notify(history._decode(step.completed), True)
                return history.result(step)
            if step.decision == "skip":
                self.cursor = position + 1
                if self.listeners:
                    self._notify(history._decode(step.seqs[-1]), True)
                return OutcomeUnknown(self.run_id, step_id, self.idempotency_key(step_id))
            if step.state == "in_doubt":
                settled = self._settle(step, in_doubt, check)
                if settled is not _RERUN:
                    return settled
        elif step_id in history.step_ids:
            raise InvalidStepIdError(
                f"step id {step_id!r} is already used at position "
                f"{history.step_ids[step_id]} of run {self.run_id!r}; give each step of a run "
                "its own id (for example add a counter: 'fetch:2').",
                run_id=self.run_id,
            )
        return self._run_live(position, step_id, fn, effect, digest)

    def _run_live(self, position: int, step_id: str, fn: Callable[[], Any], effect: Effect, digest: str | None) -> Any:
        key = self.idempotency_key(step_id)
        if effect != "pure":
            self._append(StepStarted, step=step_id, hash=digest, key=key, effect=effect)
        context = StepContext(self, step_id, key, effect, position)
        token = _current.set(context)
        started = time.perf_counter()
        try:
            result = fn()
        except Exception as e:
            # The step's own failure is recorded (it is not in flight any more); a crash is not.
            if not context.gave_up and self._writer is not None:
                context.record_attempt_failed(context.attempts + 1, type(e).__name__, message=str(e)[:2000])
            raise
        finally:
            _current.reset(token)
        ms = (time.perf_counter() - started) * 1000
        try:
            text = encode_json(result)
        except (TypeError, ValueError) as e:
            after = (
                " The step's effect has run and its intent stays in the log, so the next run "
                "treats it as in doubt."
                if effect == "external"
                else " Nothing was recorded for it."
            )
            raise StepResultError(
                f"step {step_id!r} of run {self.run_id!r} returned {type(result).__name__} "
                f"that JSON cannot hold ({e}). Return JSON data: dict, list, str, int, "
                f"float, bool or None.{after}",
                run_id=self.run_id,
                step_id=step_id,
            ) from e
        # Live and replay must hand back equal values: a tuple comes back from JSON a list.
        value = result if _survives_json(result) else json.loads(text)
        self._append_result(step_id, digest, value, text, ms)
        self.cursor = position + 1
        return value

    def _settle(self, step: _Step, in_doubt: InDoubtPolicy | None, check: Callable[[], Any] | None) -> Any:
        record = self._history.record(step)
        if check is not None:
            token = _current.set(StepContext(self, step.step_id, self.idempotency_key(step.step_id), "external", step.position))
            try:
                found = check()
            finally:
                _current.reset(token)
            if found is None:
                self.record_decision(step.step_id, "rerun", by="check", note="the check found no effect")
                return _RERUN
            self.record_decision(step.step_id, "done", by="check", note="the check found the effect")
            return self._complete_settled(step, found)
        policy = self.in_doubt if in_doubt is None else in_doubt
        _check_policy(policy)
        verdict, by = (policy, "policy") if isinstance(policy, str) else _ask(policy, record)
        if verdict == "fail":
            raise InDoubtError(
                f"step {step.step_id!r} of run {self.run_id!r} started at "
                f"{time.strftime('%H:%M:%S', time.localtime(record.started_at or 0))} and never "
                "completed: its process died during an external effect, so whether the effect "
                "happened is unknown. Check by hand, then resume with in_doubt='rerun' to run it "
                "again or in_doubt='skip' to go on without it (the decision is recorded).",
                run_id=self.run_id,
                step_id=step.step_id,
            )
        self.record_decision(step.step_id, verdict, by=by)
        if verdict == "skip":
            self.cursor = step.position + 1
            return OutcomeUnknown(self.run_id, step.step_id, self.idempotency_key(step.step_id))
        return _RERUN

    def _complete_settled(self, step: _Step, result: Any) -> Any:
        try:
            text = encode_json(result)
        except (TypeError, ValueError) as e:
            raise StepResultError(
                f"the check of step {step.step_id!r} of run {self.run_id!r} returned a value JSON cannot hold ({e})",
                run_id=self.run_id,
                step_id=step.step_id,
            ) from e
        value = result if _survives_json(result) else json.loads(text)
        self._append_result(step.step_id, step.hash, value, text, 0.0)
        self.cursor = step.position + 1
        return value

    def _divergence(self, position: int, step: _Step, step_id: str, digest: str | None) -> DivergenceError:
        recorded = step.step_id + (f" (request {step.hash})" if step.hash else "")
        requested = step_id + (f" (request {digest})" if digest else "")
        why = "a different step" if step.step_id != step_id else "the same step with a different request"
        return DivergenceError(
            f"run {self.run_id!r} diverged at step {position}: the log recorded {recorded}, "
            f"but the code asked for {requested} ({why}). The code or its inputs changed since "
            "the run was recorded. Start a new run, or keep the steps that still match with "
            f"fork({self.run_id!r}, 'new-id', at={position}) and continue that one.",
            run_id=self.run_id,
            position=position,
            recorded=recorded,
            requested=requested,
        )


def _survives_json(value: Any, depth: int = 0) -> bool:
    """Whether ``value`` comes back from JSON equal and of the same types (no tuples, no
    int keys, no subclasses); cheaper than a round trip for the large strings tools return."""
    kind = type(value)
    if kind is str or kind is int or kind is float or kind is bool or value is None:
        return True
    if depth > 64:
        return False
    if kind is list:
        return all(_survives_json(v, depth + 1) for v in value)
    if kind is dict:
        return all(type(k) is str and _survives_json(v, depth + 1) for k, v in value.items())
    return False


def _check_policy(policy: object) -> None:
    if not callable(policy) and policy not in ("rerun", "skip", "fail"):
        raise ValueError(
            f"in_doubt must be 'rerun', 'skip', 'fail' or a callable that decides, not {policy!r}"
        )


def _ask(decide: Callable[[StepRecord], Any], record: StepRecord) -> tuple[Verdict, str]:
    answer = decide(record)
    verdict, by = answer if isinstance(answer, tuple) else (answer, "callback")
    if verdict not in ("rerun", "skip", "fail"):
        raise ValueError(f"an in-doubt decision is 'rerun', 'skip' or 'fail', not {verdict!r}")
    return verdict, by


def run_step(
    log: EventLog,
    step_id: str,
    fn: Callable[[], T],
    *,
    effect: Effect = "pure",
    request: Any = None,
    request_hash: str | None = None,
    in_doubt: InDoubtPolicy | None = None,
    check: Callable[[], Any] | None = None,
) -> T | Any:
    """Run ``fn`` as the next step of ``log`` and record its result, or replay the record.

    ``effect`` says what running it does: ``pure`` (nothing), ``idempotent`` (the same
    thing twice) or ``external`` (intent synced first; in doubt after a crash). ``request``
    (any JSON) or ``request_hash`` pins the step's input: replay with a different one raises
    ``DivergenceError``. ``in_doubt`` overrides the log's policy for this step; ``check``
    is a guard that, for an in-doubt step, returns the result if the effect did happen and
    None if it did not.
    """
    if not isinstance(step_id, str) or not step_id or "\n" in step_id:
        raise InvalidStepIdError(
            f"a step id is a non-empty one-line string, not {step_id!r}", run_id=log.run_id
        )
    if effect not in EFFECTS:
        raise ValueError(f"effect must be 'pure', 'idempotent' or 'external', not {effect!r}")
    digest = request_hash
    if digest is None and request is not None:
        try:
            digest = _hash_request(request)
        except (TypeError, ValueError) as e:
            raise InvalidStepIdError(
                f"the request of step {step_id!r} is not JSON ({e}); pass JSON data or request_hash=",
                run_id=log.run_id,
            ) from e
    return log._run_step(step_id, fn, effect, digest, in_doubt, check)


def fork(
    run_id: str,
    new_run_id: str,
    *,
    at: int,
    root: str | os.PathLike[str] | Store | None = None,
    to: str | os.PathLike[str] | Store | None = None,
) -> EventLog:
    """Start run ``new_run_id`` from the first ``at`` recorded steps of ``run_id``.

    The new run (in ``to``, or the same store) is returned open for writing, its cursor at
    the start, so running the same code replays the kept steps and goes live after them.
    """
    source = open_store(root)
    # A damaged log can still be forked up to its damage: that is how its intact prefix is saved.
    history = History.load(run_id, source.load(check_run_id(run_id)), salvage=True)
    count = history.step_count
    if not isinstance(at, int) or not 0 <= at <= count:
        raise RunError(
            f"cannot fork run {run_id!r} at {at!r}: it has {count} steps, so "
            f"at= must be a whole number from 0 to {count}",
            run_id=run_id,
        )
    end = max(history.step(at - 1).seqs) + 1 if at else 1
    log = EventLog(new_run_id, source if to is None else to)
    try:
        if log._history.lines:
            raise RunError(
                f"cannot fork into {new_run_id!r}: that run already exists in {log.store.url}; "
                "choose a new id",
                run_id=new_run_id,
            )
        started = history.started
        head = encode_event(
            0,
            round(time.time(), 3),
            RunStarted.kind,
            RunStarted(
                seq=0,
                ts=0,
                run_id=new_run_id,
                settings=dict(started.settings) if started else {},
                forked_from={"run_id": run_id, "at": at},
            ).fields(),
        )
        log._import([head[:-1], *history.lines[1:end]])
    except BaseException:
        log.close()
        raise
    return log

