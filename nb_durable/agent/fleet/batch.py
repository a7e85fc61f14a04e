"""Batches: submit runs for workers to take (``submit``), and gather their results (``BatchHandle``).

A submitted run is an ordinary run whose log holds only ``run_started``: the settings
``run_agent`` would record (``run.loop.recorded_settings`` makes both) plus ``queued``, ``priority`` and
``batch``; a run id that holds the same settings but for ``batch`` is the same submission. Its status is ``queued`` (derived in
``core.history``) until a worker takes it, by taking its lease as any writer does
(``agent.fleet.worker``), so two workers never start the same run. Submitting is idempotent: a run id
that already holds the same submission is left as it is; one holding anything else is refused.

A batch file (``batch_file``: JSON lines, one task a line) is queued whole or not at all: every
line is checked before any is written, and a write that fails part way deletes what the
submission wrote.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ...core.log import EventLog
from ...core.runs import RunSummary, list_runs, read_summary
from ...core.status import Status
from ...core.steps import RunStatus
from ...core.stores import Store, StoreSpec, check_run_id, opened
from ...core.whole_runs.retention import delete_run
from ...errors import (
    BatchFileError,
    InvalidRunIdError,
    NbDurableError,
    RunNotFoundError,
    SettingError,
    StoreError,
    StoreNotFoundError,
)
from ..run.loop import recorded_settings
from ..run.prepare import demo_refuses_batch_mode, prepare_run, runs_the_demo
from ..settings import AgentSettings
from ..settings.flags import seconds_problem
from ..settings.rows import sort_values
from ..tools import ToolRegistry, builtin_tools
from .batch_file import LINE_SETTINGS, BatchTask, task_run_ids
from .choosing import writer_died

__all__ = ["BatchHandle", "RunResult", "batch_handle", "submit", "submit_batch"]


@dataclass(frozen=True, slots=True)
class RunResult:
    """How one run of a batch ended: its status, the agent's last text, and its error if any."""

    run_id: str
    status: RunStatus
    text: str
    error: str | None


