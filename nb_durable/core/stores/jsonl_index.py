"""The JSONL store's run index: a sidecar file of rows, each keyed by its log's size and mtime.

A folder of files has no transaction that spans a log and an index, so the index here is a
cache that is never believed over the logs: ``<root>/.index/runs.json`` holds, per run, the
row and the (size, mtime in ns) of the log it was made from. A reader stats every log; a row
whose log still has that size and mtime is used as it is, any other (a run written since, a
new run, a missing or damaged sidecar) is rebuilt from its log (``index.rows.row_of``). The
sidecar is then rewritten whole (a new file renamed over the old, so a reader never sees half
of one), unless only runs being written changed (they change again at once); if the folder
cannot be written, the rows are still right, just rebuilt each time. How the rows are laid out
in the file (each distinct setting once) is ``jsonl_sidecar``'s.
A killed writer can leave nothing wrong behind: what it wrote changed its log's size. One
killed between writing the new file and renaming it leaves that file, which names its host
and pid; the next write removes it once that process is gone (or, whoever wrote it, once it
is an hour old).
"""

from __future__ import annotations

import contextlib
import heapq
import json
import os
import re
import socket
import stat
import threading
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from ...errors import LogCorruptedError, RunNotFoundError, StoreError
from ..history import History
from ..holders import holder_is_alive
from ..index.listing import Listed, RunFilter, joined_status, newest_first
from ..index.rows import IndexRow, current_rule, row_of
from ..steps import RunStatus
from .base import StoredLog
from .jsonl_sidecar import Entry, Settings, Stored, data_of

__all__ = ["SIDECAR", "JsonlIndex", "read_log"]

SIDECAR = Path(".index") / "runs.json"


_READ = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)


def read_log(path: Path) -> bytes:
    """The bytes of the log file at ``path``: a regular file, or ``StoreError`` (OSError as it is).

    Anything can be put in a runs folder, a run's own ``run_bash`` included when the store is
    under its workspace (the default): ``x.jsonl`` as a symlink to ``/dev/zero`` was read until
    memory ran out, and a FIFO blocked every listing for ever. O_NONBLOCK keeps the open of a
    FIFO from waiting; the checked handle is the one read. A log this user may not read is a
    ``StoreError`` saying whose it is and what to do (``unreadable``)."""
    try:
        fd = os.open(path, _READ)
    except PermissionError as e:
        raise unreadable(path) from e
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise StoreError(
                f"cannot read {path}: it is not a regular file (a device, a pipe or a symlink to one), so it "
                "holds no run; move it out of the runs folder"
            )
        return f.read()


def _user(uid: int) -> str:
    try:
        import pwd  # POSIX only

        return pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        return f"user {uid}"


def unreadable(path: Path) -> StoreError:
    """The refusal of a log this user may not read (a mode that lets it read nothing, another user's file)."""
    try:
        st = os.stat(path)
    except OSError:  # the folder is closed to this user too
        return StoreError(
            f"cannot read {path}: this user may not read it or its folder (permission denied). Fix their "
            "permissions so this user can read them, or read the runs as their owner"
        )
    me, owner = _user(os.geteuid()) if hasattr(os, "geteuid") else "this user", _user(st.st_uid)
    other = f", or read the runs as {owner}" if owner != me else ""
    return StoreError(
        f"cannot read {path}: the user {me} may not read it (permission denied: it belongs to {owner}, its mode "
        f"{stat.filemode(st.st_mode)}). Fix its permissions (chmod, chown) so {me} can read it{other}"
    )


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


