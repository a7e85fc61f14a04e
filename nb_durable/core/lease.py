"""One writer per run: an exclusive lease the operating system drops when its process dies.

A file lease is an OS lock on ``<folder>/<name>.lock``: ``flock`` on POSIX, ``msvcrt.locking``
of one byte far past the end of the file on Windows (a Windows lock is mandatory, so it sits
where nobody reads). The OS releases it when the holding process exits for any reason, SIGKILL
included, so a crashed kernel never leaves a run locked. The file also names its holder (pid,
host, since, and what program it is) so a second writer's ``RunLockedError`` can say who has the
run and how to stop it (``holders``), and, while the
holder asks a person, what it waits on (``mark``, ``core.holders``): a mark dies with its lock. Releasing unlinks
the file; an acquirer re-checks after locking that the path still names the file it locked, so
two writers can never hold two different files for the same run.

The lock itself is the only truth about who writes. A reader asks the OS whether the lock is
held (it takes and drops a shared lock, never waiting), so a dead writer reads as gone even when
its file names a pid that was reused since or a host this one cannot ask. A writer that finds
the lock taken tries again for a moment before it gives up, since the taker may be a reader.

Stores place lease files by the real path of what they guard (symlinks resolved), so two
names for one file share one lease. Neither ``fcntl`` nor ``msvcrt`` is imported until a lock
is taken: ``import nb_durable`` works on every OS.
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from ..errors import RunLockedError, StoreError, StoreFullError, full_disk
from .holders import ASKING, locked_message, this_holder

__all__ = [
    "LOCKS",
    "FileLease",
    "Locks",
    "lease_path",
]

_SETTLE = 0.25  # seconds a writer retries a taken lock: a reader holds it for microseconds


def lease_path(guarded: str | os.PathLike[str], folder_suffix: str, name: str) -> Path:
    """Where the lease of ``name`` lives for the file or folder ``guarded``: beside its real
    path, so every name (symlink) of one store finds the same lease."""
    real = Path(os.path.realpath(guarded))
    return real.with_name(real.name + folder_suffix) / f"{name}.lock"


class Locks(Protocol):
    """One OS's exclusive, process-bound lock on an open file."""

    name: str
    """The module that provides it (``fcntl``, ``msvcrt``)."""

    def available(self) -> bool:
        """Whether this OS has the lock."""
        ...

    def try_lock(self, fd: int, *, shared: bool = False) -> bool:
        """Take the lock without waiting: False if another holder has it; OSError otherwise."""
        ...

    def unlock(self, fd: int) -> None:
        """Drop the lock (closing the file drops it too)."""
        ...

    unlink_while_locked: bool
    """Whether the file can be unlinked while open (POSIX) or only after closing (Windows)."""


_BUSY = (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES, errno.EDEADLK)


def _taken(lock: Callable[[], object]) -> bool:
    """Run a non-blocking lock call: True if it took the lock, False if another holder has it."""
    try:
        lock()
    except OSError as e:
        if e.errno in _BUSY:
            return False
        raise
    return True


class _ModuleLocks:
    """A lock implemented by one OS module, imported only when a lock is taken."""

    name = ""

    def available(self) -> bool:
        try:
            importlib.import_module(self.name)
        except ImportError:
            return False
        return True


class FlockLocks(_ModuleLocks):
    """``flock`` (Linux, macOS, BSD): a shared probe never blocks another reader."""

    name = "fcntl"
    unlink_while_locked = True

    def try_lock(self, fd: int, *, shared: bool = False) -> bool:
        import fcntl

        return _taken(lambda: fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB))

    def unlock(self, fd: int) -> None:
        import fcntl

        fcntl.flock(fd, fcntl.LOCK_UN)


class MsvcrtLocks(_ModuleLocks):
    """``msvcrt.locking`` (Windows) of one byte at an offset no holder description reaches."""

    name = "msvcrt"
    unlink_while_locked = False
    _OFFSET = 1 << 30

    def try_lock(self, fd: int, *, shared: bool = False) -> bool:
        import msvcrt

        # Windows has no shared mode here: a probe takes the byte exclusively for a moment.
        os.lseek(fd, self._OFFSET, os.SEEK_SET)
        return _taken(lambda: msvcrt.locking(fd, msvcrt.LK_NBLCK, 1))  # type: ignore[attr-defined]

    def unlock(self, fd: int) -> None:
        import msvcrt

        os.lseek(fd, self._OFFSET, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)  # type: ignore[attr-defined]


LOCKS: Locks = MsvcrtLocks() if os.name == "nt" else FlockLocks()
"""This OS's file lock."""


def _check(locks: Locks) -> None:
    if not locks.available():
        raise StoreError(
            f"this Python has no file locking ({locks.name} is unavailable), so a file store cannot "
            "guarantee one writer per run. Use the PostgreSQL or memory store here."
        )