def _same(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two submissions are the same run's: equal settings but for the batch that queued them."""

    def canonical(settings: Mapping[str, Any]) -> Any:
        return json.loads(json.dumps({k: v for k, v in settings.items() if k != "batch"}, sort_keys=True))

    return bool(canonical(a) == canonical(b))


@dataclass(frozen=True, slots=True)
class _Planned:
    run_id: str
    settings: dict[str, Any]
    """What its ``run_started`` records."""


def _plan(task: str, *, run_id: str | None, demo: bool, environ: Mapping[str, str] | None, values: Mapping[str, Any]) -> _Planned:
    """A task's run id and recorded settings, checked; nothing is written."""
    [given] = sort_values("submit", values, AgentSettings)
    workspace = given.get("workspace")
    if workspace is not None and not os.path.isdir(workspace):
        raise ValueError(f"the workspace {workspace} is not a folder: create it, or leave the workspace out")
    prepared = prepare_run(task, run_id=run_id, values={**given, "demo": demo}, environ=environ)
    chosen = prepared.settings.but(queued=True)
    wanted = recorded_settings(chosen, prepared.client, ToolRegistry(builtin_tools())).to_json()
    return _Planned(check_run_id(prepared.run_id), wanted)


def _queued_before(planned: _Planned, runs: Store) -> RunSummary | None:
    """The run already holding this submission, None if there is none; refused if it holds another."""
    try:
        before = read_summary(planned.run_id, runs)
    except RunNotFoundError:
        return None
    if not _same(before.settings, planned.settings):
        raise InvalidRunIdError(
            f"run {planned.run_id!r} already exists in {runs.location(planned.run_id)} ({before.status}) with "
            "other settings, so it cannot be queued: give the task another run id, or delete that run",
            run_id=planned.run_id,
        )
    return before


def _start(planned: _Planned, runs: Store) -> None:
    """Record a planned run's ``run_started`` (another process may have recorded the same one first)."""
    with EventLog(planned.run_id, runs) as log:
        recorded = log.start_run(planned.settings)
    if not _same(recorded, planned.settings):
        raise InvalidRunIdError(
            f"run {planned.run_id!r} was started by another process with other settings while it was being queued",
            run_id=planned.run_id,
        )


def submit(
    task: str,
    *,
    store: StoreSpec = None,
    run_id: str | None = None,
    demo: bool = False,
    environ: Mapping[str, str] | None = None,
    **values: Any,
) -> str:
    """Queue ``task`` as a run for a worker (``nb-durable worker``) to take; return its run id.

    ``values`` are the run's recorded settings by name (``priority=``, ``batch=``, ``model=``,
    ``workspace=``, ``tags=``, ``max_turns=``, ...). The model, workspace and run id are chosen
    as ``nb-durable run`` chooses them (the demo model without credentials). Workers take the
    highest ``priority`` first, then the oldest.
    """
    planned = _plan(task, run_id=run_id, demo=demo, environ=environ, values=values)
    with opened(store) as runs:
        if _queued_before(planned, runs) is None:
            _start(planned, runs)
    return planned.run_id


def submit_batch(
    tasks: Iterable[BatchTask],
    *,
    store: StoreSpec = None,
    batch: str | None = None,
    source: str = "the batch",
    demo: bool = False,
    environ: Mapping[str, str] | None = None,
    bad_lines: Sequence[tuple[int, str]] = (),
    **defaults: Any,
) -> BatchHandle:
    """Queue every task, or none (``defaults``: ``submit``'s keywords for tasks that leave them out).

    Every task is checked first (its settings, workspace and run id, and that no run holds
    another task under that id); one ``BatchFileError`` names every bad one's line in
    ``source``, with ``bad_lines`` (lines of ``source`` already found not to be tasks:
    ``scan_batch``'s problems), and nothing is queued. A task already queued (by an earlier
    submission of the same line) is not added again: ``already`` lists it on the handle. If
    writing fails part way, the runs this call wrote are deleted again before the error is raised.
    """
    chosen = batch or f"batch-{time.strftime('%Y%m%d-%H%M%S')}"
    tasks = list(tasks)
    if wrong := next(((n, t) for n, t in enumerate(tasks, 1) if not isinstance(t, BatchTask)), None):  # else an AttributeError
        raise TypeError(f"submit_batch takes BatchTask values, not {type(wrong[1]).__name__} (task {wrong[0]} of {source}): "
                        "BatchTask('Fix the tests', priority=5, settings={'workspace': 'project'}), or the first value "
                        "of read_batch('tasks.jsonl') for a batch file; nothing was queued")
    if defaults.get("batch_api") and runs_the_demo(demo=demo, environ=environ):
        raise demo_refuses_batch_mode(asked=demo)  # the batch's own setting: no line is at fault
    # run --batch --priority N: lines that give none. Checked as submit() checks it: int() took
    # 1.5 for 1 and "7" for 7 without a word, and said "invalid literal for int()" of "high".
    priority = LINE_SETTINGS["priority"].check(defaults["priority"]) if "priority" in defaults else 0
    plans: list[_Planned] = []
    first_line: dict[str, int] = {}
    problems = list(bad_lines)
    with contextlib.ExitStack() as held:
        runs: Store | None
        try:
            runs = held.enter_context(opened(store, existing=True))
        except StoreNotFoundError:  # nothing queued there yet; made once every line is good, not by a refused file
            runs = None
        before: dict[str, RunSummary] = {}
        for n, (t, run_id) in enumerate(zip(tasks, task_run_ids(tasks), strict=True), 1):
            line = t.line or n
            try:
                if run_id in first_line:
                    raise ValueError(f"its run id {run_id!r} is also line {first_line[run_id]}'s: give each line its own \"run\"")
                first_line[run_id] = line
                planned = _plan(
                    t.task, run_id=run_id, demo=demo, environ=environ,
                    values={**defaults, **t.settings, "priority": priority if t.priority is None else t.priority, "batch": chosen},
                )
                found = None if runs is None else _queued_before(planned, runs)
            except (ValueError, NbDurableError) as e:
                problems.append((line, str(e).rstrip(".")))
                continue
            plans.append(planned)
            if found is not None:
                before[planned.run_id] = found
        if problems:
            raise BatchFileError(path=source, problems=problems)
        if runs is None:
            runs = held.enter_context(opened(store))
        written: list[str] = []
        try:
            for planned in plans:
                if planned.run_id not in before:
                    _start(planned, runs)
                    written.append(planned.run_id)
        except BaseException as e:
            left = _undo(written, runs)
            if left:
                raise StoreError(
                    f"queueing {source} failed part way ({e}); the runs it wrote were deleted again but for "
                    f"{', '.join(left)}, which a worker took in the meantime"
                ) from e
            raise
    return BatchHandle(tuple(p.run_id for p in plans), store, chosen, tuple(before))


def _undo(written: list[str], runs: Store) -> list[str]:
    """Delete the runs a failed submission wrote, so that it queued nothing; return those it could not."""
    left = []
    for run_id in written:
        try:
            delete_run(run_id, runs)
        except Exception:  # a worker took it in the moment between (or the store is gone): named
            left.append(run_id)
    return left


BATCHES_LOOKED_AT = 1000
"""How many of the latest runs an unknown batch's error looks through to name the batches there are."""


def batch_handle(batch: str, store: StoreSpec = None) -> BatchHandle:
    """The runs a store holds of batch ``batch``, oldest first."""
    with opened(store) as runs:
        found = sorted(list_runs(runs, batch=batch), key=lambda s: s.started_at or 0.0)
        if not found:
            refuse_unknown_batch(batch, runs)
    return BatchHandle(tuple(s.run_id for s in found), store, batch)


def refuse_unknown_batch(batch: str, runs: Store) -> None:
    """Raise ``RunNotFoundError`` naming the store's latest batches when no run of ``runs`` was
    submitted in batch ``batch``: a mistyped id, which a listing would call filters matching nothing."""
    if list_runs(runs, batch=batch, limit=1):
        return
    recent = dict.fromkeys(b for s in list_runs(runs, limit=BATCHES_LOOKED_AT) if (b := s.settings.get("batch")))
    listed = ", ".join(repr(b) for b in list(recent)[:5]) + (", ..." if len(recent) > 5 else "")
    hint = f"Its latest batches: {listed}." if recent else "No run there was submitted in a batch."
    raise RunNotFoundError(run_id=batch, where=runs.url, what="batch", reason=f"is not in {runs.url}: no run was submitted with it. {hint}")


def _result(summary: RunSummary) -> RunResult:
    """What an ended run said, from its summary."""
    text = str((summary.output or {}).get("text", "")) if isinstance(summary.output, dict) else ""
    return RunResult(summary.run_id, summary.status, text, summary.error)


def settled(summary: RunSummary) -> bool:
    """Whether a run is done with workers: neither queued, nor going on (running, or waiting for a
    person's answer), nor waiting to be resumed."""
    return summary.status != "queued" and not Status(summary.status).going and not writer_died(summary)


@dataclass(frozen=True)
class BatchHandle:
    """Submitted runs, to follow: ``statuses`` now, ``wait()`` until they end, ``results``."""

    run_ids: tuple[str, ...]
    store: StoreSpec = None
    batch: str | None = None
    already: tuple[str, ...] = ()
    """The runs a submission found queued before (the same lines, submitted earlier) and did not add."""

    def __post_init__(self) -> None:
        # Each run once: one named twice (nb-durable wait R R) was waited for until a second
        # result came, never, and the timeout said "0 run(s) not finished".
        object.__setattr__(self, "run_ids", tuple(dict.fromkeys(self.run_ids)))

    def summaries(self, *, deleted_ok: bool = False) -> dict[str, RunSummary]:
        """Each run's summary as the store holds it now; a run not there is a ``RunNotFoundError``,
        or, with ``deleted_ok``, left out."""
        with opened(self.store) as runs:
            found = {s.run_id: s for s in list_runs(runs, run_ids=self.run_ids)}  # the run index, not the logs
            for r in (r for r in self.run_ids if r not in found):
                try:
                    found[r] = read_summary(r, runs)
                except RunNotFoundError:
                    if not deleted_ok:
                        raise
            return {r: found[r] for r in self.run_ids if r in found}

    @property
    def deleted(self) -> tuple[str, ...]:
        """The runs no longer in the store: deleted while waited for (``nb-durable prune``, a log removed)."""
        there = self.summaries(deleted_ok=True)
        return tuple(r for r in self.run_ids if r not in there)

    @property
    def statuses(self) -> dict[str, RunStatus]:
        """Each run's status now: queued, running, waiting (for a person's answer), completed, ..."""
        return {r: s.status for r, s in self.summaries().items()}

    @property
    def results(self) -> dict[str, RunResult]:
        """The runs that have ended (and will not be resumed by a worker), with what they said."""
        return {run_id: _result(s) for run_id, s in self.summaries(deleted_ok=True).items() if settled(s)}

    def wait(
        self, timeout: float | None = None, poll: float = 0.2, *, on_settled: Callable[[str, RunResult | None], None] | None = None
    ) -> bool:
        """Wait until every run has ended or was deleted meanwhile (True: ``deleted`` names those), or
        ``timeout`` seconds pass (False; None: never); workers run them. ``poll``: seconds between
        looks. A bad one is a ``SettingError``; a run not there as the wait begins, a ``RunNotFoundError``.
        ``on_settled(run_id, result)`` is called once for each run as the wait sees it end (in the
        order of ``run_ids`` within one look), with None for a run deleted before it ended."""
        # Refused as the CLI's --timeout and --poll are: a poll of 0 looked at the store without
        # a pause, a busy loop, and a NaN timeout never passed.
        for name, value, zero in (("timeout", timeout, True), ("poll", poll, False)):
            why = "" if value is None and zero else seconds_problem(value, zero=zero)
            if why:
                runs = f"batch {self.batch}" if self.batch else f"run {', '.join(self.run_ids[:3])}{', ...' if len(self.run_ids) > 3 else ''}"
                raise SettingError(setting=name, spelled=f"wait's {name}", value=value, reason=f"{why} (seconds{', None waits for ever' if zero else ''}; waiting for {runs})")
        deadline = None if timeout is None else time.monotonic() + timeout
        with opened(self.store) as store:  # once for every look: a store named by URL is a new connection each time
            looking = replace(self, store=store)
            looking.summaries()  # a run not there now is a mistaken id; one deleted from now on ends its wait
            told: set[str] = set()
            while True:
                now = looking.summaries(deleted_ok=True)
                for run_id in (r for r in self.run_ids if r not in told and (r not in now or settled(now[r]))):
                    told.add(run_id)
                    if on_settled is not None:
                        on_settled(run_id, _result(now[run_id]) if run_id in now else None)
                if len(told) == len(self.run_ids):
                    break
                left = math.inf if deadline is None else deadline - time.monotonic()
                if left <= 0:
                    return False
                # Never past the deadline (a poll of an hour made a timeout of a second wait the
                # hour), nor past what time.sleep takes (a poll of inf was an OverflowError).
                time.sleep(min(poll, left, threading.TIMEOUT_MAX))
        return True
