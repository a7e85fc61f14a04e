"""Loading a run's stored log into a ``History``: every line checked, and damage classified.

Damage is classified here and nowhere else: a bad last line may be the torn write of a
crash and is dropped with a warning (where the store can tear, i.e. files); a bad line
anywhere before it, or a whole line (its checksum holds) of the wrong shape anywhere, is
corruption and raises ``LogCorruptedError`` naming file and line. A ``History``'s own part,
split from it for size: it fills the history's index as its ``append`` does.
"""

from __future__ import annotations

import gc
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..errors import LogCorruptedError, NewerLogError, TornLineWarning, stacklevel_outside_package
from .codec import (
    SCHEMA_VERSION,
    LineError,
    NewerLineError,
    StoredLog,
    completed_header,
    decode_event,
    has_log_shape,
    holds_whole_event,
    scan_line,
)
from .events import RUN_STARTED, STEP_COMPLETED

if TYPE_CHECKING:
    from .history import History

__all__ = ["load"]


def load(history: History, stored: StoredLog, *, salvage: bool, being_written: Callable[[], bool] | None) -> History:
    """Validate and index ``stored`` into the empty ``history`` (see ``History.load``)."""
    history._being_written = being_written
    # Loading makes many small objects and no cycles: the cyclic collector would only
    # rescan them (a third of the time of reopening a 10,000-step run).
    collecting = gc.isenabled()
    gc.disable()
    try:
        _fill(history, stored)
    except LogCorruptedError as e:
        if not salvage or not history.lines:
            raise
        history.damaged = e
    finally:
        if collecting:
            gc.enable()
    return history


def _fill(history: History, stored: StoredLog) -> None:
    data = stored.data
    entries = history._entries
    step_ids = history.step_ids
    lines = history.lines
    keep = lines.append
    pos = 0
    size = len(data)
    find = data.find
    # The fast path: a step_completed line whose header, sequence number and checksum
    # check out is indexed inline. Anything else (other kinds, bad lines) goes through
    # _load_lines, the exact path that also says what is wrong.
    while pos < size:
        end = find(b"\n", pos) + 1
        index = len(lines)
        header = completed_header(data, pos, end, index) if index else None
        if header is None:
            _load_lines(history, data[pos:end], stored, final=end == size)
            pos = end
            continue
        keep(data[pos : end - 1])
        pos = end
        step_id, digest = header
        name = step_id.decode()
        position = step_ids.get(name)
        entry = None if position is None else entries[position]
        history._completed += 1
        if entry is None or type(entry) is tuple or not entry.open:  # type: ignore[union-attr]
            step_ids[name] = len(entries)
            entries.append((name, None if digest is None else digest.decode(), index))
        else:
            entry.completed = index  # type: ignore[union-attr]
            entry.seqs.append(index)  # type: ignore[union-attr]
            entry.last_kind = STEP_COMPLETED  # type: ignore[union-attr]
        history.finished = None
    if stored.tail:
        _warn_torn(history, len(lines) + 1, len(stored.tail), "it has no newline")

def _load_lines(history: History, chunk: bytes, stored: StoredLog, *, final: bool) -> None:
    """Check and index whole lines one by one; ``final`` if they end the stored data."""
    pieces = chunk.split(b"\n")
    pieces.pop()  # what follows the chunk's last newline: nothing, or a partial line
    last = len(pieces) - 1
    for number, line in enumerate(pieces):
        index = len(history.lines)
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
        except NewerLineError as e:
            # Whole and checksummed, so not torn: a newer nb_durable wrote it.
            raise NewerLogError(
                run_id=history.run_id, location=history.location, line=index + 1, version=e.version, reads=SCHEMA_VERSION
            ) from None
        except LineError as e:
            torn = final and number == last and not stored.tail and stored.can_tear
            if torn and not holds_whole_event(line):
                _warn_torn(history, index + 1, len(line), str(e))
                return
            foreign = index == 0 and not has_log_shape(line)  # a line of ours, damaged, is a damaged log
            raise history._corrupted(index + 1, str(e), foreign=foreign, intact=_intact(history)) from None
        try:
            # Checksummed, so whole (never torn): what is wrong now is what it was written with.
            event = decode_event(line)
        except LineError as e:
            raise history._corrupted(index + 1, str(e), foreign=False, intact=_intact(history)) from None
        # A result is not kept decoded: the first to need it parses it again.
        history._index(line, kind, step_id, digest, None if kind == STEP_COMPLETED else event)

def _intact(history: History) -> int:
    """What a fork can keep: how many steps from the start have their result."""
    whole = (i for i, s in enumerate(history._entries) if type(s) is not tuple and s.completed is None)  # type: ignore[union-attr]
    return next(whole, len(history._entries))

def _warn_torn(history: History, line_no: int, size: int, why: str) -> None:
    if history._being_written is not None and history._being_written():
        return  # not torn: a live writer is in the middle of that write
    warnings.warn(
        f"run {history.run_id!r}: dropped a torn last line (line {line_no} of {history.location}, {size} bytes: "
        f"{why}), the mark of a write a crash left unfinished. The log goes on from the line before: "
        "what it recorded is done again (a step with an effect outside is in doubt).",
        TornLineWarning,
        stacklevel=stacklevel_outside_package(),
    )