class FileLease:
    """A held lock on one run's lock file; ``release()`` (or process death) frees it."""

    def __init__(self, path: Path, fd: int, locks: Locks = LOCKS, holder: dict[str, Any] | None = None) -> None:
        self.path = path
        self._fd: int | None = fd
        self._locks = locks
        self._holder = holder or {}
        self._written = 0  # how long the description in the file is

    @classmethod
    def acquire(cls, path: Path, run_id: str, locks: Locks = LOCKS) -> FileLease:
        """Take the lease or raise RunLockedError naming the holder."""
        _check(locks)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise _store_error(f"cannot create the lease folder {path.parent}", e) from e
        deadline = time.monotonic() + _SETTLE
        while True:
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
            except OSError as e:
                raise _store_error(f"cannot open the lease file {path}", e) from e
            try:
                taken = locks.try_lock(fd)
            except OSError as e:
                os.close(fd)
                raise _store_error(f"cannot lock {path}", e) from e
            if not taken:
                holder = _read_fd(fd)
                os.close(fd)
                if time.monotonic() < deadline:
                    time.sleep(0.01)
                    continue
                raise RunLockedError(locked_message(run_id, holder), run_id=run_id, holder=holder)
            try:
                same = os.stat(path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if not same:
                # The previous holder released (and unlinked) between our open and our lock.
                os.close(fd)
                continue
            lease = cls(path, fd, locks, this_holder())
            try:
                data = json.dumps(lease._holder).encode()
                os.ftruncate(fd, 0)
                os.lseek(fd, 0, os.SEEK_SET)
                os.write(fd, data)
                lease._written = len(data)
            except OSError as e:
                if full_disk(e) is not None:
                    # The lock holds without its description: readers see "another process".
                    # Replaying needs no space, and the first append says the disk is full.
                    return lease
                lease.release()  # never keep a lock this process would not know it holds
                raise _store_error(f"cannot write the lease file {path}", e) from e
            return lease

    @staticmethod
    def held_in(folder: Path, locks: Locks = LOCKS) -> dict[str, dict[str, Any]]:
        """Every lease of a folder that is held now, by name: a released lease leaves no file,
        so only the files there (live holders and dead ones' leftovers) are asked."""
        try:
            names = [n[:-5] for n in os.listdir(folder) if n.endswith(".lock")]
        except OSError:
            return {}
        found = {name: FileLease.holder(folder / f"{name}.lock", locks) for name in names}
        return {name: holder for name, holder in found.items() if holder is not None}

    @staticmethod
    def holder(path: Path, locks: Locks = LOCKS) -> dict[str, Any] | None:
        """The holder of a lease, if its lock is held ({} if held by one not yet named)."""
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            return None  # no lease file: nobody ever took it, or its holder released it
        try:
            if not locks.available():
                return _read_fd(fd)
            for _ in range(1 if isinstance(locks, FlockLocks) else 5):  # only flock has a shared mode
                try:
                    if locks.try_lock(fd, shared=True):
                        locks.unlock(fd)
                        return None
                except OSError:
                    return _read_fd(fd) or {}
                time.sleep(0.002)
            return _read_fd(fd) or {}
        finally:
            os.close(fd)

    def mark(self, asking: dict[str, Any] | None) -> None:
        """Say in the lease file what the holder waits on (``core.holders``), or that it waits on
        nothing. One write at offset 0, blank-padded over a longer old text (JSON ignores the
        blanks), so a reader never meets an empty file; one that meets a write half done reads
        it again (``_read_fd``). A mark that cannot be written leaves the description as it was:
        readers see the run running, and the run goes on (it is a display, never a record)."""
        fd = self._fd
        if fd is None:
            return
        holder = dict(self._holder)
        if asking:
            holder[ASKING] = asking
        data = json.dumps(holder).encode()
        padded = data.ljust(self._written)
        with contextlib.suppress(OSError):
            os.lseek(fd, 0, os.SEEK_SET)
            if os.write(fd, padded) == len(padded):
                self._written = len(padded)

    def release(self) -> None:
        """Give the run up; safe to call twice."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        if self._locks.unlink_while_locked:
            with contextlib.suppress(OSError):
                os.unlink(self.path)
            os.close(fd)
            return
        with contextlib.suppress(OSError):
            self._locks.unlock(fd)
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(self.path)  # fails while another process has it open: that one holds it now


def _store_error(doing: str, e: OSError) -> StoreError:
    code = full_disk(e)
    if code is not None:
        return StoreFullError(doing=doing, path=str(e.filename or doing), code=code)
    return StoreError(f"{doing}: {e.strerror or e}")


def _read_fd(fd: int) -> dict[str, Any] | None:
    for _ in range(3):  # a holder rewriting its mark may be caught half done: read it again
        try:
            os.lseek(fd, 0, os.SEEK_SET)
            data = os.read(fd, 4096)
        except OSError:
            return None
        holder = _parse(data)
        if holder is not None or not data.strip():
            return holder
        time.sleep(0.001)
    return None


def _parse(data: bytes) -> dict[str, Any] | None:
    try:
        holder = json.loads(data)
    except ValueError:
        return None
    return holder if isinstance(holder, dict) else None
