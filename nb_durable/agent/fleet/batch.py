"""Batches: submit runs for workers to take (``submit``), and gather their results (``BatchHandle``).

A submitted run is an ordinary run whose log holds only ``run_started``: the settings
``run_agent`` would record (``run.loop.recorded_settings`` makes both) plus ``queued``, ``priority`` and
``batch``, none of them part of its identity. Its status is ``queued`` (derived in
``core.history``) until a worker takes it, by taking its lease as any writer does
(``agent.fleet.worker``), so two workers never start the same run. Submitting is idempotent: a run id
that already holds the same submission is left as it is; one holding anything else is refused.

A batch file is JSON lines, one task a line: ``{"task": ..., "run": ..., "priority": ...,
"model": ..., "workspace": ..., "tags": [...]}`` (only ``task`` is required; a line may give
any setting a flag gives, by its name: ``LINE_SETTINGS``, checked as the settings table says). Unless given, the
batch id is derived from the file's bytes and each run's id from the batch id and its line, so
submitting the same file twice queues nothing twice. Every line is checked before any is queued.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...core.log import EventLog
from ...core.runs import RunSummary, list_runs, read_summary
from ...core.steps import RunStatus
from ...core.stores import StoreSpec, opened
from ...errors import BatchFileError, InvalidRunIdError, RunNotFoundError, SettingError
from ..run.loop import recorded_settings
from ..run.prepare import prepare_run
from ..settings import AgentSettings, Setting, rows_of
from ..settings.rows import sort_values
from ..tools import ToolRegistry, builtin_tools
from .worker import writer_died

__all__ = ["BatchHandle", "BatchTask", "RunResult", "batch_handle", "batch_id_of", "read_batch", "submit", "submit_batch"]

LINE_SETTINGS: Mapping[str, Setting] = {
    row.name: row for row in rows_of(AgentSettings) if row.flag or row.name == "priority"
}
"""The settings a line of a batch file may give its run by name: every recorded setting a
flag gives, and ``priority`` (a queued run's, which no flag sets)."""

_JSON = {"whole": (int,), "number": (int, float), "text": (str,), "choice": (str,), "words": (list,), "switch": (bool,)}
_JSON_SAID = {"whole": "number", "number": "number", "text": "string", "choice": "string", "words": "list", "switch": "boolean"}


@dataclass(frozen=True, slots=True)
class BatchTask:
    """One task of a batch: what to do, its run id and priority, and its other settings by name."""

    task: str
    run_id: str | None = None
    priority: int | None = None
    """Its line's priority; None: the batch's (``run --batch --priority N``, else 0)."""
    settings: Mapping[str, Any] = field(default_factory=dict)
    """Settings this task gives its run (``model``, ``workspace``, ``tags``, ...), over the batch's."""
    line: int = 0
    """The line of the batch file it came from (1-based; 0 when not from a file)."""


@dataclass(frozen=True, slots=True)
class RunResult:
    """How one run of a batch ended: its status, the agent's last text, and its error if any."""

    run_id: str
    status: RunStatus
    text: str
    error: str | None


def _task_of(data: Any, line: int, where: str) -> BatchTask:
    def bad(reason: str) -> BatchFileError:
        return BatchFileError(path=where, line=line, reason=reason)

    if not isinstance(data, dict):
        raise bad(f"a line must be a JSON object such as {{\"task\": \"...\"}}, not {type(data).__name__}")
    keys = ("task", "run", *LINE_SETTINGS)
    unknown = sorted(set(data) - set(keys))
    if unknown:
        raise bad(f"unknown key(s) {', '.join(map(repr, unknown))}; a line may hold {', '.join(keys)}")
    task, run_id = data.get("task"), data.get("run")
    if not isinstance(task, str) or not task.strip():
        raise bad("'task' is missing or empty: say what the agent should do")
    if run_id is not None and not isinstance(run_id, str):
        raise bad(f"'run' must be a JSON string, not {run_id!r}")
    settings = {}
    for key, value in data.items():
        row = LINE_SETTINGS.get(key)
        if row is None or value is None:
            continue
        if not isinstance(value, _JSON.get(row.kind, (object,))) or (isinstance(value, bool) and row.kind != "switch"):
            raise bad(f"{key!r} must be a JSON {_JSON_SAID.get(row.kind, 'value')}, not {value!r}")
        try:
            settings[key] = row.check(row.coerce(value), spelled=repr(key))
        except SettingError as e:
            raise bad(str(e)) from None
    priority = settings.pop("priority", None)
    return BatchTask(task, run_id, priority, settings, line)


def read_batch(path: str | os.PathLike[str]) -> tuple[list[BatchTask], str]:
    """The tasks of a batch file and the batch id derived from its bytes; ``BatchFileError`` names a bad line."""
    raw = Path(path).read_bytes()
    tasks: list[BatchTask] = []
    for number, text in enumerate(raw.decode("utf-8", errors="replace").splitlines(), 1):
        if not text.strip():
            continue
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise BatchFileError(path=str(path), line=number, reason=f"not JSON ({e.msg} at column {e.colno})") from None
        tasks.append(_task_of(data, number, str(path)))
    if not tasks:
        raise BatchFileError(path=str(path), line=1, reason="the file holds no task (one JSON object a line)")
    return tasks, batch_id_of(raw)


def batch_id_of(content: bytes) -> str:
    """The batch id of a batch file's bytes: the same file always names the same batch."""
    return f"batch-{hashlib.sha256(content).hexdigest()[:10]}"


def _same(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return bool(json.loads(json.dumps(a, sort_keys=True)) == json.loads(json.dumps(b, sort_keys=True)))


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
    if not task.strip():
        raise ValueError("the task is empty: give the agent something to do")
    [given] = sort_values("submit", values, AgentSettings)
    workspace = given.get("workspace")
    if workspace is not None and not os.path.isdir(workspace):
        raise ValueError(f"the workspace {workspace} is not a folder: create it, or leave the workspace out")
    prepared = prepare_run(task, run_id=run_id, values={**given, "demo": demo}, environ=environ)
    chosen = prepared.settings.but(queued=True)
    wanted = recorded_settings(chosen, prepared.client, ToolRegistry(builtin_tools())).to_json()
    with opened(store) as runs:
        before: RunSummary | None = None
        try:
            before = read_summary(prepared.run_id, runs)
        except RunNotFoundError:
            with EventLog(prepared.run_id, runs) as log:
                recorded = log.start_run(wanted)
        else:
            recorded = before.settings
        if not _same(recorded, wanted):
            status = before.status if before is not None else "started by another process"
            raise InvalidRunIdError(
                f"run {prepared.run_id!r} already exists in {runs.location(prepared.run_id)} ({status}) with "
                "other settings, so it cannot be queued: give the task another run id, or delete that run",
                run_id=prepared.run_id,
            )
    return prepared.run_id


def submit_batch(
    tasks: Iterable[BatchTask], *, store: StoreSpec = None, batch: str | None = None, **defaults: Any
) -> BatchHandle:
    """Queue every task (``defaults``: ``submit``'s keywords for tasks that leave them out)."""
    chosen = batch or f"batch-{time.strftime('%Y%m%d-%H%M%S')}"
    priority = int(defaults.pop("priority", None) or 0)
    run_ids = []
    for n, t in enumerate(tasks, 1):
        run_ids.append(
            submit(
                t.task,
                store=store,
                run_id=t.run_id or f"{chosen}-{t.line or n:03d}",
                priority=priority if t.priority is None else t.priority,
                batch=chosen,
                **{**defaults, **t.settings},
            )
        )
    return BatchHandle(tuple(run_ids), store, chosen)


def batch_handle(batch: str, store: StoreSpec = None) -> BatchHandle:
    """The runs a store holds of batch ``batch``, oldest first."""
    with opened(store) as runs:
        found = sorted(list_runs(runs, batch=batch), key=lambda s: s.started_at or 0.0)
        if not found:
            raise RunNotFoundError(
                run_id=batch, where=runs.url, reason=f"names no batch in {runs.url}: no run was submitted with it"
            )
    return BatchHandle(tuple(s.run_id for s in found), store, batch)


def settled(summary: RunSummary) -> bool:
    """Whether a run is done with workers: neither queued, nor running, nor waiting to be resumed."""
    return summary.status not in ("queued", "running") and not writer_died(summary)


@dataclass(frozen=True)
class BatchHandle:
    """Submitted runs, to follow: ``statuses`` now, ``wait()`` until they end, ``results``."""

    run_ids: tuple[str, ...]
    store: StoreSpec = None
    batch: str | None = None

    def summaries(self) -> dict[str, RunSummary]:
        """Each run's summary as the store holds it now."""
        with opened(self.store) as runs:
            found = {s.run_id: s for s in list_runs(runs, run_ids=self.run_ids)}  # the run index, not the logs
            return {r: found[r] if r in found else read_summary(r, runs) for r in self.run_ids}

    @property
    def statuses(self) -> dict[str, RunStatus]:
        """Each run's status now: queued, running, completed, ..."""
        return {r: s.status for r, s in self.summaries().items()}

    @property
    def results(self) -> dict[str, RunResult]:
        """The runs that have ended (and will not be resumed by a worker), with what they said."""
        out = {}
        for run_id, s in self.summaries().items():
            if settled(s):
                text = str((s.output or {}).get("text", "")) if isinstance(s.output, dict) else ""
                out[run_id] = RunResult(run_id, s.status, text, s.error)
        return out

    def wait(self, timeout: float | None = None, poll: float = 0.2) -> bool:
        """Wait until every run has ended (True) or ``timeout`` seconds pass (False); workers run them."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while len(self.results) < len(self.run_ids):
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(poll)
        return True
