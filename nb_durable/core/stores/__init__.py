"""Stores, picked by a path or a URL.

=============================  ==========================================================
``runs`` or any folder path    JSONL, one file per run (the default: ``runs``)
``something.db`` / ``.sqlite``  SQLite, many runs in one file
``sqlite:///runs.db``          SQLite (``sqlite:////abs/path.db`` for an absolute path)
``jsonl:///abs/folder``        JSONL, spelled as a URL
``memory://`` / ``memory://x``  this process's memory (named stores are shared)
``postgresql://u@host/db``     PostgreSQL, shared by many machines (``pip install
                               'nb-durable[postgres]'``; ``postgres://`` works too)
=============================  ==========================================================

A path that starts with ``~`` is in the home folder, as in a shell. With no store given,
``NB_DURABLE_STORE`` from the environment is used if set. Each backend
is imported when a store of its kind is opened, so naming a folder never loads sqlite3.

Whoever opens a store closes it: ``opened(spec)`` opens what a spec names and closes it on
exit, but leaves a ``Store`` it was handed open for its owner. A front end (a magic, a CLI
command) opens the store once and hands the ``Store`` down.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from ..._lazy import exports as _exports
from ...errors import StoreError, StoreNameError, StoreNotFoundError
from .base import Store, StoreWriter, check_run_id, check_writable, make_there, not_there, plainly

if TYPE_CHECKING:
    from .jsonl import JsonlStore as JsonlStore
    from .memory import MemoryStore as MemoryStore
    from .sqlite import SqliteStore as SqliteStore

__all__ = [
    "DEFAULT_ROOT",
    "DEFAULT_STORE_SAID",
    "ENV_STORE",
    "JsonlStore",
    "MemoryStore",
    "SqliteStore",
    "Store",
    "StoreSpec",
    "StoreWriter",
    "check_run_id",
    "check_writable",
    "default_store",
    "make_there",
    "named_store",
    "open_store",
    "opened",
    "opened_to_read",
    "password_left_out",
    "shown_store",
    "store_kind",
]

DEFAULT_ROOT = "runs"
ENV_STORE = "NB_DURABLE_STORE"
DEFAULT_STORE_SAID = f"${ENV_STORE} or {DEFAULT_ROOT}"
"""Which store is used when none is named, as help text says it."""

StoreSpec = str | os.PathLike[str] | Store | None
"""What names a store: a folder, a file, a URL, a ``Store``, or None for the default."""

# The backends' classes load on first use, as the package's names do (``nb_durable._lazy``).
_BACKENDS, __getattr__, _ = _exports(__name__)


@contextmanager
def opened(spec: StoreSpec = None, *, existing: bool = False) -> Iterator[Store]:
    """The store ``spec`` names, closed on exit if this call opened it (``existing``: as ``open_store``)."""
    store = open_store(spec, existing=existing)
    try:
        yield store
    finally:
        if store is not spec:
            store.close()


@contextmanager
def opened_to_read(spec: StoreSpec = None) -> Iterator[Store | None]:
    """The store ``spec`` names, opened to read: None if it is not there. Reading makes nothing (a
    mistyped SQLite file, folder or schema would be left made and empty)."""
    try:
        store = open_store(spec, existing=True)
    except StoreNotFoundError:  # a Store given is there: only a name can be missing
        yield None
        return
    try:
        yield store
    finally:
        if store is not spec:
            store.close()


def named_store(spec: StoreSpec = None) -> str:
    """The store ``spec`` names (the default if none), as messages show it (no password)."""
    return shown_store(os.fspath(spec) if isinstance(spec, (str, os.PathLike)) else default_store())


def default_store() -> str:
    """The store used when none is named: ``$NB_DURABLE_STORE``, else ``runs``."""
    # Blank is unset, as for every NB_DURABLE_* setting: refused, it named a --store nobody gave.
    return os.environ.get(ENV_STORE, "").strip() or DEFAULT_ROOT


def shown_store(spec: str) -> str:
    """A store as it was named, fit for messages: a PostgreSQL URL without its password."""
    if not spec.strip().lower().startswith("postgres"):
        return spec
    # Imported here: the postgres package loads psycopg, which no other store needs.
    from .postgres.urls import safe_url

    return safe_url(spec.strip())


def store_kind(spec: str) -> str:
    """The kind of store ``spec`` names, as ``open_store`` picks it, without opening it:
    postgresql, sqlite, memory or jsonl (a name that names no store reads as jsonl here)."""
    text = spec.strip()
    scheme, sep, _ = text.partition("://")
    if not sep:
        return _path_kind(text)
    scheme = scheme.lower()
    return "postgresql" if scheme.startswith("postgres") else _KINDS.get(scheme, "jsonl")


def password_left_out(*stores: str | None) -> str:
    """What a message adds when a command it prints names one of ``stores`` without its password
    (``shown_store``), else '': as printed, that command could not log in. The one wording for
    every front end's commands (the CLI's hints, ``%agent_runs``'s next page)."""
    if not any(store and shown_store(store.strip()) != store.strip() for store in stores):
        return ""
    return (
        " (the store's password is left out of that command: set PGPASSWORD or put the password in "
        f"~/.pgpass before typing it, or give the whole URL in {ENV_STORE} and leave out --store)"
    )


