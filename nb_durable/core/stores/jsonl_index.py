"""The JSONL store's run index: a sidecar file of rows, each keyed by its log's size and mtime.

A folder of files has no transaction that spans a log and an index, so the index here is a
cache that is never believed over the logs: ``<root>/.index/runs.json`` holds, per run, the
row and the (size, mtime in ns) of the log it was made from. A reader stats every log; a row
whose log still has that size and mtime is used as it is, any other (a run written since, a
new run, a missing or damaged sidecar) is rebuilt from its log (``index.rows.row_of``). The
sidecar is then rewritten whole (a new file renamed over the old, so a reader never sees half
of one), unless only runs being written changed (they change again at once); if the folder
cannot be written, the rows are still right, just rebuilt each time.
A killed writer can leave nothing wrong behind: what it wrote changed its log's size. One
killed between writing the new file and renaming it leaves that file, which names its host
and pid; the next write removes it once that process is gone (or, whoever wrote it, once it
is an hour old).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import stat
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ...errors import LogCorruptedError, RunNotFoundError, StoreError
from ..history import History
from ..holders import holder_is_alive
from ..index.rows import IndexRow, row_of
from ..steps import RUN_STATUSES
from .base import StoredLog

__all__ = ["SIDECAR", "JsonlIndex", "read_log"]

SIDECAR = Path(".index") / "runs.json"
_VERSION = 2
"""The sidecar's layout. A row made by an older rule (``IndexRow.current``) is made again from its log."""


_READ = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)


def read_log(path: Path) -> bytes:
    """The bytes of the log file at ``path``: a regular file, or ``StoreError`` (OSError as it is).

    Anything can be put in a runs folder, a run's own ``run_bash`` included when the store is
    under its workspace (the default): ``x.jsonl`` as a symlink to ``/dev/zero`` was read until
    memory ran out, and a FIFO blocked every listing for ever. O_NONBLOCK keeps the open of a
    FIFO from waiting; the checked handle is the one read."""
    fd = os.open(path, _READ)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise StoreError(
                f"cannot read {path}: it is not a regular file (a device, a pipe or a symlink to one), so it "
                "holds no run; move it out of the runs folder"
            )
        return f.read()


_TMP = re.compile(r"\.runs\.(?P<host>.+)\.(?P<pid>\d+)\.\d+\.tmp")
"""A new sidecar's name before its rename: its writer's host, pid and thread."""
_TMP_STALE_AFTER = 3600.0
"""Seconds after which a new sidecar never renamed is a dead writer's, whoever wrote it (another
host's, an older nb_durable's that named no host, a pid reused since): a write takes milliseconds."""


def _sweep(folder: Path) -> None:
    """Remove the new sidecars that killed writers left unrenamed; a live writer's is left to it."""
    try:
        entries = [e for e in os.scandir(folder) if e.name.startswith(".runs.") and e.name.endswith(".tmp")]
    except OSError:
        return
    now = time.time()
    for entry in entries:
        named = _TMP.fullmatch(entry.name)
        gone = named is not None and not holder_is_alive({"host": named["host"], "pid": int(named["pid"])})
        with contextlib.suppress(OSError):  # a writer may rename or remove its own as we look
            if gone or now - entry.stat().st_mtime > _TMP_STALE_AFTER:
                os.unlink(entry.path)


_TYPES: dict[str, Any] = {
    "lines": int, "status": str, "ended": bool, "pending": bool, "steps": int, "completed_steps": int,
    "priority": int, "settings": dict, "figures": dict, "rule": str,
}  # fmt: skip
_OR_NONE: dict[str, Any] = {
    "started_at": (int, float), "updated_at": (int, float), "queued_at": (int, float),
    "batch": str, "parent": str, "resumed_by": str, "error": str,
}  # fmt: skip


def _sound(row: IndexRow) -> bool:
    """Whether each of the row's values has the type ``row_of`` gives it."""
    return (
        all(isinstance(getattr(row, name), kind) for name, kind in _TYPES.items())
        and all(getattr(row, name) is None or isinstance(getattr(row, name), kind) for name, kind in _OR_NONE.items())
        and row.status in RUN_STATUSES
        and all(isinstance(tag, str) for tag in row.tags)
        and all(isinstance(value, (int, float)) for value in row.figures.values())
    )


