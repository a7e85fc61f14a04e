"""Many runs in one SQLite file, in WAL mode: ``sqlite:///runs.db``.

Each event is a row ``(run_id, seq, line)`` holding the same checksummed line the JSONL
store writes, so both stores share one codec and one set of checks. An append is one
transaction, committed with ``synchronous=FULL`` when the step asks for durability and
``NORMAL`` otherwise (in WAL mode that still survives a process crash). SQLite cannot tear a
row, so a bad row anywhere is corruption; a full disk (SQLITE_FULL) rolls the append back and
raises ``StoreFullError``. WAL mode does not work on network file systems, so a file on
one (``mounts``) is refused unless ``$NB_DURABLE_SQLITE_NETWORK_FS`` is 1. The run index (``sqlite_index``) is a table written in each append's transaction. Leases are lock files in ``<file>.leases/``
beside the database's real path (symlinks resolved), so every name of one file shares them.
An open connection reads and writes on in a file deleted under it, so the file at the path is
checked (``sqlite_file``): the reading connection and a worker's wake-up watch follow a file
made there again, and a write to a deleted or replaced file is refused (``StoreError``) rather
than "recorded" where nobody can read it. A store on read-only media is opened read-only
(``sqlite_readonly``): its runs are read as ever, and every write is ``StoreReadOnlyError``.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import sqlite3
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ...errors import NetworkFileSystemError, RunNotFoundError, StoreError, StoreFullError, StoreReadOnlyError
from ..index.rows import CLAIM_SECONDS, IndexRow, RunFilter, slim_since
from ..lease import FileLease, lease_path
from ..limiter import FileLimiter
from . import sqlite_index
from .base import ClosingStore, StoredLog, check_run_id, file_lease, not_found, not_there
from .mounts import (
    MOUNTED_READ_ONLY,
    MOUNTINFO,
    filesystem_type,
    is_network_file_system,
    mounted_read_only,
    turned_read_only,
)
from .sqlite_file import Followed, deleted, identity
from .sqlite_readonly import connect_read_only, read_only_why

__all__ = ["NETWORK_FS_ENV", "SqliteStore"]

NETWORK_FS_ENV = "NB_DURABLE_SQLITE_NETWORK_FS"
"""Set to 1 to open a SQLite store on a network file system anyway (one host, at your risk)."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS nb_durable_events (
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    line BLOB NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID
"""


_SQLITE_BUSY = 5
_SQLITE_FULL = 13
BUSY_SECONDS = 30.0
"""How long a write waits for another connection's write transaction to end (SQLite's busy timeout)."""


def _write_error(doing: str, path: Path, e: sqlite3.Error) -> StoreError:
    code = getattr(e, "sqlite_errorcode", None)
    if code == _SQLITE_FULL:
        return StoreFullError(doing=doing, path=str(path), code=errno.ENOSPC)
    if code is not None and code & 0xFF == _SQLITE_BUSY:
        # "database is locked" alone left a person with nothing to look for, or to do.
        return StoreError(
            f"{doing}: the database stayed locked for {BUSY_SECONDS:g} s by another connection's write "
            "transaction (a program holding one open, or a process stopped in the middle of one), so "
            "nothing of this write was recorded. End that transaction or stop that process, then try "
            "again (a run resumes from what it recorded)."
        )
    # Turned read-only under this open store: SQLite says "disk I/O error".
    return turned_read_only(doing, path, path.absolute().parent) or StoreError(f"{doing}: {e}")


def _retry_locked(statement: Callable[[], object], within: float = 30.0) -> None:
    """Run ``statement``, again while SQLite says the database is locked: two first opens of a
    new file at once (two worker threads) race to make it WAL, and that change answers
    "database is locked" at once instead of waiting out the connection's busy timeout."""
    deadline = time.monotonic() + within
    while True:
        try:
            statement()
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


_ROOM = 1 << 20
"""Free bytes under which an open's I/O error is taken for a full disk: WAL mode's shared-memory
file alone needs 32 KiB."""


def _no_room(path: Path) -> bool:
    try:
        return shutil.disk_usage(os.path.dirname(os.path.abspath(path))).free < _ROOM
    except OSError:
        return False


