"""Reading runs without writing them: list a store's runs, read one run's whole record.

Nothing here takes a lease, so a run can be inspected while another process writes it. A
run is "running" only while a live process holds its lease; a run whose writer died without
finishing is "interrupted", or "in_doubt" if it died during an external step.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from typing import Any

from ..errors import LogCorruptedError, RunNotFoundError
from .events import Event
from .history import History, RunStatus, StepRecord
from .stores import Store, check_run_id, open_store

__all__ = ["RunRecord", "RunSummary", "list_runs", "read_run", "read_summary"]


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
    )


def _load(store: Store, run_id: str) -> History:
    history = History.load(run_id, store.load(check_run_id(run_id)))
    if not history.lines:
        raise RunNotFoundError(
            f"run {run_id!r} has an empty log at {store.location(run_id)}: it was created "
            "but nothing was recorded. Start it again, or delete the file.",
            run_id=run_id,
        )
    return history


def read_summary(run_id: str, root: str | os.PathLike[str] | Store | None = None) -> RunSummary:
    """A run's summary (status, counts, settings), read without its lease or its results."""
    store = open_store(root)
    return _summarize(store, run_id, _load(store, run_id))


def read_run(run_id: str, root: str | os.PathLike[str] | Store | None = None) -> RunRecord:
    """A run's whole record, read without taking its lease."""
    store = open_store(root)
    history = _load(store, run_id)
    return RunRecord(
        _summarize(store, run_id, history),
        tuple(history.events),
        tuple(history.record(s) for s in history.steps),
    )


def list_runs(root: str | os.PathLike[str] | Store | None = None) -> list[RunSummary]:
    """Every run in a store, most recently updated first; unreadable logs are warned about."""
    store = open_store(root)
    out = []
    for run_id in store.run_ids():
        try:
            out.append(_summarize(store, run_id, _load(store, run_id)))
        except (LogCorruptedError, RunNotFoundError) as e:
            warnings.warn(f"list_runs skipped {store.location(run_id)}: {e}", stacklevel=2)
    out.sort(key=lambda s: s.updated_at or 0.0, reverse=True)
    return out
