"""Reading runs without writing them: list a store's runs, read one run's whole record.

Nothing here takes a lease, so a run can be inspected while another process writes it. A
run is "running" only while its lease is held, as the lock itself says (never a recorded pid,
which may have been reused, or may live on a host this one cannot ask), and "waiting" instead
while the holder has marked its lease with a question it asks a person (``core.holders``); a run
whose writer died without finishing is "interrupted", or "in_doubt" if it died during an
external step, whatever its dead writer was asking.
An incomplete last line of a run whose lease is held is the writer's write in progress: it is
left out without the torn-line warning a crash's leftover gets.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import LogCorruptedError, NoUnfinishedRunError, RunNotFoundError, StoreNotFoundError
from .events import Event
from .history import History
from .holders import Asking, Awaiting, asking_of, awaiting_of, describe_holder, stop_advice
from .index.check import row_now
from .index.cursor import Cursor, listing_key
from .index.listing import joined_status, newest_first
from .index.rows import (
    BY_WORKER,
    IndexRow,
    RunFilter,
    child_parent,
    claim_order,
    index_of,
    names,
    pending_of,
    priority_of,
)
from .index.rows import parent_of as row_parent
from .status import Status
from .steps import RunStatus, StepRecord
from .stores import Store, StoreSpec, check_run_id, named_store, opened, opened_to_read, shown_store

__all__ = [
    "BY_WORKER",
    "RunRecord",
    "RunSummary",
    "going_status",
    "indexed_summary",
    "live_status",
    "latest_unfinished",
    "RUNS_PAGE",
    "list_runs",
    "list_runs_from_logs",
    "status_with",
    "summary_of_row",
    "read_run",
    "read_runs",
    "read_summary",
]



@dataclass(frozen=True, slots=True)
class RunSummary:
    """One line about a run: its status, size and times."""

    run_id: str
    status: RunStatus
    steps: int
    completed_steps: int
    started_at: float | None
    updated_at: float | None
    settings: dict[str, Any]
    output: Any
    error: str | None
    location: str
    holder: dict[str, Any] | None
    resumed_by: str | None = None
    """The worker (``host:pid``) that last resumed the run, from its recorded decisions."""
    parent: str | None = None
    """The run this one came from: the run it is a child of, or the one it was forked from (``IndexRow.parent``)."""
    child_of: str | None = None
    """The run this one is a child of (``core.index.rows.child_parent``): listed and billed under it.
    A fork names the run it was forked from as ``parent``, and is no child of it."""
    figures: Mapping[str, float] = field(default_factory=dict)
    """What the run's steps add up to (``tokens``, ``dollars``, ...: ``core.index.figures.Figures``)."""
    priority: int = 0
    """Where a worker takes it among the runs it may take: the highest first (``IndexRow.priority``)."""
    pending: bool = False
    """Whether a worker may take it once nobody holds its lease (``IndexRow.pending``)."""
    open_decision: str | None = None
    """The latest decision of the step its log leaves without a result (``IndexRow.open_decision``)."""
    unfinished_starts: int = 0
    """The step starts its log ends with, nothing recorded after them (``IndexRow.unfinished_starts``)."""
    store_key: str = field(default="", repr=False)
    """The ``Store.key`` of the store it was read from: its ``cursor`` pages on that store's listing only."""

    @property
    def cursor(self) -> str:
        """The cursor of the runs listed after this one: ``list_runs(after=page[-1].cursor)`` lists the next page."""
        return Cursor.at(self.updated_at, self.run_id, self.store_key or None).token

    @property
    def waits_for_worker(self) -> bool:
        """Whether a worker may take it now (pending, its lease free): where its priority matters."""
        return self.pending and not Status(self.status).going

    @property
    def claim_key(self) -> tuple[int, float]:
        """Where a worker takes it among the runs waiting for one (``rows.claim_order``: a run's
        place in line is its first event, its start time)."""
        return claim_order(self.priority, self.started_at)

    @property
    def asking(self) -> Asking | None:
        """What the run waits on while it is ``waiting``: the question its writer asks a person."""
        return asking_of(self.holder) if self.status == "waiting" else None

    @property
    def awaiting(self) -> Awaiting | None:
        """What the run waits on outside it while it is ``running`` (a Message Batch), if its writer said."""
        return awaiting_of(self.holder) if self.status == "running" else None


