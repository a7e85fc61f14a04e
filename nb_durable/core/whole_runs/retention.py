"""Retention: delete one run, or prune the runs older than an age, on any store.

A run is deleted only under its lease (``StoreWriter.delete``), exactly as a writer holds it,
so a delete can never race a writer: a run that is being written (a live kernel, a worker) is
refused with ``RunLockedError`` naming the holder. ``prune_runs`` checks each candidate again
under its lease before deleting it, so a run resumed between the listing and the delete is
kept. Logs that cannot be read (damaged, foreign) are never pruned: they are warned about and
left for a person. A run's child runs (``core.whole_runs.children``) go with it, all or none;
a child is not deleted while a run above it is being written, and a tree is
as old as its newest run. Durations are written ``30d``, ``12h``, ``90m``, ``45s`` or ``2w``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from ...errors import RunLockedError, RunNotFoundError, SettingError
from ..history import History
from ..holders import describe_holder, stop_advice
from ..runs import list_runs
from ..status import Status
from ..steps import RunStatus
from ..stores import Store, StoreSpec, check_run_id, opened
from .children import children_of, descendants, parents

__all__ = ["PruneReport", "delete_run", "parse_duration", "prune_runs"]

_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 7 * 86400.0}
_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*", re.IGNORECASE)


def parse_duration(text: str) -> float:
    """Seconds in a duration such as ``30d``, ``12h``, ``90m``, ``45s`` or ``2w``; ValueError if not one."""
    match = _DURATION.fullmatch(text)
    unsigned = text.strip().removeprefix("-")
    if not match and unsigned != text.strip() and _DURATION.fullmatch(unsigned):
        raise ValueError(f"{text!r} is a negative age: an age counts back from now, so write it without the sign ({unsigned})")
    if not match:
        raise ValueError(
            f"{text!r} is not a duration: write a number and a unit, s, m, h, d or w "
            "(for example 30d for thirty days, 12h, 90m)"
        )
    return float(match.group(1)) * _UNITS[match.group(2).lower()]


def _refused(run_id: str, error: RunLockedError) -> RunLockedError:
    return RunLockedError(
        f"run {run_id!r} was not deleted: it is being written by {describe_holder(error.holder)}. "
        f"A run is deleted only while nobody writes it: wait for that run to end, or "
        f"{stop_advice(run_id, error.holder)}, then delete it again.",
        run_id=run_id,
        holder=error.holder,
    )


def _ancestors(store: Store, run_id: str, among: list[str]) -> list[str]:
    """The runs above ``run_id`` in its tree that are still there (in ``among``, the store's
    run ids), nearest first: placed by the index (``parents``), their logs left unread."""
    out: list[str] = []
    above = parents(store, [run_id])[run_id]
    while above is not None and above not in out and above in among:
        out.append(above)
        above = parents(store, [above])[above]
    return out


Keep = Callable[[History, list[History]], bool]
"""Whether to keep a run after all, from its log and its descendants' read under their leases."""


def _delete(store: Store, run_id: str, keep: Keep | None = None) -> bool:
    """Delete a run under its lease; with ``keep``, only if ``keep(history, [])`` is false then."""
    store.load(check_run_id(run_id))  # RunNotFoundError, naming the runs that exist
    try:
        writer = store.open_writer(run_id)
    except RunLockedError as e:
        raise _refused(run_id, e) from None
    try:
        if keep is not None:
            history = History.load(run_id, writer.load(), salvage=True)
            if keep(history, []):
                writer.close()  # kept: its lease is free again at once, for whoever resumed it
                return False
    except BaseException:
        writer.close()
        raise
    writer.delete()
    return True


def _delete_tree(
    store: Store, run_id: str, among: list[str], keep: Keep | None = None, *, below: list[str] | None = None
) -> bool:
    """Delete a run and its child runs (``core.whole_runs.children``), all under their leases, or none:
    refused while any of them is being written, or any run above it (a live parent replays or
    resumes its children: it needs them), whose leases are held meanwhile but left as they are.
    Children go first, deepest first, so a crash halfway leaves a parent that says its child is
    gone, never a child a new parent adopts. ``below``: the runs below it, if already found."""
    below = descendants(store, run_id, among) if below is None else below
    above = _ancestors(store, run_id, among)
    if not below and not above:
        return _delete(store, run_id, keep)
    store.load(check_run_id(run_id))
    held = []
    writers = []
    try:
        for each in above:
            try:
                held.append(store.open_writer(each))
            except RunLockedError as e:
                raise RunLockedError(
                    f"run {run_id!r} was not deleted: its parent run {each!r} is being written by "
                    f"{describe_holder(e.holder)}, and may need it. Wait for that run to end, or "
                    f"{stop_advice(each, e.holder)}, then delete it again.",
                    run_id=run_id,
                    holder=e.holder,
                ) from None
        for each in [run_id, *below]:
            try:
                writers.append(store.open_writer(each))
            except RunLockedError as e:
                raise _refused(each, e) from None
        histories = [History.load(each, w.load(), salvage=True) for each, w in zip([run_id, *below], writers, strict=True)]
        if keep is not None and keep(histories[0], histories[1:]):
            for writer in writers:
                writer.close()
            return False
    except BaseException:
        for writer in writers:
            writer.close()
        for writer in held:
            writer.close()
        raise
    try:
        for writer in reversed(writers):
            writer.delete()
    finally:
        for writer in held:
            writer.close()
    return True


