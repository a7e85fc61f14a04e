"""Which file is at a SQLite store's path, and a connection that follows it.

An open connection reads and writes on in a file deleted under it, so a long-lived reader (a
worker's store, its wake-up watch) would never see the runs of a file made there again, and a
writer would "record" steps where nobody can read them. ``identity`` says which file is at the
path now; ``Followed`` is a connection opened again when another file is there.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

from ...errors import StoreError

__all__ = ["Followed", "deleted", "identity"]


def identity(path: Path) -> tuple[int, int] | None:
    """Which file is at ``path`` now (device and inode), None if none is."""
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return st.st_dev, st.st_ino


def deleted(path: Path, replaced: bool = False) -> StoreError:
    what = "replaced by another file" if replaced else "deleted"
    return StoreError(
        f"the SQLite store {path} was {what} while this process had it open: put the file back, "
        "or let the next submit make a new one there"
    )


class Followed:
    """A connection to the file at ``path`` now: calling it opens the file made there again
    (with ``open``), and raises ``deleted`` while no file is there."""

    def __init__(self, path: Path, open: Callable[[], sqlite3.Connection]) -> None:
        self.path = path
        self._open = open
        self._lock = threading.Lock()
        self.conn = open()
        self.file = identity(path)
        """The file ``conn`` was opened on (None: none was at the path)."""

    def __call__(self) -> sqlite3.Connection:
        now = identity(self.path)
        if now == self.file:
            return self.conn
        if now is None:
            raise deleted(self.path)
        with self._lock:
            if now != self.file:
                old, self.conn = self.conn, self._open()
                self.file = identity(self.path)
                old.close()
            return self.conn

    def close(self) -> None:
        self.conn.close()