def open_store(spec: StoreSpec = None, *, existing: bool = False) -> Store:
    """The store a path, URL or Store names; None means the default store (``default_store``).

    ``existing``: a SQLite file, a named folder or a PostgreSQL schema without nb_durable's
    tables that is not there is an error (``StoreError``), not an empty store: what a reader
    asks for, since a mistyped name would list nothing, and SQLite would create the file (and
    PostgreSQL the tables). The default folder may be missing: it has no runs yet.
    """
    folder_needed = existing and spec is not None
    if spec is None:
        spec = default_store()
    if isinstance(spec, os.PathLike):
        return _by_suffix(spec, existing, folder_needed)
    if not isinstance(spec, str):
        # Checked last: isinstance against a runtime Protocol costs more than opening a log.
        if isinstance(spec, Store):
            return spec
        raise StoreNameError(f"a store is a path, a URL or a Store, not {type(spec).__name__}")
    text = spec.strip()
    if not text:
        raise StoreNameError("the store is empty: pass a folder such as 'runs' or a URL such as 'sqlite:///runs.db'")
    scheme, sep, rest = text.partition("://")
    if not sep:
        named, colon, after = text.partition(":")
        if colon and named.lower() in _KINDS:
            # Taken as a path, 'memory:x' or 'sqlite:runs.db' became a folder or file of that name.
            scheme = named.lower()
            path = ("/" if _KINDS[scheme] in ("sqlite", "jsonl") else "") + (after or "...")
            raise StoreNameError(
                f"{spec!r} is a store URL without its '//': write {scheme}://{path} "
                "(sqlite:///runs.db, memory://name, postgresql://user@host/database), or a plain path"
            )
        return _by_suffix(text, existing, folder_needed)
    scheme = scheme.lower()
    kind = _KINDS.get(scheme)
    if kind == "memory":
        from .memory import memory_store

        return memory_store(rest)
    if kind == "sqlite":
        path = rest[1:] if rest.startswith("/") else rest
        if not path:
            raise StoreNameError(f"{spec!r} names no file: write sqlite:///runs.db (or sqlite:////abs/runs.db)")
        return _sqlite(os.path.expanduser(path), existing)
    if kind == "postgresql":
        return _postgres(text, existing)
    if scheme.startswith("postgres"):
        raise StoreNameError(
            f"unknown store scheme {scheme + '://'!r}: write postgresql://user@host:5432/database "
            "(nb_durable talks to PostgreSQL through psycopg 3 itself; no +driver part)"
        )
    if kind == "jsonl":
        if not rest:
            raise StoreNameError(f"{spec!r} names no folder: write jsonl:///abs/folder, or just the folder path")
        # jsonl:///~/runs, written as sqlite:///~/runs.db is: no one means a folder '~' at the root.
        return _jsonl(os.path.expanduser(rest[1:] if rest.startswith("/~") else rest), folder_needed)
    raise StoreNameError(
        f"unknown store {spec!r}: use a folder path (JSONL), sqlite:///file.db, "
        "postgresql://user@host/database, or memory://name"
    )


_KINDS = {
    "memory": "memory", "sqlite": "sqlite", "sqlite3": "sqlite", "postgresql": "postgresql", "postgres": "postgresql",
    "jsonl": "jsonl", "file": "jsonl",
}  # fmt: skip
"""The schemes a store URL may have, and the kind of store each names (``open_store``,
``store_kind``): a path that starts with one of them and a colon is a typo."""
_SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")
"""A path ending so names a SQLite file; any other, a JSONL folder."""


def _path_kind(path: str) -> str:
    """The kind of store a plain path names: sqlite by its ending, else jsonl."""
    return "sqlite" if os.path.splitext(path)[1].lower() in _SQLITE_SUFFIXES else "jsonl"


def _postgres(url: str, existing: bool = False) -> Store:
    # Imported here: psycopg is an optional extra, and a store of another kind never needs it.
    try:
        from .postgres import PostgresStore
    except ModuleNotFoundError as e:
        if (e.name or "").split(".")[0] != "psycopg":
            raise
        raise StoreError(
            "the PostgreSQL store needs psycopg 3, which is not installed: "
            "pip install 'nb-durable[postgres]'"
        ) from None
    return PostgresStore(url, existing=existing)


def _sqlite(path: str | os.PathLike[str], existing: bool = False) -> Store:
    from .sqlite import SqliteStore

    if os.path.isdir(path):  # else 'does not exist' to a reader, and SQLite's 'unable to open database file' to a writer
        raise StoreNameError(
            f"{plainly(path)} is a folder, not a SQLite file: name a .db file (sqlite:///runs.db), "
            "or the folder itself as jsonl:///folder for JSONL runs"
        )
    if existing and os.fspath(path) != ":memory:" and not os.path.isfile(path):
        raise StoreNotFoundError(f"there is no store at the SQLite file {plainly(path)}: {not_there('file')}")
    return SqliteStore(path)


def _jsonl(path: str | os.PathLike[str], existing: bool = False) -> Store:
    from .jsonl import JsonlStore

    if os.path.isfile(path):  # as jsonl:///file too: else 'does not exist', or every run's 'Not a directory'
        raise StoreNameError(
            f"{path} is a file, not a runs folder: pass a folder for JSONL runs, "
            "or a .db file for SQLite"
        )
    if existing and not os.path.isdir(path):
        raise StoreNotFoundError(f"there is no store at the folder {plainly(path)}: {not_there('folder')}")
    return JsonlStore(path)


def _by_suffix(path: str | os.PathLike[str], existing: bool = False, folder_needed: bool = False) -> Store:
    # '~/runs' is the home folder's, as in a shell: taken as it is, it made a folder named '~'
    # where the process ran (one 'rm -rf ~' away from the home folder itself).
    path = os.path.expanduser(path)
    if _path_kind(path) == "sqlite":
        return _sqlite(path, existing)
    return _jsonl(path, folder_needed)
