"""What a run's log says: its validated lines, its steps in order, and its status.

Decoding is lazy. Loading checks every line (checksum, version, sequence number, kind) and
reads each header, but parses a step's result only when replay asks for it, so reopening a
long run costs little more than reading its bytes. A step's events are contiguous in the log
(one writer, one step at a time), which is what lets a single pass build the step list.

Loading a stored log, and telling a torn last line from damage, is ``loading``'s. A log
whose ``run_started`` names another run than the one asked for (a copied file) is refused
here, as its first line is indexed, with ``ForeignRunError``, naming both.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ..errors import ForeignRunError, LogCorruptedError
from .codec import (
    LineError,
    StoredLog,
    decode_event,
    read_header,
    result_of,
    scan_line,
)
from .events import (
    RUN_FINISHED,
    RUN_STARTED,
    STEP_COMPLETED,
    STEP_STARTED,
    AttemptFailed,
    Decision,
    Event,
    RunFinished,
    RunStarted,
    StepCompleted,
    StepStarted,
)
from .loading import load
from .steps import QUEUED, RunStatus, StepIndex, StepRecord

__all__ = ["History"]

class History:
    """The decoded content of one run's log, kept current as the writer appends."""

    def __init__(self, run_id: str, location: str) -> None:
        self.run_id = run_id
        self.location = location
        self.lines: list[bytes] = []
        # One entry per step, in order. A step recorded by a single step_completed line (the
        # common case) stays a tuple (step_id, hash, seq) until something needs more of it:
        # building an object per step was a third of the time of reopening a long run.
        self._entries: list[StepIndex | tuple[str, str | None, int]] = []
        self.step_ids: dict[str, int] = {}
        self.started: RunStarted | None = None
        self.finished: RunFinished | None = None
        self._last_ts: float | None = None
        self._events: dict[int, Event] = {}
        # The result this process appended last, as its step handed it back: the step's view is
        # built from it at once, and parsing back the line just encoded was a tenth of a run's CPU.
        self._last_result: StepCompleted | None = None
        self._completed = 0  # steps with a result, kept as lines are indexed (the index asks on every append)
        self._being_written: Callable[[], bool] | None = None
        self.damaged: LogCorruptedError | None = None  # where a salvaging load stopped

    @classmethod
    def load(
        cls, run_id: str, stored: StoredLog, *, salvage: bool = False,
        being_written: Callable[[], bool] | None = None,
    ) -> History:  # fmt: skip
        """Validate and index a stored log; drop a torn last line with a warning (``loading``).

        With ``salvage``, damage ends the history instead of raising: what comes before the
        first bad line is returned (for ``fork``, to rescue the intact prefix of a damaged run).
        ``being_written`` (asked only if the last line is incomplete) says whether a live
        writer holds the run: then that line is its write in progress, dropped without a word.
        """
        return load(cls(run_id, stored.location), stored, salvage=salvage, being_written=being_written)

    def _corrupted(self, line_no: int, why: str, *, foreign: bool, intact: int | None = None) -> LogCorruptedError:
        return LogCorruptedError(
            run_id=self.run_id, location=self.location, line=line_no, why=why, foreign=foreign, intact=intact
        )

    def append(self, line: bytes, event: Event) -> None:
        """Index a line the writer has just appended (no newline), its typed event at hand."""
        self._index(line, event.kind, getattr(event, "step", None), getattr(event, "hash", None), event)
        self._last_ts = event.ts

    def append_completed(self, line: bytes, event: StepCompleted) -> None:
        """Index a step_completed line the writer has just appended, its event at hand (kept
        until the next result is appended: results are not kept, but this one is read at once)."""
        self._index(line, STEP_COMPLETED, event.step, event.hash, None)
        self._last_result = event

    def append_lines(self, lines: Sequence[bytes]) -> None:
        """Index lines appended as they were (a fork's prefix), checking each header."""
        for line in lines:
            seq, kind, step_id, digest = scan_line(line)
            if seq != len(self.lines):
                raise self._corrupted(len(self.lines) + 1, f"its sequence number is {seq}", foreign=False)
            self._index(line, kind, step_id, digest, None)

    def _index(self, line: bytes, kind: str, step_id: str | None, digest: str | None, event: Event | None) -> None:
        seq = len(self.lines)
        self.lines.append(line)
        self._last_ts = None
        if kind == STEP_COMPLETED:
            step = self._step_for(step_id, digest)
            step.completed = seq
            self._completed += 1
            step.seqs.append(seq)
            step.last_kind = kind
            self.finished = None
            return
        if event is None:
            event = self.event(seq)
        else:
            self._events[seq] = event
        if kind == RUN_STARTED:
            assert isinstance(event, RunStarted)
            if event.run_id != self.run_id:
                # A log copied or renamed into place: replaying it would hand another run's
                # results out under this run's idempotency keys.
                del self.lines[seq:]
                raise ForeignRunError(run_id=self.run_id, recorded=event.run_id, location=self.location)
            self.started = event
        elif kind == RUN_FINISHED:
            assert isinstance(event, RunFinished)
            self.finished = event
        else:
            step = self._step_for(step_id, digest)
            step.seqs.append(seq)
            step.last_kind = kind
            if isinstance(event, StepStarted):
                step.effect = event.effect
                step.retrying = False
            elif isinstance(event, AttemptFailed):
                step.retrying = event.delay is not None
                step.attempts += 1
            elif isinstance(event, Decision):
                step.decision = event.decision
            self.finished = None

    def _step_for(self, step_id: str | None, digest: str | None) -> StepIndex:
        step_id = step_id or ""
        position = self.step_ids.get(step_id)
        if position is not None and type(self._entries[position]) is not tuple:
            step = self.step(position)
            if step.open:
                return step
        step = StepIndex(len(self._entries), step_id, digest)
        self.step_ids[step_id] = step.position
        self._entries.append(step)
        return step

    @property
    def step_count(self) -> int:
        """How many steps the log records."""
        return len(self._entries)

    def position_of(self, step_id: str) -> int | None:
        """Where the log records a step of that id, if it does."""
        return self.step_ids.get(step_id)

    def completed_seq(self, position: int, step_id: str, digest: str | None) -> int | None:
        """Replay's fast path: the seq of the line holding the result of step ``step_id``, if
        the step at ``position`` is that step (same id; same hash where both have one) and
        was recorded by that one line. None means: look closer with ``step(position)``."""
        entry = self._entries[position]
        if type(entry) is tuple:
            recorded_id, recorded_hash, seq = entry
            if recorded_id == step_id and not (digest and recorded_hash and digest != recorded_hash):
                return seq
        return None

    def hash_at(self, position: int) -> str | None:
        """The request hash recorded for the step at ``position``, if it has one."""
        entry = self._entries[position]
        return entry[1] if type(entry) is tuple else entry.hash  # type: ignore[union-attr]

    def step(self, position: int) -> StepIndex:
        """The step at ``position``, as an object (made from its compact form on first use)."""
        entry = self._entries[position]
        if type(entry) is tuple:
            step_id, digest, seq = entry
            entry = self._entries[position] = StepIndex(position, step_id, digest, seq)
        return entry  # type: ignore[return-value]

    @property
    def steps(self) -> list[StepIndex]:
        """Every step, as objects (for inspection; replay reads the compact form)."""
        return [self.step(i) for i in range(len(self._entries))]

    def lines_before(self, position: int) -> int:
        """How many lines hold the run's start and its first ``position`` steps (for fork)."""
        return max(self.step(position - 1).seqs) + 1 if position else 1

    def completed_count(self) -> int:
        """How many steps have a result."""
        return self._completed

    def completions(self, after: int = 0) -> Iterator[tuple[str, int]]:
        """Each step with a result, past the first ``after`` steps: its id and the seq of its
        result line, in step order."""
        for entry in itertools.islice(self._entries, after, None):
            if type(entry) is tuple:
                yield entry[0], entry[2]
            elif entry.completed is not None:  # type: ignore[union-attr]
                yield entry.step_id, entry.completed  # type: ignore[union-attr]

    def cached_event(self, seq: int) -> Event | None:
        """The typed event of line ``seq`` if loading decoded it already (every kind but results)."""
        return self._events.get(seq)

    @property
    def first_ts(self) -> float | None:
        """When the run started."""
        return self.started.ts if self.started else None

    @property
    def last_ts(self) -> float | None:
        """When the run last recorded an event (a fork's start if later: its copied steps keep their times)."""
        if self._last_ts is None and self.lines:
            self._last_ts = max(read_header(self.lines[-1]).ts, self.started.ts if self.started else 0.0)
        return self._last_ts

    def event(self, seq: int) -> Event:
        """The typed event of line ``seq`` (decoded once and kept, but for results)."""
        event = self._events.get(seq)
        if event is None and self._last_result is not None and self._last_result.seq == seq:
            return self._last_result
        if event is None:
            try:
                event = decode_event(self.lines[seq])
            except LineError as e:
                raise self._corrupted(seq + 1, str(e), foreign=False) from None
            if event.kind != STEP_COMPLETED:
                self._events[seq] = event
        return event

    def result_at(self, seq: int) -> Any:
        """The result recorded by the step_completed line ``seq``."""
        try:
            return result_of(self.lines[seq])
        except LineError as e:
            # A checksummed line that is not what its kind says: written by a bug or by hand.
            raise self._corrupted(seq + 1, str(e), foreign=False) from None

    @property
    def events(self) -> list[Event]:
        """Every event, typed (decodes results: use for inspection, not for replay)."""
        return [self.event(seq) for seq in range(len(self.lines))]

    def decisions(self) -> list[Decision]:
        """Every decision recorded, in order (decoded on load already: no result is parsed)."""
        return [e for _, e in sorted(self._events.items()) if isinstance(e, Decision)]

    @property
    def settings(self) -> dict[str, Any]:
        """The settings the run started with ({} before it starts)."""
        return dict(self.started.settings) if self.started else {}

    def record(self, position: int, *, result: bool = True) -> StepRecord:
        """A frozen snapshot of the step at ``position``; with ``result=False``, one without its
        result, completion time and duration, whose result line is not parsed."""
        step = self.step(position)
        whole = result or step.completed is None
        events = [self.event(seq) for seq in step.seqs if whole or seq != step.completed]
        started = next((e.ts for e in events if e.kind == STEP_STARTED), None)
        done = events[-1] if step.completed is not None and whole else None
        return StepRecord(
            position=step.position,
            step_id=step.step_id,
            state=step.state,
            effect=step.effect,
            hash=step.hash,
            result=getattr(done, "result", None),
            started_at=started,
            completed_at=done.ts if done else None,
            ms=getattr(done, "ms", None),
            attempts=tuple(e for e in events if isinstance(e, AttemptFailed)),
            decisions=tuple(e for e in events if isinstance(e, Decision)),
        )

    def open_decision(self) -> str | None:
        """The latest decision of the last step, if it has no result (what the run was left at)."""
        last = self._entries[-1] if self._entries else None
        if last is None or type(last) is tuple or last.completed is not None:  # type: ignore[union-attr]
            return None
        return last.decision  # type: ignore[union-attr]

    def starts_since_result(self) -> tuple[int, str | None]:
        """How many step starts the log ends with since its last step result or end, and the
        step the last one started: each a process that started a step and recorded nothing
        after it. Read from the lines' headers only, nothing decoded."""
        count, step = 0, None
        for line in reversed(self.lines):
            _, kind, step_id, _ = scan_line(line)
            if kind in (STEP_COMPLETED, RUN_FINISHED):
                break
            if kind == STEP_STARTED:
                count += 1
                step = step or step_id
        return count, step

    def status(self, writer_alive: bool) -> RunStatus:
        """The run's status as a reader sees it, given whether a writer holds the lease."""
        in_doubt = bool(self._entries) and self.step(len(self._entries) - 1).state == "in_doubt"
        if self.finished is not None:
            # Interrupted in the middle of an external step leaves that step's outcome unknown.
            return "in_doubt" if in_doubt and self.finished.status == "interrupted" else self.finished.status
        if writer_alive:
            return "running"
        if not self._entries and self.settings.get(QUEUED):
            return "queued"  # a worker that died before the first step leaves it queued again
        return "in_doubt" if in_doubt else "interrupted"
