"""What a run's log says: its validated lines, its steps in order, and its status.

Decoding is lazy. Loading checks every line (checksum, version, sequence number, kind) and
reads each header, but parses a step's result only when replay asks for it, so reopening a
long run costs little more than reading its bytes. A step's events are contiguous in the log
(one writer, one step at a time), which is what lets a single pass build the step list.

Damage is classified here and nowhere else: a bad last line may be the torn write of a
crash and is dropped with a warning (where the store can tear, i.e. files); a bad line
anywhere before it is corruption and raises ``LogCorruptedError`` naming file and line.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import warnings
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import LogCorruptedError, TornLineWarning
from .events import (
    ATTEMPT_FAILED,
    RUN_FINISHED,
    RUN_STARTED,
    STEP_COMPLETED,
    STEP_COMPLETED_HEADER,
    STEP_STARTED,
    AttemptFailed,
    Decision,
    Effect,
    Event,
    LineError,
    RunFinished,
    RunStarted,
    StepStarted,
    decode_event,
    read_header,
    scan_line,
)

_scan_json = json.JSONDecoder().scan_once  # type: ignore[attr-defined]  # C scanner, no whitespace checks

__all__ = ["History", "RunStatus", "StepRecord", "StepState", "StoredLog"]

StepState = Literal["completed", "skipped", "failed", "interrupted", "in_doubt"]
"""completed: has a result. skipped: in doubt, settled as outcome unknown. failed: the step
raised. interrupted / in_doubt: it was running when its writer stopped; only an external
step's outcome is in doubt, the others simply run again."""

RunStatus = Literal["running", "completed", "failed", "interrupted", "in_doubt"]


@dataclass(frozen=True, slots=True)
class StoredLog:
    """A run's bytes as a store holds them: whole lines, then any unterminated tail."""

    data: bytes
    """Every complete line, each ending in a newline."""
    tail: bytes
    """Bytes after the last newline: the torn write of a crash, or b""."""
    location: str
    can_tear: bool
    """Whether a crash can cut this store's last write short (files can; transactions cannot)."""

    @classmethod
    def from_file(cls, data: bytes, location: str) -> StoredLog:
        """A log file's bytes, cut after the last newline."""
        end = data.rfind(b"\n") + 1
        return cls(data[:end], data[end:], location, True)

    @classmethod
    def from_lines(cls, lines: Sequence[bytes], location: str) -> StoredLog:
        """Lines kept one per row (no newlines), as transactional stores hold them."""
        return cls(b"".join([line + b"\n" for line in lines]), b"", location, False)


@dataclass(frozen=True, slots=True)
class StepRecord:
    """One step of a run as recorded: identity, state, result and the events around it."""

    position: int
    step_id: str
    state: StepState
    effect: Effect | None
    hash: str | None
    result: Any
    started_at: float | None
    completed_at: float | None
    ms: float | None
    attempts: tuple[AttemptFailed, ...]
    decisions: tuple[Decision, ...]


class _Step:
    """A step while its events are being read (mutable, internal)."""

    __slots__ = ("position", "step_id", "hash", "effect", "seqs", "completed", "decision", "last_kind", "retrying", "attempts")

    def __init__(self, position: int, step_id: str, digest: str | None, completed: int | None = None) -> None:
        self.position = position
        self.step_id = step_id
        self.hash = digest
        self.effect: Effect | None = None
        self.seqs: list[int] = [] if completed is None else [completed]
        self.completed = completed
        self.decision: str | None = None
        self.last_kind = "" if completed is None else STEP_COMPLETED
        self.retrying = False  # the last attempt failed with a retry scheduled
        self.attempts = 0  # failed attempts recorded

    @property
    def open(self) -> bool:
        return self.completed is None and self.decision != "skip"

    @property
    def state(self) -> StepState:
        if self.completed is not None:
            return "completed"
        if self.decision == "skip":
            return "skipped"
        if self.last_kind == ATTEMPT_FAILED and not self.retrying:
            return "failed"
        return "in_doubt" if self.effect == "external" else "interrupted"


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _first_frame_outside_package() -> int:
    """The ``stacklevel`` that points a warning at the user's code, not at nb_durable's."""
    frame = sys._getframe(2)  # the caller of the function that warns
    level = 2
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    return level


def _hex(digits: bytes) -> int:
    """A checksum's value, or -1 (which no CRC-32 equals) if the digits are damaged."""
    try:
        return int(digits, 16) if digits.isalnum() else -1
    except ValueError:
        return -1


def _holds_whole_event(line: bytes) -> bool:
    """Whether a bad line begins with a whole valid event: two lines merged by damage to a
    newline, which a crash (that only cuts the last write short) cannot produce."""
    start = 0
    while (found := line.find(b',"crc":"', start)) != -1:
        end = found + 18
        if end < len(line):
            try:
                read_header(line[:end])
                return True
            except LineError:
                pass
        start = found + 1
    return False