@dataclass(frozen=True, slots=True)
class RunRecord:
    """Everything a run's log holds: its summary, every event and every step."""

    summary: RunSummary
    events: tuple[Event, ...]
    steps: tuple[StepRecord, ...]

    @property
    def run_id(self) -> str:
        return self.summary.run_id


def _summarize(store: Store, run_id: str, history: History, holder: dict[str, Any] | None) -> RunSummary:
    finished = history.finished
    return RunSummary(
        run_id=run_id,
        status=live_status(history.status(writer_alive=holder is not None), finished is not None, holder),
        steps=history.step_count,
        completed_steps=history.completed_count(),
        started_at=history.first_ts,
        updated_at=history.last_ts,
        settings=history.settings,
        output=finished.output if finished else None,
        error=finished.error if finished else None,
        location=store.location(run_id),
        holder=holder,
        resumed_by=_resumed_by(history),
        parent=row_parent(history),
        child_of=child_parent(history),
        priority=priority_of(history.settings),
        pending=pending_of(history.status(writer_alive=False), finished is not None, finished.error if finished else None, history.settings),
        open_decision=history.open_decision(),
        unfinished_starts=history.starts_since_result()[0],
        store_key=store.key,
    )


def _resumed_by(history: History) -> str | None:
    workers = [d.by[len(BY_WORKER) :] for d in history.decisions() if (d.by or "").startswith(BY_WORKER)]
    return workers[-1] if workers else None


def _load(store: Store, run_id: str) -> tuple[History, dict[str, Any] | None]:
    """A run's log and its lease's holder, looked at before the log is read.

    A writer records its end before it lets its lease go, so a lease seen free before the read
    leaves no writer that can still end the run unread: an unfinished log read after it is
    truly unfinished. Looked at after the read (or once more for the summary), a writer that
    ended and released in between would show its run in doubt with no error, a moment before
    it says who stopped it: a state that never was. ``list_runs`` joins ``held()`` in the same order.
    """
    holder = store.holder(check_run_id(run_id))
    # Asked after the bytes are read: a writer that took the lease meanwhile is writing too.
    history = History.load(run_id, store.load(run_id), being_written=lambda: store.holder(run_id) is not None)
    if not history.lines:
        starting = store.holder(run_id)
        if starting is not None:  # a writer has just opened it and not yet written its first line
            raise RunNotFoundError(
                run_id=run_id,
                where=store.url,
                reason=f"has recorded nothing yet: {describe_holder(starting)} is starting it. Read it again in a moment.",
            )
        raise RunNotFoundError(
            run_id=run_id,
            where=store.url,
            # delete_run(...) is said in each front end's words (nb-durable delete).
            reason=f"has an empty log at {store.location(run_id)}: it was created but nothing was "
            f"recorded. Start it again, or delete it: delete_run({run_id!r}, {store.url!r}).",
        )
    return history, holder


def read_summary(run_id: str, root: StoreSpec = None) -> RunSummary:
    """A run's summary (status, counts, settings), read without its lease or its results."""
    with _holding(run_id, root) as store:
        return _summarize(store, run_id, *_load(store, run_id))


def indexed_summary(run_id: str, root: StoreSpec = None) -> RunSummary:
    """``read_summary``'s answer, from the run's index row where the rule in use made it (no log
    read: a row describes its whole log), else from its log."""
    with _holding(run_id, root) as store:
        indexed = index_of(store)
        if indexed is None:
            return read_summary(run_id, store)
        holder = store.holder(check_run_id(run_id))  # before the row, as ``_load`` looks before the log
        rows = [row for row in indexed.index_rows([run_id]) if row.current]
        return summary_of_row(store, rows[0], holder) if rows else read_summary(run_id, store)


