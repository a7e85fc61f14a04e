"""One writer per run: an exclusive lease the operating system drops when its process dies.

A file lease is an ``flock`` on ``<folder>/<run_id>.lock``. The kernel releases it when the
holding process exits for any reason, SIGKILL included, so a crashed kernel never leaves a
run locked. The file also names its holder (pid, host, since) so a second writer's
``RunLockedError`` can say who has the run. Releasing unlinks the file while still holding
the lock; an acquirer re-checks after locking that the path still names the inode it
locked, so two writers can never hold two different files for the same run.

Readers never take a lease. To report a run as running, they read the holder and, on this
host, ask whether that pid is alive.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import json
import os
import socket
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from ..errors import RunLockedError, StoreError

__all__ = ["FileLease", "describe_holder", "holder_is_alive", "this_holder"]


@functools.lru_cache(maxsize=1)
def _host() -> str:
    return socket.gethostname()


def this_holder() -> dict[str, Any]:
    """The description this process leaves in the leases it takes."""
    return {"pid": os.getpid(), "host": _host(), "since": round(time.time(), 3)}


def describe_holder(holder: dict[str, Any] | None) -> str:
    """A holder as words: 'pid 4242 on host nb1 since 12:04:05'."""
    if not holder:
        return "another process"
    since = holder.get("since")
    when = (
        f" since {datetime.fromtimestamp(since).strftime('%Y-%m-%d %H:%M:%S')}"
        if isinstance(since, (int, float))
        else ""
    )
    mine = " (this process)" if holder.get("pid") == os.getpid() and holder.get("host") == _host() else ""
    return f"pid {holder.get('pid')} on host {holder.get('host')}{when}{mine}"


def holder_is_alive(holder: dict[str, Any] | None) -> bool:
    """Whether a recorded holder still runs; a holder on another host is assumed to."""
    if not holder:
        return False
    if holder.get("host") != _host():
        return True
    pid = holder.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def locked_message(run_id: str, holder: dict[str, Any] | None) -> str:
    return (
        f"run {run_id!r} is being written by {describe_holder(holder)}. Only one process may "
        "write a run at a time: wait for it to finish, stop that kernel, or read the run "
        f"without writing it with read_run({run_id!r})."
    )


class FileLease:
    """An held flock on one run's lock file; ``release()`` (or process death) frees it."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, path: Path, run_id: str) -> FileLease:
        """Take the lease or raise RunLockedError naming the holder."""
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StoreError(f"cannot create the lease folder {path.parent}: {e.strerror or e}") from e
        while True:
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            except OSError as e:
                raise StoreError(f"cannot open the lease file {path}: {e.strerror or e}") from e
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                holder = _read_fd(fd)
                os.close(fd)
                if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise RunLockedError(locked_message(run_id, holder), run_id=run_id, holder=holder) from None
                raise StoreError(f"cannot lock {path}: {e.strerror or e}") from e
            try:
                same = os.stat(path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if not same:
                # The previous holder released (and unlinked) between our open and our lock.
                os.close(fd)
                continue
            data = json.dumps(this_holder()).encode()
            os.ftruncate(fd, 0)
            os.pwrite(fd, data, 0)
            return cls(path, fd)

    @staticmethod
    def holder(path: Path) -> dict[str, Any] | None:
        """The recorded holder of a lease file, if the file exists and its holder is alive."""
        try:
            data = path.read_bytes()
        except OSError:
            return None
        holder = _parse(data)
        return holder if holder_is_alive(holder) else None

    def release(self) -> None:
        """Give the run up; safe to call twice."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        with contextlib.suppress(OSError):
            os.unlink(self.path)
        os.close(fd)


def _read_fd(fd: int) -> dict[str, Any] | None:
    try:
        return _parse(os.pread(fd, 4096, 0))
    except OSError:
        return None


def _parse(data: bytes) -> dict[str, Any] | None:
    try:
        holder = json.loads(data)
    except ValueError:
        return None
    return holder if isinstance(holder, dict) else None
