"""The default store: a folder with one append-only JSONL file per run.

``runs/<run_id>.jsonl`` holds the run's events, one line each, written with a single
``write`` on a file opened ``O_APPEND`` and, when the step asks for it, ``fsync``ed before
the run moves on. A crash can only cut the last line short; the writer truncates such a
torn tail (under the lease) before it appends. A write the disk refuses (full, over quota) is
cut back to the last whole line and raises ``StoreFullError``: once space is freed the same
writer appends again after it. Leases live in ``runs/.leases/`` of the
folder that really holds the file (symlinks resolved), so every name of a run shares one lease. The run index is a sidecar cache of
rows, each checked against its log's size and mtime (``jsonl_index``). A folder on read-only
media (a read-only mount, a folder this process may not write) is read as ever, and a write to
it is ``StoreReadOnlyError``.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ...errors import RunNotFoundError, StoreError, StoreFullError, StoreReadOnlyError, full_disk
from ..index.listing import RunFilter
from ..index.rows import IndexRow
from ..lease import FileLease
from ..limiter import FileLimiter
from ..steps import RunStatus
from .base import (
    ClosingStore,
    StoredLog,
    can_name_a_run,
    check_run_id,
    file_lease,
    not_found,
    not_there,
    plainly,
)
from .jsonl_index import JsonlIndex, read_log
from .mounts import MOUNTED_READ_ONLY, mounted_read_only

__all__ = ["JsonlStore"]

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)  # POSIX; Windows handles are not inherited by default
_BINARY = getattr(os, "O_BINARY", 0)  # Windows would otherwise turn each newline into CRLF


class JsonlStore(ClosingStore):
    """Runs as ``<root>/<run_id>.jsonl`` files."""

    index_written = False
    """Writers leave the index alone: readers make it from the logs (``jsonl_index``)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.url = str(root)
        self.key = f"jsonl:{os.path.realpath(self.root)}"
        self._index = JsonlIndex(self.root, lambda run_id: self.holder(run_id) is not None)

    def path(self, run_id: str) -> Path:
        """The file that holds (or will hold) a run."""
        return self.root / f"{check_run_id(run_id)}.jsonl"

    def location(self, run_id: str) -> str:
        return str(self.path(run_id))

    def run_ids(self) -> list[str]:
        try:
            names = os.listdir(self.root)
        except FileNotFoundError:
            return []
        except OSError as e:
            raise StoreError(f"cannot list the runs folder {self.root}: {e.strerror or e}") from e
        # A file no run id names ('my copy.jsonl', put there by hand) is no run: taken as one, it
        # stopped check-index and copy with an error about a run id nobody typed.
        return sorted(n[:-6] for n in names if n.endswith(".jsonl") and can_name_a_run(n[:-6]))

    def load(self, run_id: str) -> StoredLog:
        path = self.path(run_id)
        try:
            data = read_log(path)
        except FileNotFoundError:
            where = f"the folder {plainly(self.root)}"
            if not self.root.is_dir():  # "it has no runs yet" would hide a mistyped store
                raise RunNotFoundError(
                    run_id=run_id, where=where, reason=f"is not in {where}: {not_there('folder')}"
                ) from None
            raise not_found(run_id, where, self.run_ids(), self.url) from None
        except OSError as e:
            raise StoreError(f"cannot read {path}: {e.strerror or e}") from e
        return StoredLog.from_file(data, str(path))

    def holder(self, run_id: str) -> dict[str, Any] | None:
        return FileLease.holder(self._lease_path(run_id))

    def held(self) -> dict[str, dict[str, Any]]:
        """Every run being written now, with its holder (from the lease files)."""
        return FileLease.held_in(Path(os.path.realpath(self.root)) / ".leases")

    def index_rows(self, run_ids: Sequence[str] | None = None) -> list[IndexRow]:
        """The run index's rows (of ``run_ids``): the sidecar's, checked against each log (``jsonl_index``)."""
        return self._index.rows(run_ids)

    def list_rows(self, wanted: RunFilter, held: Mapping[str, RunStatus]) -> list[IndexRow]:
        """The rows a listing wants, newest first, one page (``held``: the runs being written, each
        running or waiting), made only for the page where the sidecar has them (``jsonl_index``)."""
        return self._index.page(wanted, held)

    def column_drift(self) -> dict[str, dict[str, tuple[Any, Any]]]:
        """None: the sidecar holds the rows alone, with no columns beside them."""
        return {}

    def _lease_path(self, run_id: str) -> Path:
        # Keyed by the run file's real path: a symlinked folder or file shares the one lease.
        real = Path(os.path.realpath(self.path(run_id)))
        return real.parent / ".leases" / f"{real.stem}.lock"

    def limiter(self) -> FileLimiter:
        """Rate limits shared by every process using this folder (``core.limiter``)."""
        return FileLimiter(Path(os.path.realpath(self.root)) / ".leases" / "limits")

    @property
    def read_only(self) -> str:
        """Why the folder can only be read ('' if it can be written, or is not there yet)."""
        if not self.root.is_dir():
            return ""
        if mounted_read_only(self.root):
            return MOUNTED_READ_ONLY
        if not os.access(self.root, os.W_OK):
            return "this process may not write the folder"
        return ""

    def check_writable(self, doing: str) -> None:
        """Refuse ``doing`` (``StoreReadOnlyError``) if the folder can only be read."""
        why = self.read_only
        if why:
            raise StoreReadOnlyError(doing=doing, path=str(self.root), why=why)
        if not self.root.is_dir() and mounted_read_only(self.root):
            raise StoreReadOnlyError(doing=doing, path=str(self.root), why=MOUNTED_READ_ONLY, there=False)

    def make(self) -> None:
        """Make the folder if it is not there yet (the first write does; a worker, before it)."""
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StoreError(
                f"cannot create the runs folder {self.root}: {e.strerror or e}. "
                "Pass root= a folder you can write."
            ) from e

    def open_writer(self, run_id: str) -> _JsonlWriter:
        path = self.path(run_id)
        doing = f"cannot write run {run_id!r}"
        self.check_writable(doing)
        self.make()
        return _JsonlWriter(path, file_lease(self._lease_path(run_id), run_id, doing, self.root), self._index)