def _record(store: Store, run_id: str, history: History, holder: dict[str, Any] | None) -> RunRecord:
    return RunRecord(
        _summarize(store, run_id, history, holder),
        tuple(history.events),
        tuple(history.record(i) for i in range(history.step_count)),
    )


def read_run(run_id: str, root: StoreSpec = None) -> RunRecord:
    """A run's whole record, read without taking its lease."""
    with _holding(run_id, root) as store:
        return _record(store, run_id, *_load(store, run_id))


def _histories(store: Store) -> Iterator[tuple[str, History, dict[str, Any] | None]]:
    """Every readable run of a store with its lease's holder; an unreadable log is warned about and passed over."""
    for run_id in store.run_ids():
        try:
            yield run_id, *_load(store, run_id)
        except (LogCorruptedError, RunNotFoundError) as e:
            warnings.warn(f"skipped {store.location(run_id)}: {e}", stacklevel=3)


RUNS_PAGE = 100
"""How many runs a listing (``nb-durable runs``, ``%agent_runs``) shows unless told otherwise."""


def going_status(holder: dict[str, Any] | None) -> RunStatus:
    """What a run whose lease ``holder`` holds is doing: waiting if the holder marked a question
    it asks a person (``core.holders``), else running."""
    return "waiting" if asking_of(holder) is not None else "running"


def live_status(status: RunStatus, ended: bool, holder: dict[str, Any] | None) -> RunStatus:
    """A run's recorded ``status`` with its lease's ``holder`` joined in (``joined_status``)."""
    return joined_status(status, ended, None if holder is None else going_status(holder))


def status_with(row: IndexRow, holder: dict[str, Any] | None) -> RunStatus:
    """A row's status with its lease joined in (``live_status``)."""
    return live_status(row.status, row.ended, holder)


def summary_of_row(store: Store, row: IndexRow, holder: dict[str, Any] | None) -> RunSummary:
    """The summary an index row gives (``holder``: its lease's, from ``held()``)."""
    return RunSummary(
        run_id=row.run_id,
        status=status_with(row, holder),
        steps=row.steps,
        completed_steps=row.completed_steps,
        started_at=row.started_at,
        updated_at=row.updated_at,
        settings=dict(row.settings),
        output=row.output,
        error=row.error,
        location=store.location(row.run_id),
        holder=holder,
        resumed_by=row.resumed_by,
        parent=row.parent,
        child_of=row.child_of,
        figures=row.figures,
        priority=row.priority,
        pending=row.pending,
        open_decision=row.open_decision,
        unfinished_starts=row.unfinished_starts,
        store_key=store.key,
    )


@contextlib.contextmanager
def _holding(run_id: str, root: StoreSpec) -> Iterator[Store]:
    """The store ``root`` names, opened to read run ``run_id``; one not there holds no run (it is
    not made): ``RunNotFoundError``, saying why, as ``read_run``'s callers catch for a run to start."""
    with contextlib.ExitStack() as held:
        try:
            store = held.enter_context(opened(root, existing=True))
        except StoreNotFoundError as e:  # a Store given is there: only a name can be missing
            raise RunNotFoundError(run_id=run_id, where=named_store(root), reason=f"is not there: {e}") from None
        yield store


def list_runs_from_logs(root: StoreSpec = None) -> list[RunSummary]:
    """Every run, read log by log (the truth the index is checked against, and the path for a
    store with no index); most recently updated first; unreadable logs are warned about."""
    with opened_to_read(root) as store:
        out = [] if store is None else [_summarize(store, run_id, history, holder) for run_id, history, holder in _histories(store)]
    out.sort(key=lambda s: listing_key(s.updated_at, s.run_id))
    return out