class JsonlIndex:
    """The rows of one runs folder, made from the logs and cached beside them."""

    def __init__(self, root: Path, being_written: Callable[[str], bool]) -> None:
        self.root = root
        self.path = root / SIDECAR
        self._being_written = being_written
        # The sidecar read and each run's entry, as one value: an entry's place is in that Stored.
        self._loaded: tuple[Stored, dict[str, Entry]] = (Stored(), {})
        self._sidecar_key: tuple[int, int] | None = None

    def _read_sidecar(self) -> tuple[Stored, dict[str, Entry]]:
        try:
            st = os.stat(self.path)
        except OSError:
            return self._loaded
        key = (st.st_size, st.st_mtime_ns)
        if key == self._sidecar_key:
            return self._loaded
        try:
            stored = Stored.read(json.loads(self.path.read_bytes()))
            loaded = (stored, stored.entries())
        except (OSError, ValueError, TypeError, KeyError, AttributeError, RecursionError):
            # A damaged sidecar (of any shape, arrays nested past what json.loads recurses included),
            # or an older layout, is rebuilt from the logs: else every listing and worker poll raised.
            loaded = (Stored(), {})
        self._loaded = loaded
        self._sidecar_key = key
        return loaded

    def _logs(self, run_ids: Sequence[str] | None) -> dict[str, tuple[int, int]]:
        found: dict[str, tuple[int, int]] = {}
        if run_ids is not None:
            for run_id in run_ids:
                with contextlib.suppress(OSError):
                    st = os.stat(self.root / f"{run_id}.jsonl")
                    found[run_id] = (st.st_size, st.st_mtime_ns)
            return found
        # Through the folder's descriptor where the system allows it, each stat looks up a name,
        # not the whole path again: 100,000 logs took 0.5 s, 0.4 s so.
        by_fd = os.scandir in os.supports_fd
        try:
            folder = os.open(self.root, os.O_RDONLY) if by_fd else None
        except OSError:
            return found
        try:
            for entry in list(os.scandir(self.root if folder is None else folder)):
                name = entry.name
                if name.endswith(".jsonl") and not name.startswith("."):
                    try:
                        st = entry.stat()
                    except OSError:
                        continue  # gone since it was listed
                    found[name[:-6]] = (st.st_size, st.st_mtime_ns)
        except OSError:
            pass  # the folder went as it was listed: what was found
        finally:
            if folder is not None:
                os.close(folder)
        return found

    def _row(self, run_id: str, stored: Stored) -> IndexRow | None:
        path = self.root / f"{run_id}.jsonl"
        try:
            log = StoredLog.from_file(read_log(path), str(path))
            history = History.load(run_id, log, being_written=lambda: self._being_written(run_id))
        except (OSError, LogCorruptedError, RunNotFoundError, StoreError) as e:
            warnings.warn(f"skipped {path}: {e}", stacklevel=5)
            return None
        if not history.lines:
            if not log.data and not log.tail and not self._being_written(run_id):  # a first line may be on its way
                warnings.warn(
                    f"skipped {path}: it is empty, a run created with nothing recorded (a process died as it "
                    f"began). Start the run again, or delete it: delete_run({run_id!r}, {str(self.root)!r}).",
                    stacklevel=5,
                )
            return None
        row = row_of(history)
        return replace(row, settings=Settings(stored.parts, stored.parts.refs(row.settings)))

    def _current(self, run_ids: Sequence[str] | None) -> tuple[Stored, dict[str, Entry], list[tuple[str, IndexRow | int]]]:
        """Each run's row, made from its log unless the sidecar's describes the log as it is
        now (then made only when asked for: its place in the ``Stored``)."""
        stored, entries = self._read_sidecar()
        logs = self._logs(run_ids)
        out: list[tuple[str, IndexRow | int]] = []
        changed = False
        rule = current_rule()  # once, not per row: a poll of 100,000 runs made the rule's text 100,000 times
        all_current = stored.rules == {rule}
        for run_id, (size, mtime) in logs.items():
            entry = entries.get(run_id)
            if entry is not None and entry[0] == size and entry[1] == mtime:
                got = entry[2]
                if isinstance(got, int):
                    if all_current or stored.rule(got) == rule:
                        out.append((run_id, got))
                        continue
                    made = stored.row(run_id, got)  # of another rule: believed only if IndexRow.current says so
                    if made is not None and made.current:
                        entries[run_id] = (size, mtime, made)
                        out.append((run_id, made))
                        continue
                elif got.rule == rule or got.current:
                    out.append((run_id, got))
                    continue
            row = self._row(run_id, stored)
            if row is None:
                # A log no row comes from (damaged, empty, copied in) changes the sidecar only if
                # it had a row: else every listing rewrote every row while such a log sat there.
                changed = entries.pop(run_id, None) is not None or changed
                continue
            # A run being written changes again at once: rewriting every row for it made each look of
            # a worker of a busy folder cost five looks (10,000 runs). Its row is kept here; another
            # reader makes it from its log, as it makes any row the sidecar does not have.
            changed = changed or not self._being_written(run_id)
            entries[run_id] = (size, mtime, row)
            out.append((run_id, row))
        if run_ids is None:
            gone = set(entries) - set(logs)
            for run_id in gone:
                entries.pop(run_id, None)  # another thread may have dropped it first
            changed = changed or bool(gone)
        if changed and run_ids is None:  # a whole listing pays for the rewrite, a look at a few runs not
            self._write(stored, entries)
        return stored, entries, out

    def _made(self, stored: Stored, entries: dict[str, Entry], run_id: str, got: IndexRow | int) -> IndexRow | None:
        if not isinstance(got, int):
            return got
        size, mtime = stored.key(got)
        row = stored.row(run_id, got) or self._row(run_id, stored)  # its parts or figures damaged: the log's
        if row is not None:
            entries[run_id] = (size, mtime, row)
        return row

    def rows(self, run_ids: Sequence[str] | None = None) -> list[IndexRow]:
        """The rows of those runs (every run when None), each made from its log unless cached."""
        stored, entries, current = self._current(run_ids)
        out: list[IndexRow] = []
        for run_id, got in current:
            row = self._made(stored, entries, run_id, got) if isinstance(got, int) else got  # a call per row only if unmade
            if row is not None:
                out.append(row)
        return out

    def page(self, wanted: RunFilter, going: Mapping[str, RunStatus]) -> list[IndexRow]:
        """The rows a listing wants, newest first, one page (``going``: each run being written,
        running or waiting); rows the sidecar holds are filtered and ordered by their columns,
        and made only if on the page."""
        stored, entries, current = self._current(wanted.run_ids)
        places = [(run_id, got) for run_id, got in current if isinstance(got, int)]
        listed: list[tuple[Listed, IndexRow | int]] = [(row, row) for _, row in current if not isinstance(row, int)]
        listed += stored.peeks(places)
        if not wanted.everything:
            listed = [item for item in listed if self._wanted(wanted, going, item[0])]
        if wanted.limit is None:
            listed = sorted(listed, key=lambda item: newest_first(item[0]))[wanted.offset :]
        else:
            listed = heapq.nsmallest(wanted.offset + wanted.limit, listed, key=lambda item: newest_first(item[0]))[wanted.offset :]
        made = (self._made(stored, entries, peek.run_id, got) for peek, got in listed)
        # A stored row found damaged is the log's: it is shown if it is still wanted.
        return [row for row in made if row is not None and self._wanted(wanted, going, row)]

    @staticmethod
    def _wanted(wanted: RunFilter, going: Mapping[str, RunStatus], row: Listed) -> bool:
        return wanted.matches(row, joined_status(row.status, row.ended, going.get(row.run_id)))

    def forget(self, run_id: str) -> None:
        """Drop the run's cached row, so the next reader makes it from the log again."""
        stored, entries = self._read_sidecar()
        if entries.pop(run_id, None) is not None:
            self._write(stored, entries)

    def _write(self, stored: Stored, entries: dict[str, Entry]) -> None:
        # A copy, taken at once: a worker's threads share the store, and another may index a run meanwhile.
        data = data_of(dict(entries), stored)
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