def _connect(path: Path) -> sqlite3.Connection:
    try:
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=BUSY_SECONDS)
        _retry_locked(lambda: conn.execute("PRAGMA journal_mode=WAL"))
        _retry_locked(lambda: conn.execute(_SCHEMA))
    except sqlite3.Error as e:
        if getattr(e, "sqlite_errorcode", None) == _SQLITE_FULL:
            raise _write_error(f"cannot open the SQLite store {path}", path, e) from e
        # Before the full disk: a read-only mount often says it has no free bytes, and freeing none would help.
        if mounted_read_only(os.path.dirname(os.path.abspath(path))):
            doing = f"cannot open the SQLite store {path}"
            raise StoreReadOnlyError(doing=doing, path=str(path), why=MOUNTED_READ_ONLY, there=path.is_file()) from e
        if _no_room(path):  # WAL mode makes its shared-memory file on open: a full disk says "disk I/O error"
            raise StoreFullError(
                doing=f"cannot open the SQLite store {path}", path=str(path), code=errno.ENOSPC,
                then="open it again: its runs are all there",
            ) from e
        raise StoreError(
            f"cannot open the SQLite store {path}: {e}. Check that the folder exists and is writable "
            "and that the file is a SQLite database."
        ) from e
    return conn


def _refuse_network_fs(path: Path, mountinfo: str | os.PathLike[str]) -> None:
    fs_type = filesystem_type(path, mountinfo)
    if is_network_file_system(fs_type):
        assert fs_type is not None
        raise NetworkFileSystemError(
            f"the SQLite store {path} is on a network file system ({fs_type}), where SQLite's WAL mode "
            "does not work: its shared-memory index and locks are not shared between clients, so the "
            "database can be corrupted. Keep runs in a JSONL folder there (a path such as 'runs'), use "
            "a PostgreSQL store to share runs between machines, or put the .db file on a local disk. "
            f"If only this one host ever opens it, set {NETWORK_FS_ENV}=1 to open it anyway.",
            path=str(path),
            fs_type=fs_type,
        )