def list_runs(
    root: StoreSpec = None,
    *,
    status: str | Iterable[str] = (),
    tags: str | Iterable[str] = (),
    batch: str | None = None,
    parent: str | Iterable[str] | None = None,
    run_ids: str | Iterable[str] | None = None,
    limit: int | None = None,
    offset: int = 0,
    after: str | Cursor | None = None,
) -> list[RunSummary]:
    """The runs of a store, most recently updated first (ties by run id), read from the run index
    (``status``: any of those; ``tags``: all of them; ``parent``: the children of any of those
    runs, none if none is given; one name is one, not its letters; ``limit``:
    one page; ``after``: a cursor, the ``cursor`` of the last run of the page before: the runs
    after it, as ``core.index.cursor`` says while runs are written; ``offset``: the runs past the
    first so many, counted afresh, kept for older callers)."""
    cursor = Cursor.of(after)
    wanted = RunFilter(
        names(status), names(tags), batch, None if parent is None else names(parent),
        None if run_ids is None else names(run_ids), limit, offset, cursor,
    )
    with opened_to_read(root) as store:
        if store is None:
            return []
        if cursor is not None:
            cursor.belongs_to(store.key, shown_store(store.url))
        indexed = index_of(store)
        if indexed is None:
            found = [s for s in list_runs_from_logs(store) if _matches(wanted, s)]
            return found[offset:] if limit is None else found[offset : offset + limit]
        held = indexed.held()
        paged = getattr(store, "list_rows", None)
        if callable(paged):
            rows: list[IndexRow] = paged(wanted, {run_id: going_status(h) for run_id, h in held.items()})
        else:
            rows = [r for r in indexed.index_rows(wanted.run_ids) if wanted.matches(r, status_with(r, held.get(r.run_id)))]
            rows.sort(key=newest_first)
            rows = rows[offset:] if limit is None else rows[offset : offset + limit]
        return [summary_of_row(store, row_now(store, row), held.get(row.run_id)) for row in rows]


def _matches(wanted: RunFilter, summary: RunSummary) -> bool:
    tags = summary.settings.get("tags") or ()
    return (
        (not wanted.statuses or summary.status in wanted.statuses)
        and set(wanted.tags) <= set(tags if isinstance(tags, (list, tuple)) else ())
        and (wanted.batch is None or summary.settings.get("batch") == wanted.batch)
        and (wanted.parent is None or summary.parent in wanted.parent)
        and (wanted.run_ids is None or summary.run_id in wanted.run_ids)
        and (wanted.after is None or wanted.after.passed(summary.updated_at, summary.run_id))
    )


def read_runs(root: StoreSpec = None) -> list[RunRecord]:
    """Every run's whole record, most recently updated first, each log read once."""
    with opened_to_read(root) as store:
        out = [] if store is None else [_record(store, run_id, history, holder) for run_id, history, holder in _histories(store)]
    out.sort(key=lambda r: listing_key(r.summary.updated_at, r.run_id))
    return out


def latest_run(doing: str, root: StoreSpec = None) -> str:
    """The id of the most recently updated run, for a command (``doing``) that named none."""
    with opened_to_read(root) as store:
        newest = [] if store is None else list_runs(store, limit=1)
        if not newest:
            raise NoUnfinishedRunError(store=named_store(root) if store is None else store.url, doing=doing)
        return newest[0].run_id


def latest_unfinished(root: StoreSpec = None, *, agents: bool = False) -> str:
    """The id of the most recently updated run that is interrupted, failed or in doubt; with
    ``agents``, of such a run an agent can resume (a run of plain steps, written by ``EventLog``
    or ``durable_run``, records no task: only its own code can go on with it). A store that is not
    there holds none, and looking made nothing there (``open_store``'s ``existing``)."""
    with contextlib.ExitStack() as held:
        try:
            store = held.enter_context(opened(root, existing=True))
        except StoreNotFoundError as e:  # a Store given is there: only a name can be missing
            raise NoUnfinishedRunError(store=named_store(root), agents=agents, missing=str(e)) from None
        going = None
        for summary in list_runs(store):
            if agents and "task" not in summary.settings:
                continue
            if Status(summary.status).resumable:
                return summary.run_id
            if going is None and Status(summary.status).going:
                going = summary
        # A run another process writes now is unfinished too, but not to be resumed here: said
        # as such, not as 'every run has completed', which would send a person looking elsewhere.
        running = None if going is None else (going.run_id, describe_holder(going.holder), stop_advice(going.run_id, going.holder))
        raise NoUnfinishedRunError(store=store.url, agents=agents, running=running)
