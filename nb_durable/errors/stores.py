"""What can go wrong with a store as a whole: it cannot be named, opened, read or written.

Messages are built from structured fields (keyword-only constructors), so a message cannot
drift from the fields a program reads. The whole tree is drawn in ``nb_durable.errors``.
"""

from __future__ import annotations

import errno as _errno
import os
from typing import ClassVar

from .base import NbDurableError, Outcome

__all__ = [
    "NetworkFileSystemError",
    "ServerShortError",
    "StoreAccessError",
    "StoreError",
    "StoreFullError",
    "StoreNameError",
    "StoreNotFoundError",
    "StoreReadOnlyError",
    "StoreShortError",
    "full_disk",
]


class StoreError(NbDurableError):
    """A store cannot be opened, read or written (bad URL, unwritable folder, missing driver)."""

    outcome: ClassVar[Outcome] = "usage"


_FULL = frozenset(
    code for code in (_errno.ENOSPC, getattr(_errno, "EDQUOT", None), _errno.EFBIG) if code is not None
)


def full_disk(error: BaseException) -> int | None:
    """The errno if ``error`` says the disk, a quota or a file size limit is full, else None."""
    code = getattr(error, "errno", None)
    return code if isinstance(error, OSError) and code in _FULL else None


class StoreNameError(StoreError):
    """A store's path or URL cannot name a store (an unknown scheme, a URL without its '//', one
    psycopg refuses, a path of the wrong kind: a folder named as a SQLite file, a file as a runs
    folder, a PostgreSQL database or schema the server does not have): no retry opens it, so a
    worker says so and exits rather than waiting for it."""


class StoreAccessError(StoreError):
    """The server refused the store's user for a mistake in its setup: a role it does not have, a
    wrong or missing password, no right to use the schema or create the tables in it. No retry
    opens it (a person must create the role, fix the password, or grant the rights), so a worker
    says so and exits rather than waiting for it, as for ``StoreNameError``."""


class StoreNotFoundError(StoreError):
    """A reader named a store that is not there (a SQLite file or runs folder missing, a PostgreSQL
    schema without nb_durable's tables), most often a mistyped name; reading made nothing there."""


class StoreShortError(StoreError):
    """The store could not take a write for now (its disk is full, its server short of capacity)
    and the write was undone: nothing recorded is lost. A step's result refused so is kept by its
    log (``core.stepping``), which records it when the step is run again there."""

    outcome = "failed"

    def said_as(self, doing: str, then: str) -> StoreShortError:
        """The same refusal, of ``doing``, with ``then`` what to do once the store has room."""
        raise NotImplementedError


class StoreFullError(StoreShortError):
    """The disk (or quota) holding a store, or a file written from it (an export), is full; the
    write was undone, nothing recorded is lost."""

    def __init__(
        self,
        *,
        doing: str,
        path: str,
        code: int,
        then: str = "go on: the same log keeps writing, or resume the run",
        elsewhere: str = "point the store at another disk",
    ) -> None:
        super().__init__(
            f"{doing}: the file system holding it is full ({os.strerror(code)}). Nothing recorded "
            f"was lost and the write that failed was undone. Free some space (or raise the quota, or "
            f"{elsewhere}), then {then}."
        )
        self.path = path
        self.errno = code

    def said_as(self, doing: str, then: str) -> StoreFullError:
        return StoreFullError(doing=f"{doing} in {self.path}", path=self.path, code=self.errno, then=then)


class ServerShortError(StoreShortError):
    """A database server refused a write for want of what other sessions hold (connections, its
    lock table: ``.lacks``) for longer than the store waits for them to end; the write was undone."""

    def __init__(
        self, *, doing: str, store: str, lacks: str, said: str, advice: str, seconds: float,
        then: str = "write again with the same log, or resume the run",
    ) -> None:  # fmt: skip
        super().__init__(
            f"{doing} in {store}: its server {lacks} ({said}), and still was after {seconds:g} s of trying "
            f"again. Nothing recorded was lost and the write that failed was undone. {advice}. To go on, {then}."
        )
        self.store = store
        self.lacks = lacks
        self.said = said
        self.advice = advice
        self.seconds = seconds

    def said_as(self, doing: str, then: str) -> ServerShortError:
        return ServerShortError(
            doing=doing, store=self.store, lacks=self.lacks, said=self.said, advice=self.advice, seconds=self.seconds, then=then
        )


class NetworkFileSystemError(StoreError):
    """A SQLite store on a network file system, where WAL mode's shared memory does not work."""

    def __init__(self, message: str, *, path: str, fs_type: str) -> None:
        super().__init__(message)
        self.path = path
        self.fs_type = fs_type


class StoreReadOnlyError(StoreError):
    """A write to a store that can only be read (``.why``: a read-only mount, a file or folder
    this process may not write); nothing was written, and its runs can still be read.

    ``.there``: False when the store does not exist yet, and cannot be made where it is named.
    ``.destination``: the store is where runs were to go (a copy's, a fork's ``to``), which
    copying it elsewhere would not help: another destination would."""

    def __init__(self, *, doing: str, path: str, why: str, there: bool = True, destination: bool = False) -> None:
        state = "can only be read" if there else "does not exist, and cannot be made there"
        if destination:
            then = ". Choose a destination on a disk you can write, or make that one writable."
        elif there:
            then = (
                "; its runs can still be listed, shown and exported. To go on with them, copy the store to a "
                "disk you can write (nb-durable copy) and point the store there, or make it writable."
            )
        else:
            then = ". Point the store at a disk you can write, or make that one writable."
        super().__init__(f"{doing}: the store {path} {state} ({why}), so nothing was written{then}")
        self.path = path
        self.why = why
        self.there = there
        self.destination = destination

    def said_as(self, doing: str, *, destination: bool = False) -> StoreReadOnlyError:
        """The same refusal, of ``doing`` (``destination``: of a store runs were to go to)."""
        return StoreReadOnlyError(
            doing=doing, path=self.path, why=self.why, there=self.there, destination=destination or self.destination
        )