class JsonlIndex:
    """The rows of one runs folder, made from the logs and cached beside them."""

    def __init__(self, root: Path, being_written: Callable[[str], bool]) -> None:
        self.root = root
        self.path = root / SIDECAR
        self._being_written = being_written
        self._cache: dict[str, tuple[int, int, IndexRow]] = {}
        self._sidecar_key: tuple[int, int] | None = None

    def _read_sidecar(self) -> None:
        try:
            st = os.stat(self.path)
        except OSError:
            return
        key = (st.st_size, st.st_mtime_ns)
        if key == self._sidecar_key:
            return
        try:
            data = json.loads(self.path.read_bytes())
            if not isinstance(data, dict) or data.get("version") != _VERSION:
                return
            cache = {
                run_id: (int(size), int(mtime), IndexRow.from_json(row))
                for run_id, (size, mtime, row) in data["runs"].items()
            }
            # A row under another run's name would list a run there is not; one of other types
            # (a hand edit) would fail whatever shows it.
            self._cache = {run_id: cached for run_id, cached in cache.items() if cached[2].run_id == run_id and _sound(cached[2])}
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            self._cache = {}  # a damaged sidecar (of any shape) is rebuilt from the logs
        self._sidecar_key = key

    def _logs(self, run_ids: Sequence[str] | None) -> dict[str, tuple[int, int]]:
        found: dict[str, tuple[int, int]] = {}
        if run_ids is not None:
            for run_id in run_ids:
                with contextlib.suppress(OSError):
                    st = os.stat(self.root / f"{run_id}.jsonl")
                    found[run_id] = (st.st_size, st.st_mtime_ns)
            return found
        try:
            entries = list(os.scandir(self.root))
        except OSError:
            return found
        for entry in entries:
            name = entry.name
            if name.endswith(".jsonl") and not name.startswith("."):
                with contextlib.suppress(OSError):
                    st = entry.stat()
                    found[name[:-6]] = (st.st_size, st.st_mtime_ns)
        return found

    def _row(self, run_id: str) -> IndexRow | None:
        path = self.root / f"{run_id}.jsonl"
        try:
            stored = StoredLog.from_file(read_log(path), str(path))
            history = History.load(run_id, stored, being_written=lambda: self._being_written(run_id))
        except (OSError, LogCorruptedError, RunNotFoundError, StoreError) as e:
            warnings.warn(f"skipped {path}: {e}", stacklevel=4)
            return None
        if not history.lines:
            if not stored.data and not stored.tail and not self._being_written(run_id):  # a first line may be on its way
                warnings.warn(
                    f"skipped {path}: it is empty, a run created with nothing recorded (a process died as it "
                    f"began). Start the run again, or delete it: delete_run({run_id!r}, {str(self.root)!r}).",
                    stacklevel=4,
                )
            return None
        return row_of(history)

    def rows(self, run_ids: Sequence[str] | None = None) -> list[IndexRow]:
        """The rows of those runs (every run when None), each made from its log unless cached."""
        self._read_sidecar()
        logs = self._logs(run_ids)
        out: list[IndexRow] = []
        changed = False
        for run_id, (size, mtime) in logs.items():
            cached = self._cache.get(run_id)
            if cached is not None and cached[0] == size and cached[1] == mtime and cached[2].current:
                out.append(cached[2])
                continue
            row = self._row(run_id)
            if row is None:
                # A log no row comes from (damaged, empty, copied in) changes the sidecar only if
                # it had a row: else every listing rewrote every row while such a log sat there.
                changed = self._cache.pop(run_id, None) is not None or changed
                continue
            # A run being written changes again at once: rewriting every row for it made each look of
            # a worker of a busy folder cost five looks (10,000 runs). Its row is kept here; another
            # reader makes it from its log, as it makes any row the sidecar does not have.
            changed = changed or not self._being_written(run_id)
            self._cache[run_id] = (size, mtime, row)
            out.append(row)
        if run_ids is None:
            gone = set(self._cache) - set(logs)
            for run_id in gone:
                self._cache.pop(run_id, None)  # another thread may have dropped it first
            changed = changed or bool(gone)
        if changed and run_ids is None:  # a whole listing pays for the rewrite, a look at a few runs not
            self._write()
        return out

    def forget(self, run_id: str) -> None:
        """Drop the run's cached row, so the next reader makes it from the log again."""
        self._read_sidecar()
        if self._cache.pop(run_id, None) is not None:
            self._write()

    def _write(self) -> None:
        # A copy, taken at once: a worker's threads share the store, and another may index a run meanwhile.
        cached = dict(self._cache)
        data: dict[str, Any] = {
            "version": _VERSION,
            "runs": {run_id: [size, mtime, row.to_json()] for run_id, (size, mtime, row) in cached.items()},
        }
        tmp = self.path.with_name(f".runs.{socket.gethostname()}.{os.getpid()}.{threading.get_ident()}.tmp")
        try:
            self.path.parent.mkdir(exist_ok=True)
            _sweep(self.path.parent)
            tmp.write_text(json.dumps(data, separators=(",", ":")))
            os.replace(tmp, self.path)
            st = os.stat(self.path)
            self._sidecar_key = (st.st_size, st.st_mtime_ns)
        except OSError:
            with contextlib.suppress(OSError):
                tmp.unlink()
