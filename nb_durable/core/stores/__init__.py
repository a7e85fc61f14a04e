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

With no store given, ``NB_DURABLE_STORE`` from the environment is used if set.
"""

from __future__ import annotations

import os
from pathlib import Path

from ...errors import StoreError
from .base import Store, StoreWriter, check_run_id
from .jsonl import JsonlStore
from .memory import MemoryStore, memory_store
from .sqlite import SqliteStore

__all__ = [
    "DEFAULT_ROOT",
    "JsonlStore",
    "MemoryStore",
    "SqliteStore",
    "Store",
    "StoreWriter",
    "check_run_id",
    "open_store",
]

DEFAULT_ROOT = "runs"

def open_store(spec: str | os.PathLike[str] | Store | None = None) -> Store:
    """The store a path, URL or Store names; None means $NB_DURABLE_STORE, else ``runs``."""
    if spec is None:
        spec = os.environ.get("NB_DURABLE_STORE") or DEFAULT_ROOT
    if isinstance(spec, os.PathLike):
        return _by_suffix(Path(spec))
    if not isinstance(spec, str):
        # Checked last: isinstance against a runtime Protocol costs more than opening a log.
        if isinstance(spec, Store):
            return spec
        raise StoreError(f"a store is a path, a URL or a Store, not {type(spec).__name__}")
    text = spec.strip()
    if not text:
        raise StoreError("the store is empty: pass a folder such as 'runs' or a URL such as 'sqlite:///runs.db'")
    scheme, sep, rest = text.partition("://")
    if not sep:
        return _by_suffix(Path(text))
    scheme = scheme.lower()
    if scheme == "memory":
        return memory_store(rest)
    if scheme in ("sqlite", "sqlite3"):
        path = rest[1:] if rest.startswith("/") else rest
        if not path:
            raise StoreError(f"{spec!r} names no file: write sqlite:///runs.db (or sqlite:////abs/runs.db)")
        return SqliteStore(path)
    if scheme in ("postgresql", "postgres"):
        return _postgres(text)
    if scheme.startswith("postgres"):
        raise StoreError(
            f"unknown store scheme {scheme + '://'!r}: write postgresql://user@host:5432/database "
            "(nb_durable talks to PostgreSQL through psycopg 3 itself; no +driver part)"
        )
    if scheme in ("jsonl", "file"):
        if not rest:
            raise StoreError(f"{spec!r} names no folder: write jsonl:///abs/folder, or just the folder path")
        return JsonlStore(rest)
    raise StoreError(
        f"unknown store {spec!r}: use a folder path (JSONL), sqlite:///file.db, "
        "postgresql://user@host/database, or memory://name"
    )


def _postgres(url: str) -> Store:
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
    return PostgresStore(url)


def _by_suffix(path: Path) -> Store:
    if path.suffix.lower() in (".db", ".sqlite", ".sqlite3"):
        return SqliteStore(path)
    if path.exists() and path.is_file():
        raise StoreError(
            f"{path} is a file, not a runs folder: pass a folder for JSONL runs, "
            "or a .db file for SQLite"
        )
    return JsonlStore(path)