def delete_run(run_id: str, root: StoreSpec = None) -> tuple[str, ...]:
    """Delete run ``run_id``, its child runs and everything they recorded; RunLockedError if
    any of them is being written. The runs deleted: ``run_id``, then every run below it."""
    with opened(root) as store:
        ids = store.run_ids()
        below = descendants(store, run_id, ids)
        _delete_tree(store, run_id, ids, below=below)
    return (run_id, *below)


@dataclass(frozen=True, slots=True)
class PruneReport:
    """What ``prune_runs`` did (or, with ``dry_run``, would do)."""

    deleted: tuple[str, ...]
    """The runs deleted (or that a dry run would delete)."""
    refused: tuple[tuple[str, str], ...]
    """(run id, who holds it) for each matching run left alone because it is being written."""
    dry_run: bool
    status: Mapping[str, RunStatus] = field(default_factory=dict)
    """The status each run in ``deleted`` had when listed: a queued run was never taken by a
    worker, work not done rather than a record of work done."""


def prune_runs(
    older_than: float | str,
    root: StoreSpec = None,
    *,
    statuses: Iterable[RunStatus] | None = None,
    dry_run: bool = False,
    now: float | None = None,
) -> PruneReport:
    """Delete the runs whose last event is older than ``older_than`` (seconds, or ``"30d"``).

    ``statuses`` keeps the prune to runs in those statuses (default: any status). Runs being
    written are never touched: they are reported in ``refused``. ``dry_run`` deletes nothing
    and reports what would go.
    """
    age = parse_duration(older_than) if isinstance(older_than, str) else float(older_than)
    if age < 0:
        raise SettingError(setting="older_than", value=older_than, reason="must not be negative")
    cutoff = (time.time() if now is None else now) - age
    wanted = None if statuses is None else frozenset(statuses)

    def matches(status: RunStatus, updated_at: float | None) -> bool:
        return (updated_at or 0.0) < cutoff and (wanted is None or status in wanted)

    def changed(history: History, below: list[History]) -> bool:
        # Seen again under the leases: a tree resumed since the listing no longer matches.
        return not matches(history.status(writer_alive=False), max(h.last_ts or 0.0 for h in [history, *below]))

    deleted: list[str] = []
    refused: list[tuple[str, str]] = []
    with opened(root) as store:
        ids = store.run_ids()
        summaries = list_runs(store)
        updated = {s.run_id: s.updated_at or 0.0 for s in summaries}
        going = {s.run_id: s for s in summaries if Status(s.status).going}
        # The whole store's tree, placed once by the index (a log read only where it cannot say).
        parent = parents(store, ids)
        children = children_of(parent)
        known = set(ids)
        for summary in summaries:
            if parent.get(summary.run_id) in known:
                continue  # a child run goes with its parent
            below = descendants(store, summary.run_id, ids, children=children)
            # A tree was last active when its newest run was: a child resumed lately keeps it.
            last = max(updated.get(r, 0.0) for r in [summary.run_id, *below])
            if Status(summary.status).going:  # its lease is held: running, or waiting for a person
                if matches(summary.status, last):
                    refused.append((summary.run_id, describe_holder(summary.holder)))
                continue
            if not matches(summary.status, last):
                continue
            if dry_run:
                # As the delete would find it: a tree with a child being written is refused whole.
                held = [going[r] for r in below if r in going]
                if held:
                    refused.append((summary.run_id, describe_holder(held[0].holder)))
                else:
                    deleted.extend([*below, summary.run_id])
                continue
            try:
                if _delete_tree(store, summary.run_id, ids, keep=changed):
                    deleted.extend([summary.run_id, *below])
            except RunLockedError as e:
                refused.append((summary.run_id, describe_holder(e.holder)))
            except RunNotFoundError:
                pass  # deleted meanwhile (another prune)
    gone = set(deleted)  # not the list: a run looked up in every run deleted, 0.9 s at 10,000 runs
    status = {s.run_id: s.status for s in summaries if s.run_id in gone}
    return PruneReport(tuple(deleted), tuple(refused), dry_run, status)
