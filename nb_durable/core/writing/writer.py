"""The one write path of a run: its lease, its history, and every line on its way out.

Opening a ``RunWriter`` takes the run's lease from the store, loads and checks what the run
holds (a torn last line is dropped with a warning and truncated under the lease), and from
then on every line goes the same way: encoded once by ``codec``, stored (synced as the
durability level says) and only then indexed in the history, so the history never claims
what the store does not hold. Each append also hands the store the run's index row
(``core.index.rows``) as it stands after that append, for the store to write with it (in the
same transaction where it has them); the row's figures are counted as lines go out, and the row
is checked against the log on open (and rewritten if it differs: a migrated or damaged index).

While the run asks a person, the writer marks its lease with the question (``mark_asking``,
``core.holders``): a live state, never a line of the log.

One writer per run: another process gets ``RunLockedError`` from the store; a newer writer
of the same run in this process supersedes the older one (a notebook cell run twice), whose
next write raises ``LeaseLostError``. Inside ``leaving_others()`` (a parent resuming its
child, a worker taking a run) a newer writer refuses instead, with ``RunLockedError``: two
threads of one process that looked at a run and found it free must not take it from each
other. The look, the supersession and the registration of a writer are one step under a
process-wide lock, so no thread can open a run between another's look and its open.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Literal

from ...errors import LeaseLostError, RunError, RunLockedError, SettingError, UnencodableTextError
from ..codec import RawJSON, StoredLog, encode_event, scan_line
from ..events import (
    DECISION,
    STEP_COMPLETED,
    AttemptFailed,
    Decision,
    Event,
    StepCompleted,
    StepStarted,
    wrong_field,
)
from ..history import History
from ..holders import Asking, Awaiting
from ..index.figures import add_figures, counted_of, figures
from ..index.rows import IndexRow, count_log, index_of, resumer_of, row_of
from ..stores import Store, StoreWriter
from .interrupts import interrupts_held

__all__ = ["DURABILITIES", "Durability", "RunWriter", "held_here", "leaving_others"]

Durability = Literal["full", "process", "none"]
"""full: every record and intent is fsynced (survives power loss). process: only intents of
external steps and decisions are fsynced; other records reach the OS, so they survive a
crashed or killed process, and a power loss may make the latest steps run again. none:
nothing is fsynced (tests, throwaway runs)."""

DURABILITIES: tuple[Durability, ...] = ("full", "process", "none")

_writers: dict[tuple[str, str], weakref.ref[RunWriter]] = {}
_opening = threading.Lock()
_leave_others: ContextVar[bool] = ContextVar("nb_durable_leave_others", default=False)


@contextmanager
def leaving_others() -> Iterator[None]:
    """Writers opened in this block (this thread) refuse a run that another writer of this
    process holds, with ``RunLockedError``, instead of superseding it."""
    token = _leave_others.set(True)
    try:
        yield
    finally:
        _leave_others.reset(token)


def held_here(store: Store, run_id: str) -> bool:
    """Whether a writer of this process holds run ``run_id`` of ``store`` now (opening another
    would supersede it: a caller that must not, such as a parent resuming its child, waits)."""
    ref = _writers.get((store.key, run_id))
    writer = ref() if ref is not None else None
    return writer is not None and writer.open


class RunWriter:
    """One run, open for writing."""

    def __init__(self, store: Store, run_id: str, durability: Durability) -> None:
        self.store = store
        self.run_id = run_id
        self.durability: Durability = durability
        self._lost = ""
        self._key = (store.key, run_id)
        self._out: StoreWriter | None = None
        with _opening:
            self._open(store, run_id)

    def _open(self, store: Store, run_id: str) -> None:
        older = _writers.get(self._key)
        previous = older() if older is not None else None
        if previous is not None and previous.open and _leave_others.get():
            raise RunLockedError(
                f"run {run_id!r} is being written by another thread of this process; it is left to it",
                run_id=run_id,
                holder=None,
            )
        _writers.pop(self._key, None)
        if previous is not None:
            previous.supersede()
        out = store.open_writer(run_id)
        try:
            stored = out.load()
            self.history = History.load(run_id, stored)
            if len(self.history.lines) < stored.data.count(b"\n") or stored.tail:
                out.truncate(len(self.history.lines))
            self._indexed = index_of(store) is not None and getattr(store, "index_written", True)
            self._figures: dict[str, float] = {}
            self._resumed_by: str | None = None
            self._row: IndexRow | None = None
            if self._indexed:
                self._open_index(out)
        except BaseException:
            out.close()
            raise
        self._out = out
        _writers[self._key] = weakref.ref(self)

    def _open_index(self, out: StoreWriter) -> None:
        """Take the figures from the stored row if it reflects this very log by the rule in use, else count them;
        write the row if the stored one is not what the log says."""
        history = self.history
        if not history.lines:
            return
        rows = index_of(self.store).index_rows([self.run_id])  # type: ignore[union-attr]
        stored = rows[0] if rows else None
        if stored is not None and stored.current and stored.lines == len(history.lines) and stored.started_at == history.first_ts:
            self._figures, self._resumed_by = dict(stored.figures), stored.resumed_by
        else:
            self._figures, self._resumed_by = count_log(history)
        self._row = row_of(history, self._figures, self._resumed_by, counted=True)
        if self._row != stored:
            out.put_index(self._row)

    def _count(self, kind: str, step_id: str | None, value: Callable[[], Any], by: str | None = None) -> None:
        """Add what one event being appended adds to the run's figures (``value``: a thunk of what it records)."""
        counter = figures()
        if counter.wants(kind, step_id):
            self._figures = add_figures(self._figures, counter.count(self.history.settings, kind, value()))
        if kind == DECISION:
            self._resumed_by = resumer_of(by) or self._resumed_by

    @property
    def row(self) -> IndexRow | None:
        """The run's index row as this writer last wrote it (None for a store with no index)."""
        return self._row

    @property
    def open(self) -> bool:
        """Whether this writer still holds the run's lease."""
        return self._out is not None

    def append(self, event_type: type[Event], **fields: Any) -> Event:
        """Record one event; return it as recorded."""
        event, line = self._encoded(event_type, fields)
        self._write([line], event.seq, self._sync(event_type, fields.get("effect")), self._indexer(event, line))
        return event

    def append_with(
        self, event_type: type[Event], fields: dict[str, Any], other: RunWriter, other_type: type[Event], other_fields: dict[str, Any]
    ) -> tuple[Event, Event]:
        """Record one event here and one in ``other``, a run of the same store, so that a crash
        leaves both or neither: one transaction where the store has them (``append_pair``),
        else ``other``'s first, so that this run never names what ``other`` does not hold."""
        mine, line = self._encoded(event_type, fields)
        theirs, their_line = other._encoded(other_type, other_fields)
        sync = self.durability != "none"
        pair = getattr(self._out, "append_pair", None)
        if pair is not None and other._out is not None and type(other._out) is type(self._out) and other.store.key == self.store.key:
            with interrupts_held():
                undo = [self._stage(self._indexer(mine, line)), other._stage(other._indexer(theirs, their_line))]
                try:
                    pair(
                        [line], mine.seq, other._out, [their_line], theirs.seq, sync=sync,
                        index=self._row if self._indexed else None, other_index=other._row if other._indexed else None,
                    )  # fmt: skip
                except BaseException:
                    for step_back in undo:
                        step_back()
                    raise
        else:
            other._write([their_line], theirs.seq, sync, other._indexer(theirs, their_line))
            self._write([line], mine.seq, sync, self._indexer(mine, line))
        return mine, theirs

    def _indexer(self, event: Event, line: bytes) -> Callable[[], None]:
        """What puts one appended event in the history (and, with a run index, its figures)."""

        def index() -> None:
            if self._indexed:
                self._count(event.kind, getattr(event, "step", None), lambda: counted_of(event), getattr(event, "by", None))
            self.history.append(line[:-1], event)

        return index

    def _encoded(self, event_type: type[Event], fields: dict[str, Any]) -> tuple[Event, bytes]:
        # Every reader refuses a line of the wrong shape as damage: written, it would make
        # the whole run unreadable, so it is refused here, with nothing written.
        wrong = wrong_field(event_type, fields)
        if wrong is not None:
            setting, value, expected = wrong
            reason = f"of the {event_type.kind} event to record in run {self.run_id!r} must be {expected} (nothing was recorded)"
            raise SettingError(setting=setting, value=value, reason=reason)
        seq = len(self.history.lines)
        ts = round(time.time(), 3)
        event = event_type(seq=seq, ts=ts, **fields)
        try:
            line = encode_event(seq, ts, event_type.kind, event.fields())
        except UnicodeEncodeError as e:
            raise UnencodableTextError(
                run_id=self.run_id, what=f"its {event_type.kind} event", sample=e.object[e.start : e.end]
            ) from None
        return event, line

    def append_result(self, step_id: str, digest: str | None, value: Any, text: str, ms: float) -> StepCompleted:
        """Record a step's result from its JSON text (a run's hot path; ``value`` is what replay
        hands back, equal to the text's JSON); return the event as recorded."""
        seq = len(self.history.lines)
        ts = time.time()
        fields: dict[str, Any] = {"step": step_id, "hash": digest, "result": RawJSON(text), "ms": RawJSON("%.3f" % ms)}
        if digest is None:
            del fields["hash"]
        line = encode_event(seq, ts, STEP_COMPLETED, fields)
        event = StepCompleted(seq=seq, ts=round(ts, 3), step=step_id, hash=digest, result=value, ms=round(ms, 3))

        def index() -> None:
            if self._indexed:
                self._count(STEP_COMPLETED, step_id, lambda: value)
            self.history.append_completed(line[:-1], event)

        self._write([line], seq, self.durability == "full", index)
        return event

    def append_lines(self, lines: Sequence[bytes]) -> None:
        """Record already-encoded lines (a fork's prefix) in one synced write."""
        seq = len(self.history.lines)
        for i, line in enumerate(lines):
            if scan_line(line)[0] != seq + i:
                raise RunError(f"line {i + 1} to import into run {self.run_id!r} is out of sequence", run_id=self.run_id)
        def index() -> None:
            self.history.append_lines(lines)
            if self._indexed:
                self._figures, self._resumed_by = count_log(self.history)

        self._write([line + b"\n" for line in lines], seq, self.durability != "none", index)

    def _write(self, lines: list[bytes], seq: int, sync: bool, index: Callable[[], None]) -> None:
        """Store ``lines``; ``index`` puts them in the history. With a run index, the history
        takes them first, so the row stored with them is the run's as it will be; if the store
        refuses them, the history is rebuilt without them (it never claims what is not stored).
        Ctrl-C waits until both are done (``core.writing.interrupts``)."""
        out = self._out
        if out is None:
            raise self.lost_error()
        with interrupts_held():
            if not self._indexed:
                out.append(lines, seq, sync=sync)
                index()
                return
            undo = self._stage(index)
            try:
                out.append(lines, seq, sync=sync, index=self._row)
            except BaseException:
                undo()
                raise

    def _stage(self, index: Callable[[], None]) -> Callable[[], None]:
        """Put lines in the history (``index``) and, with a run index, make the row they give;
        return what takes them out again if the store refuses them."""
        history, figures_before, resumed_before = self.history, self._figures, self._resumed_by
        kept = len(history.lines)
        index()
        if self._indexed:
            self._row = row_of(self.history, self._figures, self._resumed_by, counted=True)

        def undo() -> None:
            self.history = History.load(self.run_id, StoredLog.from_lines(history.lines[:kept], history.location))
            self._figures, self._resumed_by = figures_before, resumed_before
            self._row = None

        return undo

    def _sync(self, event_type: type[Event], effect: str | None) -> bool:
        if self.durability == "none":
            return False
        if self.durability == "full":
            return event_type is not AttemptFailed and effect != "idempotent"
        return event_type is Decision or (event_type is StepStarted and effect == "external")

    def mark_asking(self, asking: Asking | Awaiting | None) -> None:
        """Mark the lease with what the run asks a person now, or waits on outside it (an
        ``Awaiting``), or clear the mark (``core.holders``)."""
        mark = getattr(self._out, "mark_asking", None)
        if mark is not None:  # a store written before marks: its readers say running
            mark(asking.to_json() if asking is not None else None)

    def lost_error(self) -> LeaseLostError:
        """Why this writer can no longer write, as the error to raise."""
        if self._lost == "superseded":
            why = "a newer EventLog of the same run was opened in this process; use that one"
        else:
            why = "it was closed; open a new EventLog to go on"
        return LeaseLostError(
            f"this EventLog can no longer write run {self.run_id!r}: {why}.", run_id=self.run_id, holder=None
        )

    def supersede(self) -> None:
        """Give the lease up to a newer writer of the same run in this process."""
        self.close()
        self._lost = "superseded"

    def close(self) -> None:
        """Release the lease; safe to call twice."""
        out = self._let_go()
        if out is not None:
            out.close()

    def delete(self) -> None:
        """Remove the run and all it recorded, then release the lease (a fork cut short)."""
        out = self._let_go()
        if out is not None:
            out.delete()

    def _let_go(self) -> StoreWriter | None:
        out, self._out = self._out, None
        if out is not None:
            self._lost = "closed"
            ref = _writers.get(self._key)
            if ref is not None and ref() is self:
                del _writers[self._key]
        return out
