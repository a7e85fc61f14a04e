"""Reading runs without writing them: list a store's runs, read one run's whole record.

Nothing here takes a lease, so a run can be inspected while another process writes it. A
run is "running" only while its lease is held, as the lock itself says (never a recorded pid,
which may have been reused, or may live on a host this one cannot ask); a run whose writer
died without finishing is "interrupted", or "in_doubt" if it died during an external step.
An incomplete last line of a run whose lease is held is the writer's write in progress: it is
left out without the torn-line warning a crash's leftover gets.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..errors import LogCorruptedError, NoUnfinishedRunError, RunNotFoundError
from .events import Event
from .history import History
from .lease import describe_holder
from .status import Status
from .steps import RunStatus, StepRecord
from .stores import Store, StoreSpec, check_run_id, opened

__all__ = [
    "BY_WORKER",
    "RunRecord",
    "RunSummary",
    "latest_unfinished",
    "list_runs",
    "read_run",
    "read_runs",
    "read_summary",
]


BY_WORKER = "worker "
"""How a decision's ``by`` names a worker that resumed the run: ``worker host:pid``."""


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


@dataclass(frozen=True, slots=True)
class RunRecord:
    """Everything a run's log holds: its summary, every event and every step."""

    summary: RunSummary
    events: tuple[Event, ...]
    steps: tuple[StepRecord, ...]

    @property
    def run_id(self) -> str:
        return self.summary.run_id


def _summarize(store: Store, run_id: str, history: History) -> RunSummary:
    holder = store.holder(run_id)
    finished = history.finished
    return RunSummary(
        run_id=run_id,
        status=history.status(writer_alive=holder is not None),
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
    )


def _resumed_by(history: History) -> str | None:
    workers = [d.by[len(BY_WORKER) :] for d in history.decisions() if (d.by or "").startswith(BY_WORKER)]
    return workers[-1] if workers else None


def _load(store: Store, run_id: str) -> History:
    # Asked after the bytes are read: a writer that took the lease meanwhile is writing too.
    history = History.load(
        run_id, store.load(check_run_id(run_id)), being_written=lambda: store.holder(run_id) is not None
    )
    if not history.lines:
        holder = store.holder(run_id)
        if holder is not None:  # a writer has just opened it and not yet written its first line
            raise RunNotFoundError(
                run_id=run_id,
                where=store.url,
                reason=f"has recorded nothing yet: {describe_holder(holder)} is starting it. Read it again in a moment.",
            )
        raise RunNotFoundError(
            run_id=run_id,
            where=store.url,
            reason=f"has an empty log at {store.location(run_id)}: it was created but nothing was "
            "recorded. Start it again, or delete the file.",
        )
    return history


def read_summary(run_id: str, root: StoreSpec = None) -> RunSummary:
    """A run's summary (status, counts, settings), read without its lease or its results."""
    with opened(root) as store:
        return _summarize(store, run_id, _load(store, run_id))


def _record(store: Store, run_id: str, history: History) -> RunRecord:
    return RunRecord(
        _summarize(store, run_id, history),
        tuple(history.events),
        tuple(history.record(i) for i in range(history.step_count)),
    )


def read_run(run_id: str, root: StoreSpec = None) -> RunRecord:
    """A run's whole record, read without taking its lease."""
    with opened(root) as store:
        return _record(store, run_id, _load(store, run_id))


def _histories(store: Store) -> Iterator[tuple[str, History]]:
    """Every readable run of a store; an unreadable log is warned about and passed over."""
    for run_id in store.run_ids():
        try:
            yield run_id, _load(store, run_id)
        except (LogCorruptedError, RunNotFoundError) as e:
            warnings.warn(f"skipped {store.location(run_id)}: {e}", stacklevel=3)


def list_runs(root: StoreSpec = None) -> list[RunSummary]:
    """Every run in a store, most recently updated first; unreadable logs are warned about."""
    with opened(root) as store:
        out = [_summarize(store, run_id, history) for run_id, history in _histories(store)]
    out.sort(key=lambda s: s.updated_at or 0.0, reverse=True)
    return out


def read_runs(root: StoreSpec = None) -> list[RunRecord]:
    """Every run's whole record, most recently updated first, each log read once."""
    with opened(root) as store:
        out = [_record(store, run_id, history) for run_id, history in _histories(store)]
    out.sort(key=lambda r: r.summary.updated_at or 0.0, reverse=True)
    return out


def latest_unfinished(root: StoreSpec = None) -> str:
    """The id of the most recently updated run that is interrupted, failed or in doubt."""
    with opened(root) as store:
        for summary in list_runs(store):
            if Status(summary.status).resumable:
                return summary.run_id
        raise NoUnfinishedRunError(store=store.url)
