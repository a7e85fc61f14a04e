"""The one write path of a run: its lease, its history, and every line on its way out.

Opening a ``RunWriter`` takes the run's lease from the store, loads and checks what the run
holds (a torn last line is dropped with a warning and truncated under the lease), and from
then on every line goes the same way: encoded once by ``codec``, stored (synced as the
durability level says) and only then indexed in the history, so the history never claims
what the store does not hold.

One writer per run: another process gets ``RunLockedError`` from the store; a newer writer
of the same run in this process supersedes the older one (a notebook cell run twice), whose
next write raises ``LeaseLostError``.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Sequence
from typing import Any, Literal

from ..errors import LeaseLostError, RunError, UnencodableTextError
from .codec import RawJSON, encode_event, scan_line
from .events import STEP_COMPLETED, AttemptFailed, Decision, Event, StepStarted
from .history import History
from .stores import Store, StoreWriter

__all__ = ["DURABILITIES", "Durability", "RunWriter", "held_here"]

Durability = Literal["full", "process", "none"]
"""full: every record and intent is fsynced (survives power loss). process: only intents of
external steps and decisions are fsynced; other records reach the OS, so they survive a
crashed or killed process, and a power loss may make the latest steps run again. none:
nothing is fsynced (tests, throwaway runs)."""

DURABILITIES: tuple[Durability, ...] = ("full", "process", "none")

_writers: dict[tuple[str, str], weakref.ref[RunWriter]] = {}


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
        older = _writers.pop(self._key, None)
        if older is not None and (previous := older()) is not None:
            previous.supersede()
        self._out: StoreWriter | None = None
        out = store.open_writer(run_id)
        try:
            stored = out.load()
            self.history = History.load(run_id, stored)
            if len(self.history.lines) < stored.data.count(b"\n") or stored.tail:
                out.truncate(len(self.history.lines))
        except BaseException:
            out.close()
            raise
        self._out = out
        _writers[self._key] = weakref.ref(self)

    @property
    def open(self) -> bool:
        """Whether this writer still holds the run's lease."""
        return self._out is not None

    def append(self, event_type: type[Event], **fields: Any) -> Event:
        """Record one event; return it as recorded."""
        event, line = self._encoded(event_type, fields)
        self._write([line], event.seq, self._sync(event_type, fields.get("effect")))
        self.history.append(line[:-1], event)
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
            pair([line], mine.seq, other._out, [their_line], theirs.seq, sync=sync)
        else:
            other._write([their_line], theirs.seq, sync)
            self._write([line], mine.seq, sync)
        other.history.append(their_line[:-1], theirs)
        self.history.append(line[:-1], mine)
        return mine, theirs

    def _encoded(self, event_type: type[Event], fields: dict[str, Any]) -> tuple[Event, bytes]:
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

    def append_result(self, step_id: str, digest: str | None, text: str, ms: float) -> tuple[int, float]:
        """Record a step's result from its JSON text (a run's hot path); return (seq, ts)."""
        seq = len(self.history.lines)
        ts = time.time()
        fields: dict[str, Any] = {"step": step_id, "hash": digest, "result": RawJSON(text), "ms": RawJSON("%.3f" % ms)}
        if digest is None:
            del fields["hash"]
        line = encode_event(seq, ts, STEP_COMPLETED, fields)
        self._write([line], seq, self.durability == "full")
        self.history.append_completed(line[:-1], step_id, digest)
        return seq, round(ts, 3)

    def append_lines(self, lines: Sequence[bytes]) -> None:
        """Record already-encoded lines (a fork's prefix) in one synced write."""
        seq = len(self.history.lines)
        for i, line in enumerate(lines):
            if scan_line(line)[0] != seq + i:
                raise RunError(f"line {i + 1} to import into run {self.run_id!r} is out of sequence", run_id=self.run_id)
        self._write([line + b"\n" for line in lines], seq, self.durability != "none")
        self.history.append_lines(lines)

    def _write(self, lines: list[bytes], seq: int, sync: bool) -> None:
        if self._out is None:
            raise self.lost_error()
        self._out.append(lines, seq, sync=sync)

    def _sync(self, event_type: type[Event], effect: str | None) -> bool:
        if self.durability == "none":
            return False
        if self.durability == "full":
            return event_type is not AttemptFailed and effect != "idempotent"
        return event_type is Decision or (event_type is StepStarted and effect == "external")

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
        out, self._out = self._out, None
        if out is not None:
            self._lost = "closed"
            ref = _writers.get(self._key)
            if ref is not None and ref() is self:
                del _writers[self._key]
            out.close()