class _JsonlWriter:
    def __init__(self, path: Path, lease: FileLease, index: JsonlIndex) -> None:
        self._path = path
        self._lease = lease
        self._index = index
        self._fd: int | None = None
        self._loaded = b""
        self._size = 0  # the file's length: this writer alone appends to it

    def load(self) -> StoredLog:
        try:
            data = read_log(self._path)
        except FileNotFoundError:
            data = b""
        except OSError as e:
            self.close()
            raise StoreError(f"cannot read {self._path}: {e.strerror or e}") from e
        self._loaded = data
        self._size = len(data)
        return StoredLog.from_file(data, str(self._path))

    def _open(self, sync: bool) -> int:
        if self._fd is None:
            created = not self._path.exists()
            try:
                self._fd = os.open(self._path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | _CLOEXEC | _BINARY, 0o644)
                self._size = os.fstat(self._fd).st_size
                if created and sync and os.name != "nt":  # Windows cannot open a folder to sync it
                    # A new file's directory entry must reach the disk too, or the file may vanish.
                    dir_fd = os.open(self._path.parent, os.O_RDONLY)
                    try:
                        os.fsync(dir_fd)
                    finally:
                        os.close(dir_fd)
            except OSError as e:
                raise self._error(e) from e
        return self._fd

    def _error(self, e: OSError) -> StoreError:
        code = full_disk(e)
        if code is not None:
            return StoreFullError(doing=f"cannot append to {self._path}", path=str(self._path), code=code)
        if e.errno == errno.EROFS:  # turned read-only under this writer's open file
            return StoreReadOnlyError(doing=f"cannot append to {self._path}", path=str(self._path.parent), why=MOUNTED_READ_ONLY)
        return StoreError(f"cannot write {self._path}: {e.strerror or e}")

    def put_index(self, row: IndexRow) -> None:
        """Forget the sidecar's row of the run: readers make it from the log (``jsonl_index``).
        Writers never call it here (``index_written`` is False); ``repair_index`` does."""
        self._index.forget(row.run_id)

    def mark_asking(self, asking: dict[str, Any] | None) -> None:
        self._lease.mark(asking)

    def append(self, lines: Sequence[bytes], first_seq: int, *, sync: bool, index: IndexRow | None = None) -> None:
        fd = self._open(sync)
        data = lines[0] if len(lines) == 1 else b"".join(lines)
        view = memoryview(data)
        try:
            while view:
                written = os.write(fd, view)
                view = view[written:]
            if sync:
                os.fsync(fd)
        except OSError as e:
            # Undo the part that got written (a full disk takes some bytes, then refuses), so
            # the log ends in a whole line and the next append after freeing space follows it.
            # If even that fails, the partial line is a torn tail, dropped with a warning on reopen.
            with contextlib.suppress(OSError):
                os.ftruncate(fd, self._size)
            raise self._error(e) from e
        self._size += len(data)

    def truncate(self, keep: int) -> None:
        size = 0
        for _ in range(keep):
            size = self._loaded.index(b"\n", size) + 1
        with open(self._path, "r+b") as f:
            f.truncate(size)
            f.flush()
            os.fsync(f.fileno())
        self._loaded = self._loaded[:size]
        self._size = size

    def delete(self) -> None:
        try:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
            try:
                os.unlink(self._path)
            except FileNotFoundError:
                pass
            except OSError as e:
                raise StoreError(f"cannot delete {self._path}: {e.strerror or e}") from e
            if os.name != "nt":  # the removal must reach the disk before the lease is let go
                dir_fd = os.open(self._path.parent, os.O_RDONLY)
                try:
                    os.fsync(dir_fd)
                finally:
                    os.close(dir_fd)
        finally:
            self.close()

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self._lease.release()
