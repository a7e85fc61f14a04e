"""The one interface every store implements, and what all stores share.

A store keeps, per run, an ordered list of event lines (bytes, as ``events.encode_event``
wrote them) and grants one writer at a time a lease on a run. It knows nothing of event
kinds, steps or replay: those live in ``history`` and ``log``, once for every backend, so a
backend holds only what differs (where bytes go, how they are synced, how the lease is held).
Every backend passes the same contract suite (``nb_durable.testing.check_store``).
Every built-in backend also keeps the run index (``core.index.rows.IndexedStore``: ``index_rows``,
``held``, and a writer's ``append(..., index=row)``); a store without one is read log by log.

A store may hold connections: ``close()`` releases them, and a store is a context manager.
Whoever opens a store closes it; code handed a ``Store`` never closes it (``opened``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from ...errors import InvalidRunIdError, RunNotFoundError, StoreError, StoreReadOnlyError
from ..codec import StoredLog
from ..lease import FileLease
from .mounts import turned_read_only

if TYPE_CHECKING:
    from ..index.rows import IndexRow

__all__ = [
    "ClosingStore", "Store", "StoreWriter", "StoredLog", "can_name_a_run", "check_run_id", "check_writable", "file_lease", "make_there", "not_found",
    "not_there", "plainly",
]  # fmt: skip


_S = TypeVar("_S", bound="ClosingStore")
RUN_ID_MAX = 128
"""The most characters a run id may have."""
_RUN_ID = re.compile(rf"[A-Za-z0-9][A-Za-z0-9._-]{{0,{RUN_ID_MAX - 1}}}")


def can_name_a_run(text: str) -> bool:
    """Whether ``text`` is a run id (``check_run_id`` says why not)."""
    return bool(_RUN_ID.fullmatch(text)) and ".." not in text


def check_run_id(run_id: object) -> str:
    """Return ``run_id`` if it can name a run (a file name on every OS), else raise."""
    if not isinstance(run_id, str):
        raise InvalidRunIdError(
            f"a run id must be a string, not {type(run_id).__name__}", run_id=repr(run_id)
        )
    if not can_name_a_run(run_id):
        raise InvalidRunIdError(
            f"{run_id!r} cannot name a run: use 1 to {RUN_ID_MAX} letters, digits, '.', '_' or '-', "
            "starting with a letter or digit, without '..' or path separators "
            "(for example 'fix-tests-2')",
            run_id=run_id,
        )
    return run_id


def plainly(path: str | os.PathLike[str]) -> str:
    """A folder or file as a message names it: as given, and where that is when it is relative."""
    return str(path) if os.path.isabs(path) else f"{path} ({os.path.abspath(path)})"


def not_there(what: str) -> str:
    """Why a store's folder or file is not found: its name is mistyped, most often."""
    return f"that {what} does not exist (is the store's name right?)"


def not_found(run_id: str, where: str, known: Sequence[str], store: str = "") -> RunNotFoundError:
    """The error for an unknown run in ``where`` (the store ``store``), naming a few runs that do exist."""
    return RunNotFoundError(run_id=run_id, where=where, known=known, store=store)


class StoreWriter(Protocol):
    """A store's handle on one run, holding its lease until ``close()``."""

    def load(self) -> StoredLog:
        """The run's lines as stored now (empty for a new run)."""
        ...

    def append(self, lines: Sequence[bytes], first_seq: int, *, sync: bool, index: IndexRow | None = None) -> None:
        """Store whole lines (each ending in a newline); ``sync`` waits for stable storage.

        ``index`` is the run's index row once these lines are stored: a store that keeps the
        run index writes it in the same transaction (``core.index.rows``)."""
        ...

    def put_index(self, row: IndexRow) -> None:
        """Write the run's index row alone (a row found stale when the run was opened)."""
        ...

    def truncate(self, keep: int) -> None:
        """Drop every line after the first ``keep`` (a torn tail found on load)."""
        ...

    def mark_asking(self, asking: dict[str, Any] | None) -> None:
        """Mark the lease with what its holder asks a person (``core.holders``), or clear the mark
        (None). ``Store.holder`` and ``held`` then give it under ``asking``, in every process; it
        goes when the lease does, whoever ends it (close, or the holder's death). Best effort: a
        mark that cannot be written leaves readers saying ``running``, and never fails the run
        (a shared server's shortage is waited out as for a write, then said as a warning)."""
        ...

    def delete(self) -> None:
        """Remove the run (every line) while holding its lease, then release it: retention.

        Deleting under the lease is what keeps a delete from racing a writer: nobody else can
        be writing the run, and a writer that takes the lease afterwards starts a new run."""
        ...

    def close(self) -> None:
        """Release the lease; safe to call twice."""
        ...


@runtime_checkable
class Store(Protocol):
    """Where runs live: a folder of JSONL files, a SQLite file, memory, a database server."""

    url: str
    """How a user names this store (a path or a URL), for messages."""

    key: str
    """Identity of the underlying storage, equal for two handles on the same runs."""

    def run_ids(self) -> list[str]:
        """Every run id the store holds, sorted."""
        ...

    def load(self, run_id: str) -> StoredLog:
        """A run's lines, read without a lease; RunNotFoundError if there is no such run."""
        ...

    def open_writer(self, run_id: str) -> StoreWriter:
        """Take the run's lease (RunLockedError if another process has it) and a handle."""
        ...

    def holder(self, run_id: str) -> dict[str, Any] | None:
        """The live holder of the run's lease, if any (pid, host, since; ``asking`` while it asks)."""
        ...

    def location(self, run_id: str) -> str:
        """Where the run is kept, in words for messages ('runs/fix.jsonl')."""
        ...

    def close(self) -> None:
        """Release the store's connections; open writers keep theirs. Safe to call twice."""
        ...

    def __enter__(self) -> Store: ...

    def __exit__(self, *exc: object) -> None: ...


def check_writable(store: object, doing: str, *, destination: bool = False) -> None:
    """Refuse ``doing`` (``StoreReadOnlyError``) if ``store`` knows it can only be read (the SQLite
    and JSONL stores on read-only media); any other finds out at its first write. ``destination``:
    the store is where runs are to go (a copy's), so another destination is the way on."""
    check = getattr(store, "check_writable", None)
    if callable(check):
        try:
            check(doing)
        except StoreReadOnlyError as e:
            raise e.said_as(doing, destination=destination) from None


def make_there(store: object) -> None:
    """Make ``store`` where it is named if it is not there yet: a JSONL folder (the other stores are made as they open)."""
    make = getattr(store, "make", None)
    if callable(make):
        make()


def file_lease(path: Path, run_id: str, doing: str, store: str | os.PathLike[str]) -> FileLease:
    """The run's lease file taken (``FileLease.acquire``) for ``doing`` in ``store``. One that cannot
    be made because the store's file system turned read-only after its check passed (ext4's
    ``emergency_ro`` shows only to a write) is ``StoreReadOnlyError``, as any later write's is."""
    try:
        return FileLease.acquire(path, run_id)
    except StoreError as e:
        refused = turned_read_only(doing, store, path.parent.parent)  # the folder holding the lease folder
        if refused is None:
            raise
        raise refused from e


class ClosingStore:
    """What every backend shares: it is a context manager that closes itself on exit."""

    def close(self) -> None:
        """Nothing to release (backends with connections override this)."""

    def __enter__(self: _S) -> _S:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
