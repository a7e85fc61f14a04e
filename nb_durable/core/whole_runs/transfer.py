"""Copying runs between stores: JSONL, SQLite, memory and PostgreSQL, in any direction.

A copy moves a run's event lines as they are, byte for byte: each line already carries its
schema version, sequence number and checksum, so nothing is decoded or re-encoded and the
copy is the same run. The invariants:

* Nothing unchecked is written: every source run is loaded through ``History.load`` (every
  checksum, sequence number and kind) before the first line of any is written, and a damaged run
  stops the copy before it (a torn last line of a file is dropped with a warning, as on reopen).
  Each is let go once checked and read again to be copied, so a copy holds one run at a time,
  not the store (a store of gigabytes is copied in the memory of its largest run, for twice the
  reading); the second read is checked too, and a run written meanwhile is refused then.
* Nothing is overwritten: a run that already exists in the destination is refused, and all
  such refusals are found before anything is copied (an empty one, left by a copy cut short,
  is no run: it is written as if new). One whose lines there are the source's, byte for byte,
  is that run already copied: it is passed over (``same`` hears it), so copying a store again
  after a copy cut short copies the rest, with no list of names to type.
* A run being written (its lease held) is not copied: the copy would miss its next steps, and
  two resumable copies would drift apart.
* The destination run's lease is held while its lines are written; they go in one append (one
  transaction in SQLite and PostgreSQL) and are read back and compared before the next run.
* A run named goes with its child runs (``core.whole_runs.children``), each after its parent,
  as ``delete`` and ``prune`` take them: a parent copied alone would bill and list no child,
  and a resume of it would find its unfinished children missing. A child named alone is an
  ordinary run, copied alone.
* Runs are copied one at a time: an error while writing one (a full disk, a dropped
  connection) stops the copy there, with the runs before it copied whole (each told to
  ``report`` as it is done) and none of the rest begun; copying again copies the rest.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable

from ...errors import RunError, RunLockedError, RunNotFoundError, StoreError, StoreFullError, StoreShortError
from ..history import History
from ..holders import describe_holder
from ..index.rows import index_of, names, row_of
from ..stores import Store, check_run_id, check_writable, open_store
from .children import descendants

__all__ = ["copy_runs"]

StoreSpec = str | os.PathLike[str] | Store


def copy_runs(
    source: StoreSpec,
    destination: StoreSpec,
    run_ids: str | Iterable[str] | None = None,
    *,
    report: Callable[[str], None] = lambda run_id: None,
    same: Callable[[str], None] = lambda run_id: None,
) -> list[str]:
    """Copy runs (every run of ``source`` if none are named) into ``destination``; return the ids
    of those copied (``report`` hears each one as soon as it is copied, ``same`` each one passed
    over because the destination holds it already, line for line)."""
    src = open_store(source)
    dst = open_store(destination)
    if src.key == dst.key:
        raise StoreError(f"cannot copy runs from {src.url} into itself: name another store as the destination")
    if run_ids is None:
        wanted = src.run_ids()
    else:
        named = list(dict.fromkeys(check_run_id(r) for r in names(run_ids)))
        among = src.run_ids()
        wanted = list(dict.fromkeys(r for n in named for r in (n, *descendants(src, n, among))))
    there = {r: _recorded(dst, r) for r in set(wanted) & set(dst.run_ids())}
    there = {r: lines for r, lines in there.items() if lines}
    # Compared as stored, before any check of the source: the same bytes are the same run.
    already = {r for r, lines in there.items() if lines == src.load(r).data}
    clashes = sorted(set(there) - already)
    if clashes:
        listed = ", ".join(repr(r) for r in clashes[:5]) + (", ..." if len(clashes) > 5 else "")
        raise RunError(
            f"{dst.url} already has {len(clashes)} of the runs to copy ({listed}), other than the source's "
            "runs of those ids; a copy never overwrites a run. Delete them there, or copy the others by "
            "naming them; nothing was copied.",
            run_id=clashes[0],
        )
    if set(wanted) - already:  # before the source is read: a read-only destination takes none of it
        check_writable(dst, f"cannot copy runs into {dst.url}", destination=True)
    for run_id in wanted:  # every run checked before any is written, each let go once checked
        _checked(src, run_id, then="nothing was copied")
    copied: list[str] = []
    for run_id in wanted:
        if run_id in already:
            same(run_id)
            continue
        # Read and checked again: a run may have been written or damaged since the first look.
        so_far = f"the {len(copied)} run(s) before it were copied, and no other" if copied else "nothing was copied"
        _copy_one(_checked(src, run_id, then=so_far), src, dst)
        report(run_id)
        copied.append(run_id)
    return copied


def _checked(src: Store, run_id: str, then: str) -> History:
    """The run, every line checked; refused while it is being written (``then``: what was copied)."""
    holder = src.holder(run_id)
    if holder is not None:
        raise RunLockedError(
            f"run {run_id!r} in {src.url} is being written by {describe_holder(holder)}, so a copy "
            f"would miss its next steps. Copy it when that process has finished or stopped; {then}.",
            run_id=run_id,
            holder=holder,
        )
    # Raises RunNotFoundError or LogCorruptedError, naming the run and where it is.
    return History.load(run_id, src.load(run_id))


def _recorded(store: Store, run_id: str) -> bytes:
    """The run's lines: none, of an empty one (a copy a full disk cut short, a writer that
    died before its first line), which is no run to keep, and is written over like a new one."""
    try:
        return store.load(run_id).data
    except RunNotFoundError:
        return b""


def _copy_one(history: History, src: Store, dst: Store) -> None:
    run_id = history.run_id
    if not history.lines:
        raise RunError(f"run {run_id!r} in {src.url} has no events to copy", run_id=run_id)
    data = b"".join([line + b"\n" for line in history.lines])
    writer = dst.open_writer(run_id)  # the destination's lease: no one else writes it meanwhile
    try:
        if writer.load().data:
            raise RunError(
                f"run {run_id!r} appeared in {dst.url} while copying (another process created it); "
                "it was left as it is. Copy it again once you know which one to keep.",
                run_id=run_id,
            )
        row = row_of(history) if index_of(dst) is not None and getattr(dst, "index_written", True) else None
        try:
            writer.append([line + b"\n" for line in history.lines], 0, sync=True, index=row)
        except StoreShortError as e:
            # The append was undone (a full disk, a server short of capacity past its wait); the
            # empty log it leaves would be listed by check-index as a run with nothing recorded.
            # Said as a copy, which goes on by copying again, not as a run's log, which goes on by resuming.
            try:
                writer.delete()
                left = f"run {run_id!r} was not copied, and no empty run of it was left there"
            except StoreError as gone:
                left = f"run {run_id!r} was not copied; its empty log there could not be removed ({gone})"
            then = f"copy again: the runs already copied are passed over ({left})"
            if isinstance(e, StoreFullError):
                doing = f"cannot copy run {run_id!r} into {dst.url}"
                raise StoreFullError(doing=doing, path=e.path, code=e.errno, then=then, elsewhere="copy into a store on another disk") from None
            raise e.said_as(f"cannot copy run {run_id!r}", then) from None  # said_as names the store
        copied = writer.load()
    finally:
        writer.close()
    if copied.data != data or copied.tail:
        raise StoreError(
            f"run {run_id!r} reads back from {dst.url} different from what was copied from {src.url}; "
            "the copy there is not trustworthy: delete it and report this as a bug."
        )