class SqliteStore(ClosingStore):
    """Runs as rows of one SQLite database file."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        allow_network_fs: bool | None = None,
        mountinfo: str | os.PathLike[str] = MOUNTINFO,
    ) -> None:
        """Open (creating if needed) the database at ``path``.

        On a network file system (NFS, SMB/CIFS, Lustre, GPFS, ...) this raises
        ``NetworkFileSystemError`` unless ``allow_network_fs`` (default: ``$NB_DURABLE_SQLITE_NETWORK_FS``
        is 1). ``mountinfo`` is the mount table read to tell (Linux's, by default).
        """
        self.path = Path(path)
        self.url = f"sqlite:///{path}"
        self.key = f"sqlite:{os.path.realpath(self.path)}"
        if allow_network_fs is None:
            allow_network_fs = os.environ.get(NETWORK_FS_ENV, "").strip().lower() in ("1", "true", "yes")
        if not allow_network_fs:
            _refuse_network_fs(self.path, mountinfo)
        self.read_only = read_only_why(self.path)
        """Why the store can only be read ('' if it can be written): its writes are refused, saying so."""
        self._reader = Followed(self.path, self._open_reader)
        """The reading connection, to the file at the path now (a worker's reads for days)."""

    def _open_reader(self) -> sqlite3.Connection:
        if self.read_only:
            return connect_read_only(self.path, BUSY_SECONDS)
        # None there, and none can be made there: read as a store with no runs, made in memory.
        absent = not self.path.exists() and mounted_read_only(self.path.absolute().parent)
        conn = _connect(Path(":memory:") if absent else self.path)
        try:
            # The reading connection writes only claims, hints a crash may lose: no fsync per claim.
            conn.execute("PRAGMA synchronous=NORMAL")
            sqlite_index.migrate(conn)
        except sqlite3.Error as e:
            conn.close()
            raise _write_error(f"cannot add the run index to the SQLite store {self.path}", self.path, e) from e
        return conn

    def location(self, run_id: str) -> str:
        return f"{self.path} run {run_id}"

    def run_ids(self) -> list[str]:
        rows = self._reader().execute("SELECT DISTINCT run_id FROM nb_durable_events ORDER BY run_id")
        return [r[0] for r in rows]

    def load(self, run_id: str) -> StoredLog:
        check_run_id(run_id)
        lines = _lines(self._reader(), run_id)
        if not lines and not self.path.exists():  # "it has no runs yet" would hide a mistyped store
            where = f"the SQLite store {self.path}"
            raise RunNotFoundError(run_id=run_id, where=where, reason=f"is not in {where}: {not_there('file')}")
        if not lines:
            raise not_found(run_id, f"the SQLite store {self.path}", self.run_ids(), self.url)
        return StoredLog.from_lines(lines, self.location(run_id))

    def _lease_path(self, run_id: str) -> Path:
        # Beside the database's real path: alias.db -> runs.db shares runs.db's leases.
        return lease_path(self.path, ".leases", check_run_id(run_id))

    def holder(self, run_id: str) -> dict[str, Any] | None:
        return FileLease.holder(self._lease_path(run_id))

    def held(self) -> dict[str, dict[str, Any]]:
        """Every run being written now, with its holder (from the lease files)."""
        return FileLease.held_in(lease_path(self.path, ".leases", "x").parent)

    def index_rows(self, run_ids: Sequence[str] | None = None) -> list[IndexRow]:
        """The run index's rows (of ``run_ids``)."""
        return sqlite_index.rows(self._reader(), run_ids)

    def list_rows(self, wanted: RunFilter, held: Mapping[str, str]) -> list[IndexRow]:
        """The rows a listing wants, newest first, one page (``held``: the runs being written, each
        running or waiting)."""
        return sqlite_index.list_rows(self._reader(), wanted, held)

    def column_drift(self) -> dict[str, dict[str, tuple[Any, Any]]]:
        """The runs whose filter columns say other than their rows (``sqlite_index.column_drift``)."""
        return sqlite_index.column_drift(self._reader())

    def claim(
        self, limit: int, *, exclude: Sequence[str] = (), tags: Sequence[str] = (), idle_before: float = float("inf"), hold: float = CLAIM_SECONDS, stop: Callable[[], bool] = lambda: False
    ) -> list[IndexRow]:
        """A worker's next runs, claimed for a moment (``sqlite_index.claim``); free leases only; none
        if ``stop()`` says so while it waits for a write lock held elsewhere."""
        self.check_writable(f"cannot claim runs in {self.path}")
        busy = [*exclude, *self.held()]
        try:
            return sqlite_index.claim(
                self._reader(), limit, exclude=busy, tags=tags, idle_before=idle_before, hold=hold, wait=BUSY_SECONDS, stop=stop
            )
        except sqlite3.Error as e:
            raise _write_error(f"cannot claim runs in {self.path}", self.path, e) from e

    def release(self, run_ids: Sequence[str]) -> None:
        """Give claimed runs back to other workers' claims."""
        self.check_writable(f"cannot release claimed runs in {self.path}")
        try:
            self._reader().execute(
                "UPDATE nb_durable_index SET claimed_until = 0 WHERE run_id IN (SELECT value FROM json_each(?))",
                (json.dumps(list(run_ids)),),
            )
        except sqlite3.Error as e:
            raise _write_error(f"cannot release claimed runs in {self.path}", self.path, e) from e

    def watch(self) -> sqlite_index.WakeWatch:
        """A watch of its own connection for a sleeping worker (``core.index.claim.Wakeups``),
        following the file at the path as the reader does."""

        def connect() -> sqlite3.Connection:
            # mode=rw: a watch opened after the file was deleted never makes an empty one there.
            uri = f"{self.path.absolute().as_uri()}?mode=rw"
            return sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False, timeout=BUSY_SECONDS)

        try:
            return sqlite_index.WakeWatch(Followed(self.path, connect))
        except sqlite3.Error as e:
            raise StoreError(f"cannot watch the SQLite store {self.path} for new runs: {e}") from e

    def limiter(self) -> FileLimiter:
        """Rate limits shared by every process using this file (``core.limiter``)."""
        return FileLimiter(lease_path(self.path, ".leases", "limits").with_suffix(""))

    def check_writable(self, doing: str) -> None:
        """Refuse ``doing`` (``StoreReadOnlyError``) if the store can only be read, now or since it was opened."""
        why, there = self.read_only or read_only_why(self.path), self.path.is_file()
        if not why and not there and mounted_read_only(self.path.absolute().parent):
            why = MOUNTED_READ_ONLY
        if why:
            raise StoreReadOnlyError(doing=doing, path=str(self.path), why=why, there=there)

    def open_writer(self, run_id: str) -> _SqliteWriter:
        doing = f"cannot write run {check_run_id(run_id)!r}"
        self.check_writable(doing)
        if self._reader.file is not None and identity(self.path) is None:
            raise deleted(self.path)  # else its lease would make the folder again, and its connection a file without the index
        lease = file_lease(self._lease_path(run_id), run_id, doing, self.path)
        try:
            conn = _connect(self.path)
            return _SqliteWriter(self, run_id, conn, lease, identity(self.path))
        except BaseException:
            lease.release()
            raise

    def close(self) -> None:
        """Close the reading connection."""
        self._reader.close()


def _lines(conn: sqlite3.Connection, run_id: str) -> list[bytes]:
    rows = conn.execute(
        "SELECT line FROM nb_durable_events WHERE run_id = ? ORDER BY seq", (run_id,)
    )
    return [bytes(r[0]) for r in rows]


class _SqliteWriter:
    def __init__(self, store: SqliteStore, run_id: str, conn: sqlite3.Connection, lease: FileLease, file: tuple[int, int] | None) -> None:
        self._store = store
        self._file = file
        self._run_id = run_id
        self._conn = conn
        self._lease = lease
        self._synchronous = ""
        self._settings_sent: Any = None  # the settings of the last row this writer stored

    def load(self) -> StoredLog:
        return StoredLog.from_lines(_lines(self._conn, self._run_id), self._store.location(self._run_id))

    def put_index(self, row: IndexRow) -> None:
        try:
            sqlite_index.upsert(self._conn, row)
        except sqlite3.Error as e:
            raise _write_error(f"cannot index run {self._run_id!r} in {self._store.path}", self._store.path, e) from e
        self._settings_sent = row.settings

    def mark_asking(self, asking: dict[str, Any] | None) -> None:
        if self._lease is not None:
            self._lease.mark(asking)

    def append(self, lines: Sequence[bytes], first_seq: int, *, sync: bool, index: IndexRow | None = None) -> None:
        slim = index is not None and slim_since(index, self._settings_sent)
        self._insert([(self._run_id, first_seq + i, line[:-1]) for i, line in enumerate(lines)], sync, [index], slim=slim)

    def _insert(
        self, rows: list[tuple[str, int, bytes]], sync: bool, index: Sequence[IndexRow | None], *, slim: bool = False
    ) -> None:
        """Insert the events and upsert the rows in one transaction (``slim``: the first row,
        this run's, without the settings this writer stored with it last)."""
        mode = "FULL" if sync else "NORMAL"
        if mode != self._synchronous:
            self._conn.execute(f"PRAGMA synchronous={mode}")
            self._synchronous = mode
        try:
            self._conn.execute("BEGIN IMMEDIATE")
            self._conn.executemany(
                "INSERT INTO nb_durable_events (run_id, seq, line) VALUES (?, ?, ?)", rows
            )
            for i, row in enumerate(index):
                if row is not None:
                    sqlite_index.upsert(self._conn, row, settings=not (slim and i == 0))
            now = identity(self._store.path)
            if now != self._file:  # committed there, it would be "recorded" in a file nobody can read again
                self._conn.execute("ROLLBACK")
                raise StoreError(f"cannot write run {self._run_id!r}: {deleted(self._store.path, replaced=now is not None)}")
            self._conn.execute("COMMIT")
        except sqlite3.Error as e:
            if self._conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):  # a full disk may have rolled it back already
                    self._conn.execute("ROLLBACK")
            raise _write_error(f"cannot write run {self._run_id!r} to {self._store.path}", self._store.path, e) from e
        if index and index[0] is not None:
            self._settings_sent = index[0].settings

    def append_pair(
        self, lines: Sequence[bytes], first_seq: int, other: _SqliteWriter, other_lines: Sequence[bytes], other_first: int, *,
        sync: bool, index: IndexRow | None = None, other_index: IndexRow | None = None,
    ) -> None:  # fmt: skip
        """Append to this run and to ``other`` (whose lease this process holds), and both index
        rows, in one transaction."""
        rows = [(self._run_id, first_seq + i, line[:-1]) for i, line in enumerate(lines)]
        rows += [(other._run_id, other_first + i, line[:-1]) for i, line in enumerate(other_lines)]
        self._insert(rows, sync, [index, other_index])

    def truncate(self, keep: int) -> None:
        self._conn.execute(
            "DELETE FROM nb_durable_events WHERE run_id = ? AND seq >= ?", (self._run_id, keep)
        )

    def delete(self) -> None:
        try:
            self._conn.execute("PRAGMA synchronous=FULL")
            self._conn.execute("BEGIN IMMEDIATE")
            self._conn.execute("DELETE FROM nb_durable_events WHERE run_id = ?", (self._run_id,))
            self._conn.execute("DELETE FROM nb_durable_index WHERE run_id = ?", (self._run_id,))
            self._conn.execute("COMMIT")
        except sqlite3.Error as e:
            raise _write_error(f"cannot delete run {self._run_id!r} from {self._store.path}", self._store.path, e) from e
        finally:
            self.close()

    def close(self) -> None:
        if self._lease is not None:
            self._conn.close()
            self._lease.release()
            self._lease = None  # type: ignore[assignment]
