"""A SQLite store that can only be read: opened read-only, and every write refused in plain words.

WAL mode writes beside the database (its -wal and -shm files) even to read it, so a store on
read-only media (a read-only mount, a file or folder this process cannot write) could not even
be listed. SQLite reads a WAL database read-only (``mode=ro``) when its -wal and -shm files exist
or can be made (https://www.sqlite.org/wal.html, "Read-Only Databases"). In a folder that cannot
be written, with no -wal file (or an empty one), only ``immutable=1`` opens it, and then safely:
the writes a -wal file would hold are none, and nobody can start one there. A -wal file with
content but no -shm in such a folder holds writes neither way can read: that is refused, never
read without them.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from ...errors import StoreError
from .mounts import MOUNTED_READ_ONLY, mounted_read_only

__all__ = ["connect_read_only", "read_only_why"]


def read_only_why(path: Path) -> str:
    """Why the store at ``path`` can only be read, or '' (it can be written, or is not there yet)."""
    if not path.is_file():
        return ""
    folder = path.absolute().parent
    if mounted_read_only(folder):
        return MOUNTED_READ_ONLY
    if not os.access(path, os.W_OK):
        return "this process may not write the file"
    beside = [Path(f"{path}-wal"), Path(f"{path}-shm")]
    if not os.access(folder, os.W_OK) and not all(os.access(side, os.W_OK) for side in beside):
        return "this process may not write its folder, where SQLite keeps the -wal and -shm files it writes"
    return ""


def connect_read_only(path: Path, timeout: float) -> sqlite3.Connection:
    """A connection that only reads the store at ``path`` (see the module docstring for how)."""
    wal, shm = Path(f"{path}-wal"), Path(f"{path}-shm")
    writes_waiting = wal.is_file() and wal.stat().st_size > 0
    query = "mode=ro"
    if not os.access(path.absolute().parent, os.W_OK):
        if not writes_waiting:
            query = "mode=ro&immutable=1"
        elif not shm.is_file():
            raise StoreError(
                f"cannot read the SQLite store {path}: its {wal.name} file holds writes not yet in the "
                f"database, and SQLite needs a {shm.name} file beside it to read them, which cannot be made in "
                "that folder. Copy the database and its -wal file together to a folder you can write, and open the copy."
            )
    try:
        conn = sqlite3.connect(
            f"{path.absolute().as_uri()}?{query}", uri=True, isolation_level=None, check_same_thread=False, timeout=timeout
        )
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.Error as e:
        raise StoreError(f"cannot read the SQLite store {path}, which can only be read: {e}") from e
    if not {"nb_durable_events", "nb_durable_index"} <= tables:
        conn.close()
        raise StoreError(
            f"cannot read the SQLite store {path}: it is no nb_durable store, or one from before the run index, "
            "which is added when the store is first opened where it can be written. Copy the file to a folder "
            "you can write, and open the copy."
        )
    return conn