class History:
    """The decoded content of one run's log, kept current as the writer appends."""

    def __init__(self, run_id: str, location: str) -> None:
        self.run_id = run_id
        self.location = location
        self.lines: list[bytes] = []
        # One entry per step, in order. A step recorded by a single step_completed line (the
        # common case) stays a tuple (step_id, hash, seq) until something needs more of it:
        # building an object per step was a third of the time of reopening a long run.
        self._entries: list[_Step | tuple[str, str | None, int]] = []
        self.step_ids: dict[str, int] = {}
        self.started: RunStarted | None = None
        self.finished: RunFinished | None = None
        self._last_ts: float | None = None
        self._events: dict[int, Event] = {}

    @classmethod
    def load(cls, run_id: str, stored: StoredLog, *, salvage: bool = False) -> History:
        """Validate and index a stored log; drop a torn last line with a warning.

        With ``salvage``, damage ends the history instead of raising: what comes before the
        first bad line is returned (for ``fork``, to rescue the intact prefix of a damaged run).
        """
        history = cls(run_id, stored.location)
        # Loading makes many small objects and no cycles: the cyclic collector would only
        # rescan them (a third of the time of reopening a 10,000-step run).
        collecting = gc.isenabled()
        gc.disable()
        try:
            history._fill(stored)
        except LogCorruptedError:
            if not salvage or not history.lines:
                raise
        finally:
            if collecting:
                gc.enable()
        return history

    def _fill(self, stored: StoredLog) -> None:
        history = self
        data = stored.data
        entries = history._entries
        step_ids = history.step_ids
        lines = history.lines
        keep = lines.append
        crc32 = zlib.crc32
        pos = 0
        size = len(data)
        find = data.find
        match_header = STEP_COMPLETED_HEADER.match
        # The fast path: a step_completed line whose header, sequence number and checksum
        # check out is indexed inline (the regex reads the header only; memchr finds the
        # end). Anything else (other kinds, bad lines) goes through _load_lines, the exact
        # path that also says what is wrong.
        while pos < size:
            end = find(b"\n", pos) + 1
            index = len(lines)
            header = match_header(data, pos)
            if (
                header is None
                or not index
                or int(header.group(1)) != index
                or data[end - 19 : end - 11] != b',"crc":"'
                or crc32(data[pos : end - 19]) != _hex(data[end - 11 : end - 3])
            ):
                history._load_lines(data[pos:end], stored, final=end == size)
                pos = end
                continue
            keep(data[pos : end - 1])
            pos = end
            step_id, digest = header.group(2, 3)
            name = step_id.decode()
            position = step_ids.get(name)
            entry = None if position is None else entries[position]
            if entry is None or type(entry) is tuple or not entry.open:  # type: ignore[union-attr]
                step_ids[name] = len(entries)
                entries.append((name, None if digest is None else digest.decode(), index))
            else:
                entry.completed = index  # type: ignore[union-attr]
                entry.seqs.append(index)  # type: ignore[union-attr]
                entry.last_kind = STEP_COMPLETED  # type: ignore[union-attr]
            history.finished = None
        if stored.tail:
            history._warn_torn(len(lines) + 1, len(stored.tail), "it has no newline")

    def _load_lines(self, chunk: bytes, stored: StoredLog, *, final: bool) -> None:
        """Check and index whole lines one by one; ``final`` if they end the stored data."""
        pieces = chunk.split(b"\n")
        pieces.pop()  # what follows the chunk's last newline: nothing, or a partial line
        last = len(pieces) - 1
        for number, line in enumerate(pieces):
            index = len(self.lines)
            try:
                seq, kind, step_id, digest = scan_line(line)
                if seq != index:
                    raise LineError(f"its sequence number is {seq}, expected {index}")
                if (index == 0) != (kind == RUN_STARTED):
                    raise LineError(
                        "a log must begin with run_started, and only once"
                        if index == 0
                        else "run_started appears again"
                    )
            except LineError as e:
                torn = final and number == last and not stored.tail and stored.can_tear
                if torn and not _holds_whole_event(line):
                    self._warn_torn(index + 1, len(line), str(e))
                    return
                raise self._corrupted(index + 1, str(e), foreign=index == 0) from None
            self._add(line, kind, step_id, digest, None)

    def _warn_torn(self, line_no: int, size: int, why: str) -> None:
        warnings.warn(
            f"run {self.run_id!r}: dropped a torn last line ({line_no} of {self.location}, "
            f"{size} bytes: {why}). A crash cut that write short; the step it recorded "
            "will run again.",
            TornLineWarning,
            stacklevel=_first_frame_outside_package(),
        )

    def _corrupted(self, line_no: int, why: str, *, foreign: bool) -> LogCorruptedError:
        if foreign:
            what = (
                f"{self.location} is not an nb_durable log: line 1 {why}. If this file "
                "belongs to another tool, move it out of the runs folder."
            )
        else:
            what = (
                f"run {self.run_id!r} is damaged at line {line_no} of {self.location}: {why}. "
                "This is not a torn write (those only affect the last line), so nothing was "
                "dropped. Restore the file from a copy, or fork the intact prefix into a new "
                f"run with fork({self.run_id!r}, new_id, at=N)."
            )
        return LogCorruptedError(what, run_id=self.run_id, location=self.location, line=line_no)

    def add(self, line: bytes, event: Event) -> None:
        """Index a line the writer has just appended, its typed event at hand."""
        self._add(line, event.kind, getattr(event, "step", None), getattr(event, "hash", None), event)
        self._last_ts = event.ts

    def _add(self, line: bytes, kind: str, step_id: str | None, digest: str | None, event: Event | None) -> None:
        seq = len(self.lines)
        self.lines.append(line)
        self._last_ts = None
        if kind == STEP_COMPLETED:
            step = self._step_for(step_id, digest)
            step.completed = seq
            step.seqs.append(seq)
            step.last_kind = kind
            self.finished = None
            return
        if event is None:
            event = self._decode(seq)
        else:
            self._events[seq] = event
        if kind == RUN_STARTED:
            assert isinstance(event, RunStarted)
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

    def _step_for(self, step_id: str | None, digest: str | None) -> _Step:
        step_id = step_id or ""
        position = self.step_ids.get(step_id)
        if position is not None and type(self._entries[position]) is not tuple:
            step = self.step(position)
            if step.open:
                return step
        step = _Step(len(self._entries), step_id, digest)
        self.step_ids[step_id] = step.position
        self._entries.append(step)
        return step

    @property
    def step_count(self) -> int:
        """How many steps the log records."""
        return len(self._entries)

    def step(self, position: int) -> _Step:
        """The step at ``position``, as an object (made from its compact form on first use)."""
        entry = self._entries[position]
        if type(entry) is tuple:
            step_id, digest, seq = entry
            entry = self._entries[position] = _Step(position, step_id, digest, seq)
        return entry  # type: ignore[return-value]

    @property
    def steps(self) -> list[_Step]:
        """Every step, as objects (for inspection; replay reads the compact form)."""
        return [self.step(i) for i in range(len(self._entries))]

    def completed_count(self) -> int:
        """How many steps have a result."""
        return sum(1 for e in self._entries if isinstance(e, tuple) or e.completed is not None)

    @property
    def first_ts(self) -> float | None:
        """When the run started."""
        return self.started.ts if self.started else None

    @property
    def last_ts(self) -> float | None:
        """When the run last recorded an event."""
        if self._last_ts is None and self.lines:
            self._last_ts = read_header(self.lines[-1]).ts
        return self._last_ts

    def _decode(self, seq: int) -> Event:
        event = self._events.get(seq)
        if event is None:
            try:
                event = decode_event(self.lines[seq])
            except LineError as e:
                raise self._corrupted(seq + 1, str(e), foreign=False) from None
            if event.kind != STEP_COMPLETED:
                self._events[seq] = event
        return event

    def result(self, step: _Step) -> Any:
        """A completed step's result, decoded from its line."""
        assert step.completed is not None
        return self.result_at(step.completed)

    def result_at(self, seq: int) -> Any:
        """The result recorded by the step_completed line ``seq``."""
        line = self.lines[seq]
        # The result sits between the first '"result":' and the last ',"ms":' (the line's
        # layout is fixed by encode_event), so only the result itself is parsed.
        start = line.find(b',"result":')
        end = line.rfind(b',"ms":')
        if start != -1 and end > start:
            text = line[start + 10 : end].decode("utf-8")
            try:
                value, stop = _scan_json(text, 0)
            except StopIteration:
                stop = -1
            if stop == len(text):
                return value
        return json.loads(line.decode("utf-8"))["result"]

    @property
    def events(self) -> list[Event]:
        """Every event, typed (decodes results: use for inspection, not for replay)."""
        return [self._decode(seq) for seq in range(len(self.lines))]

    @property
    def settings(self) -> dict[str, Any]:
        return dict(self.started.settings) if self.started else {}

    def record(self, step: _Step) -> StepRecord:
        """A frozen snapshot of one step."""
        events = [self._decode(seq) for seq in step.seqs]
        started = next((e.ts for e in events if e.kind == STEP_STARTED), None)
        done = events[-1] if step.completed is not None else None
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

    def status(self, writer_alive: bool) -> RunStatus:
        """The run's status as a reader sees it, given whether a writer holds the lease."""
        in_doubt = bool(self._entries) and self.step(len(self._entries) - 1).state == "in_doubt"
        if self.finished is not None:
            # Interrupted in the middle of an external step leaves that step's outcome unknown.
            return "in_doubt" if in_doubt and self.finished.status == "interrupted" else self.finished.status
        if writer_alive:
            return "running"
        return "in_doubt" if in_doubt else "interrupted"
