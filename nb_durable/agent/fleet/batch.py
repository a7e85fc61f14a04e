"""Batches: submit runs for workers to take (``submit``), and gather their results (``BatchHandle``).

A submitted run is an ordinary run whose log holds only ``run_started``: the settings
``run_agent`` would record (``run.loop.recorded_settings`` makes both) plus ``queued``, ``priority`` and
``batch``; a run id that holds the same settings but for ``batch`` is the same submission. Its status is ``queued`` (derived in
``core.history``) until a worker takes it, by taking its lease as any writer does
(``agent.fleet.worker``), so two workers never start the same run. Submitting is idempotent: a run id
that already holds the same submission is left as it is; one holding anything else is refused.

A batch file is JSON lines, one task a line: ``{"task": ..., "run": ..., "priority": ...,
"model": ..., "workspace": ..., "tags": [...]}`` (only ``task`` is required; a line may give
any setting a flag gives, by its name: ``LINE_SETTINGS``, checked as the settings table says). Unless given, the
batch id is derived from the file's bytes and each run's id from what its line says (``task_run_ids``),
so submitting a file twice, or again after fixing or adding lines, queues no line twice. A file is
queued whole or not at all: every line is checked before any is written, and a write that fails
part way deletes what the submission wrote.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import os
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
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
)
from ..run.loop import recorded_settings
from ..run.prepare import demo_refuses_batch_mode, prepare_run, readable_id, runs_the_demo, task_words
from ..settings import AgentSettings, Setting, rows_of
from ..settings.rows import sort_values
from ..tools import ToolRegistry, builtin_tools
from .choosing import writer_died

__all__ = ["BatchHandle", "BatchTask", "RunResult", "batch_handle", "batch_id_of", "read_batch", "runs_of_batch_file", "submit", "submit_batch", "task_run_ids"]

LINE_SETTINGS: Mapping[str, Setting] = {
    row.name: row for row in rows_of(AgentSettings) if row.flag or row.name == "priority"
}
"""The settings a line of a batch file may give its run by name: every recorded setting a
flag gives, and ``priority`` (a queued run's, which no flag sets)."""

_JSON = {"whole": (int,), "number": (int, float), "text": (str,), "choice": (str,), "words": (list,), "switch": (bool,)}
_JSON_SAID = {"whole": "whole number", "number": "number", "text": "string", "choice": "string", "words": "list", "switch": "boolean"}


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
    try:  # JSON may escape half a character (\ud800), which no log can record: said here, not at the write
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as e:
        half = e.object[e.start : e.end]
        raise bad(f"it escapes half of a character ({half!r}, a lone surrogate), which UTF-8 cannot hold; write the whole character") from None
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
            settings[key] = row.check(value, spelled=repr(key))
        except SettingError as e:
            raise bad(str(e)) from None
    priority = settings.pop("priority", None)
    return BatchTask(task, run_id, priority, settings, line)


def read_batch(path: str | os.PathLike[str]) -> tuple[list[BatchTask], str]:
    """The tasks of a batch file and the batch id derived from its bytes; ``BatchFileError`` names a bad line."""
    try:
        raw = Path(path).read_bytes()
    except OSError as e:
        raise BatchFileError(path=str(path), line=None, reason=e.strerror or str(e)) from None
    tasks: list[BatchTask] = []
    for number, line in enumerate(raw.removeprefix(codecs.BOM_UTF8).splitlines(), 1):
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as e:  # a task is never recorded with its bytes guessed at
            reason = f"not UTF-8 (byte 0x{line[e.start]:02x} at column {e.start + 1}); save the file as UTF-8"
            raise BatchFileError(path=str(path), line=number, reason=reason) from None
        if not text.strip():
            continue
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise BatchFileError(path=str(path), line=number, reason=f"not JSON ({e.msg} at column {e.colno})") from None
        tasks.append(_task_of(data, number, str(path)))
    if not tasks:
        raise BatchFileError(path=str(path), line=None, reason='it holds no task: write one JSON object a line, such as {"task": "..."}')
    return tasks, batch_id_of(raw)


def batch_id_of(content: bytes) -> str:
    """The batch id of a batch file's bytes: the same file always names the same batch."""
    return f"batch-{hashlib.sha256(content).hexdigest()[:10]}"


def task_run_ids(tasks: Iterable[BatchTask]) -> list[str]:
    """The run id of each task: its ``run``, else derived from what its line says.

    A line's id depends on its task, priority and settings only (not on the file around it),
    so queueing a file again after fixing or adding a line adds only what is new; the n-th
    repeat of an identical line gets ``-n``.
    """
    seen: Counter[str] = Counter()
    ids = []
    for t in tasks:
        if t.run_id is not None:
            ids.append(t.run_id)
            continue
        said = json.dumps({"task": t.task, "priority": t.priority, **t.settings}, sort_keys=True, default=str)
        words, digest = task_words(t.task), hashlib.sha256(said.encode()).hexdigest()[:8]
        base = "-".join([*words, digest])
        seen[base] += 1
        ids.append(readable_id(words, digest if seen[base] == 1 else f"{digest}-{seen[base]}"))
    return ids


def runs_of_batch_file(batch: str) -> list[tuple[int, str]] | None:
    """The run id of each line of a batch file (line number, run id), whichever submission
    queued it, when ``batch`` (``--batch FILE_OR_ID``) names a file; None when it names a
    batch by its id."""
    if os.path.isfile(batch):
        tasks = read_batch(batch)[0]
        return [(t.line, run_id) for t, run_id in zip(tasks, task_run_ids(tasks), strict=True)]
    if batch.endswith(".jsonl"):  # meant as a file: say so, not that no batch has that id
        raise ValueError(f"no file {batch}: --batch takes the tasks file that queued a batch, or the batch's id")
    return None


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
    **defaults: Any,
) -> BatchHandle:
    """Queue every task, or none (``defaults``: ``submit``'s keywords for tasks that leave them out).

    Every task is checked first (its settings, workspace and run id, and that no run holds
    another task under that id); a ``BatchFileError`` names the first bad one's line in
    ``source``, and nothing is queued. A task already queued (by an earlier submission of
    the same line) is not added again: ``already`` lists it on the handle. If writing fails
    part way, the runs this call wrote are deleted again before the error is raised.
    """
    chosen = batch or f"batch-{time.strftime('%Y%m%d-%H%M%S')}"
    tasks = list(tasks)
    if wrong := next(((n, t) for n, t in enumerate(tasks, 1) if not isinstance(t, BatchTask)), None):  # else an AttributeError
        raise TypeError(f"submit_batch takes BatchTask values, not {type(wrong[1]).__name__} (task {wrong[0]} of {source}): "
                        "BatchTask('Fix the tests', priority=5, settings={'workspace': 'project'}), or the first value "
                        "of read_batch('tasks.jsonl') for a batch file; nothing was queued")
    if defaults.get("batch_api") and runs_the_demo(demo=demo, environ=environ):
        raise demo_refuses_batch_mode(asked=demo)  # the batch's own setting: no line is at fault
    priority = int(defaults.get("priority") or 0)  # run --batch --priority N: lines that give none
    plans: list[_Planned] = []
    first_line: dict[str, int] = {}
    with opened(store) as runs:
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
                found = _queued_before(planned, runs)
            except (ValueError, NbDurableError) as e:
                raise BatchFileError(path=source, line=line, reason=str(e).rstrip(".")) from None
            plans.append(planned)
            if found is not None:
                before[planned.run_id] = found
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
            recent = dict.fromkeys(b for s in list_runs(runs, limit=BATCHES_LOOKED_AT) if (b := s.settings.get("batch")))
            listed = ", ".join(repr(b) for b in list(recent)[:5]) + (", ..." if len(recent) > 5 else "")
            hint = f"Its latest batches: {listed}." if recent else "No run there was submitted in a batch."
            raise RunNotFoundError(
                run_id=batch, where=runs.url, what="batch", reason=f"is not in {runs.url}: no run was submitted with it. {hint}"
            )
    return BatchHandle(tuple(s.run_id for s in found), store, batch)


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

    def summaries(self) -> dict[str, RunSummary]:
        """Each run's summary as the store holds it now."""
        with opened(self.store) as runs:
            found = {s.run_id: s for s in list_runs(runs, run_ids=self.run_ids)}  # the run index, not the logs
            return {r: found[r] if r in found else read_summary(r, runs) for r in self.run_ids}

    @property
    def statuses(self) -> dict[str, RunStatus]:
        """Each run's status now: queued, running, waiting (for a person's answer), completed, ..."""
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
        with opened(self.store) as store:  # once for every look: a store named by URL is a new connection each time
            looking = replace(self, store=store)
            while len(looking.results) < len(self.run_ids):
                if deadline is not None and time.monotonic() >= deadline:
                    return False
                time.sleep(poll)
        return True
