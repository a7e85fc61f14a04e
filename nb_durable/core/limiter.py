"""Limits many processes share through their store: call slots, a shared pause, a token window.

A limiter keeps three facts per key (an endpoint, in the agent's use): who holds each of its N
call slots, until when nobody may call ("do not call before T", set by a 429's retry-after),
and how many tokens were spent in the current one-minute window. File stores (JSONL, SQLite)
keep them in ``<leases folder>/limits/``: a slot is an OS lock on ``<key>.slot-<i>`` (the lock
that guards runs, ``lease.LOCKS``), so a process that dies frees its slot; the pause and the
window are one small JSON file read and rewritten under an exclusive lock on ``<key>.state``.
The PostgreSQL store keeps them in its database (``stores.postgres.limiter``): a slot is a
session advisory lock, the pause and the window a row changed by one upsert. The memory store
keeps them in the process. Every backend implements the one ``Limiter`` protocol, and its
window follows the one rule of ``_window``. Everything is advisory: a process that does not
ask the limiter is not limited, and a token count is whatever the caller estimated.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ..errors import StoreError
from .lease import LOCKS, Locks

__all__ = [
    "WINDOW",
    "FileLimiter",
    "Limiter",
    "MemoryLimiter",
    "Slot",
    "acquire_slot",
    "limit_key",
    "limiter_of",
]

WINDOW = 60.0
"""Seconds of one token window."""

_POLL = 0.05  # seconds between two tries for a taken slot


def limit_key(*parts: str) -> str:
    """A key safe in a file name and a database row, naming ``parts`` without revealing them."""
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]


class Slot(Protocol):
    """A held call slot; ``release()`` (or the holder's death) frees it."""

    def release(self) -> None: ...


class Limiter(Protocol):
    """One store's shared limits."""

    def try_slot(self, key: str, slot: int) -> Slot | None:
        """Take slot number ``slot`` of ``key`` without waiting, or None if it is held."""
        ...

    def pause(self, key: str, until: float) -> None:
        """Nobody calls ``key`` before ``until`` (epoch seconds); a later pause wins."""
        ...

    def paused_until(self, key: str) -> float:
        """The epoch second before which nobody may call ``key`` (0 if none is set)."""
        ...

    def take_tokens(self, key: str, tokens: int, per_minute: int, now: float) -> float:
        """Spend ``tokens`` of ``key``'s window and return 0, or return the seconds until the
        window has room (nothing spent). A request alone in an empty window always fits."""
        ...


def _window(state: dict[str, Any], tokens: int, per_minute: int, now: float) -> float:
    """The one rule of the token window, on a state dict every limiter keeps the same way."""
    start = float(state.get("window_start", 0.0))
    if now >= start + WINDOW:
        state["window_start"], state["tokens"] = now, 0
        start = now
    spent = int(state.get("tokens", 0))
    if spent and spent + tokens > per_minute:
        return start + WINDOW - now
    state["tokens"] = spent + tokens
    return 0.0


def acquire_slot(
    limiter: Limiter,
    key: str,
    limit: int,
    *,
    timeout: float,
    on_wait: Callable[[], None] = lambda: None,
    sleep: Callable[[float], None] = time.sleep,
) -> Slot | None:
    """Take any free slot of ``key`` (``limit`` of them), waiting up to ``timeout`` seconds;
    ``on_wait`` hears once that all were taken. None if none came free in time."""
    deadline = time.monotonic() + timeout
    told = False
    while True:
        for index in range(limit):
            slot = limiter.try_slot(key, index)
            if slot is not None:
                return slot
        if time.monotonic() >= deadline:
            return None
        if not told:
            told = True
            on_wait()
        sleep(_POLL)


class _FileSlot:
    def __init__(self, fd: int) -> None:
        self._fd: int | None = fd

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing drops the lock; the file stays for the next taker


class FileLimiter:
    """Limits kept in a folder, under OS file locks the OS drops when a holder dies."""

    def __init__(self, folder: Path, locks: Locks = LOCKS) -> None:
        self.folder = folder
        self._locks = locks

    def _open(self, name: str) -> int:
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            return os.open(self.folder / name, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        except OSError as e:
            raise StoreError(f"cannot open the shared limits file {self.folder / name}: {e.strerror or e}") from e

    def try_slot(self, key: str, slot: int) -> Slot | None:
        fd = self._open(f"{key}.slot-{slot}")
        try:
            taken = self._locks.try_lock(fd)
        except OSError:
            os.close(fd)
            raise
        if not taken:
            os.close(fd)
            return None
        return _FileSlot(fd)

    @contextlib.contextmanager
    def _state(self, key: str) -> Iterator[dict[str, Any]]:
        """The key's state, locked for a read-modify-write; written back on exit."""
        fd = self._open(f"{key}.state")
        try:
            while not self._locks.try_lock(fd):
                time.sleep(0.002)  # holders keep it for one read and one write
            os.lseek(fd, 0, os.SEEK_SET)
            raw = os.read(fd, 4096)
            try:
                state = json.loads(raw) if raw else {}
            except ValueError:
                state = {}  # a torn write: the limits start afresh, which only loosens them
            before = dict(state)
            yield state
            if state != before:
                data = json.dumps(state).encode()
                os.lseek(fd, 0, os.SEEK_SET)
                os.ftruncate(fd, 0)
                os.write(fd, data)
        finally:
            os.close(fd)

    def pause(self, key: str, until: float) -> None:
        with self._state(key) as state:
            state["pause_until"] = max(float(state.get("pause_until", 0.0)), until)

    def paused_until(self, key: str) -> float:
        with self._state(key) as state:
            return float(state.get("pause_until", 0.0))

    def take_tokens(self, key: str, tokens: int, per_minute: int, now: float) -> float:
        with self._state(key) as state:
            return _window(state, tokens, per_minute, now)


@dataclass
class _MemorySlot:
    held: set[tuple[str, int]]
    name: tuple[str, int]
    lock: threading.Lock

    def release(self) -> None:
        with self.lock:
            self.held.discard(self.name)


class MemoryLimiter:
    """Limits shared by the threads of this process (the memory store's)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: set[tuple[str, int]] = set()
        self._states: dict[str, dict[str, Any]] = {}

    def try_slot(self, key: str, slot: int) -> Slot | None:
        with self._lock:
            if (key, slot) in self._held:
                return None
            self._held.add((key, slot))
        return _MemorySlot(self._held, (key, slot), self._lock)

    def pause(self, key: str, until: float) -> None:
        with self._lock:
            state = self._states.setdefault(key, {})
            state["pause_until"] = max(float(state.get("pause_until", 0.0)), until)

    def paused_until(self, key: str) -> float:
        with self._lock:
            return float(self._states.get(key, {}).get("pause_until", 0.0))

    def take_tokens(self, key: str, tokens: int, per_minute: int, now: float) -> float:
        with self._lock:
            return _window(self._states.setdefault(key, {}), tokens, per_minute, now)


def limiter_of(store: object) -> Limiter:
    """The shared limiter of ``store`` (its ``limiter()``), or a StoreError saying it has none."""
    make = getattr(store, "limiter", None)
    if make is None:
        raise StoreError(
            f"the store {getattr(store, 'url', store)} cannot hold shared rate limits: use a "
            "PostgreSQL, SQLite or JSONL store (or the memory store in one process), or run without "
            "--max-concurrent-calls and --tokens-per-minute"
        )
    limiter: Limiter = make()
    return limiter
