"""Batch files: JSON lines, one task a line, read and checked whole before anything is queued.

A line is ``{"task": ..., "run": ..., "priority": ..., "model": ..., "workspace": ...,
"tags": [...]}`` (only ``task`` is required; a line may give any setting a flag gives, by its
name: ``LINE_SETTINGS``, checked as the settings table says). Unless given, the batch id is
derived from the file's bytes and each run's id from what its line says (``task_run_ids``), so
submitting a file twice, or again after fixing or adding lines, queues no line twice.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import os
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import BatchFileError, SettingError
from ...errors.agent import json_said
from ..run.prepare import readable_id, task_words
from ..settings import AgentSettings, Setting, rows_of

__all__ = ["LINE_SETTINGS", "BatchScan", "BatchTask", "batch_id_of", "read_batch", "runs_of_batch_file", "scan_batch", "task_run_ids"]

LINE_SETTINGS: Mapping[str, Setting] = {
    row.name: row for row in rows_of(AgentSettings) if row.flag or row.name == "priority"
}
"""The settings a line of a batch file may give its run by name: every recorded setting a
flag gives, and ``priority`` (a queued run's, which no flag sets)."""

_JSON = {"whole": (int,), "number": (int, float), "text": (str,), "choice": (str,), "words": (list,), "switch": (bool,)}
_JSON_KINDS = {list: "an array", str: "a string", bool: "true or false", int: "a number", float: "a number", type(None): "null"}
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

    def __post_init__(self) -> None:
        # Said here: a task that is not text failed later as "'NoneType' object has no attribute 'lower'".
        if not isinstance(self.task, str):
            raise TypeError(f"a BatchTask's task is the text of what the agent should do, not {type(self.task).__name__}: BatchTask('Fix the tests')")


def _task_of(data: Any, line: int, where: str) -> BatchTask:
    def bad(reason: str) -> BatchFileError:
        return BatchFileError(path=where, line=line, reason=reason)

    if not isinstance(data, dict):
        raise bad(f"a line must be a JSON object such as {{\"task\": \"...\"}}, not {_JSON_KINDS.get(type(data), 'that')}")
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
        raise bad(f"'run' must be a JSON string, not {json_said(run_id)}")
    settings = {}
    for key, value in data.items():
        row = LINE_SETTINGS.get(key)
        if row is None or value is None:
            continue
        if not isinstance(value, _JSON.get(row.kind, (object,))) or (isinstance(value, bool) and row.kind != "switch"):
            raise bad(f"{key!r} must be a JSON {_JSON_SAID.get(row.kind, 'value')}, not {json_said(value)}")
        try:
            settings[key] = row.check(value, spelled=repr(key))
        except SettingError as e:  # said again with the value as the file spells it
            raise bad(str(SettingError(setting=e.setting, value=value, reason=e.reason, spelled=e.spelled, as_json=True))) from None
    priority = settings.pop("priority", None)
    return BatchTask(task, run_id, priority, settings, line)


@dataclass(frozen=True, slots=True)
class BatchScan:
    """What a batch file holds: the tasks of its good lines, every bad line's (number, what is wrong), its batch id."""

    tasks: list[BatchTask]
    problems: list[tuple[int, str]]
    batch_id: str


def scan_batch(path: str | os.PathLike[str]) -> BatchScan:
    """Every line of a batch file read, the bad ones kept as problems rather than raised, so that
    all of them are said at once (``submit_batch(..., bad_lines=)``); ``BatchFileError`` only when
    the file as a whole cannot be read or holds no line at all."""
    try:
        raw = Path(path).read_bytes()
    except OSError as e:
        raise BatchFileError(path=str(path), line=None, reason=e.strerror or str(e)) from None
    tasks: list[BatchTask] = []
    problems: list[tuple[int, str]] = []
    for number, line in enumerate(raw.removeprefix(codecs.BOM_UTF8).splitlines(), 1):
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as e:  # a task is never recorded with its bytes guessed at
            problems.append((number, f"not UTF-8 (byte 0x{line[e.start]:02x} at column {e.start + 1}); save the file as UTF-8"))
            continue
        if not text.strip():
            continue
        try:
            tasks.append(_task_of(json.loads(text), number, str(path)))
        except json.JSONDecodeError as e:
            problems.append((number, f"not JSON ({e.msg} at column {e.colno})"))
        except BatchFileError as e:
            problems.extend(e.problems)
    if not tasks and not problems:
        raise BatchFileError(path=str(path), line=None, reason='it holds no task: write one JSON object a line, such as {"task": "..."}')
    return BatchScan(tasks, problems, batch_id_of(raw))


def read_batch(path: str | os.PathLike[str]) -> tuple[list[BatchTask], str]:
    """The tasks of a batch file and the batch id derived from its bytes; ``BatchFileError`` names every bad line."""
    scan = scan_batch(path)
    if scan.problems:
        raise BatchFileError(path=str(path), problems=scan.problems)
    return scan.tasks, scan.batch_id


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
    batch by its id. A file that cannot be read, or has a bad line, is a ``BatchFileError``
    that says so (a folder of that name, or a missing ``*.jsonl``, was meant as a file too)."""
    if not (os.path.lexists(batch) or batch.endswith(".jsonl")):
        return None
    try:
        tasks = read_batch(batch)[0]
    except BatchFileError as e:
        raise BatchFileError(path=e.path, reason=e.reason, problems=e.problems, listing=True) from None
    return [(t.line, run_id) for t, run_id in zip(tasks, task_run_ids(tasks), strict=True)]
