"""Limits many processes share through their store: call slots, a shared pause, a token window,
and a circuit breaker.

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

The circuit breaker of a key follows the one rule of ``Breaker``, on a small state each backend
changes atomically (``breaker_state``: the file stores' ``<key>.breaker`` under its lock, a row
of ``nb_durable_breakers`` locked for one transaction): ``failures`` within ``WINDOW`` seconds
open it for every process on the store for ``cooldown`` seconds; then one caller at a time
is let through as the probe (a probe that never reports back, its process dead, expires after
another cool-down); the probe's success closes it, its failure opens it again.

Times are the store's clock, never the caller's, so processes whose clocks disagree still
share one pause and one window: PostgreSQL's ``clock_timestamp()``; for a file store, the time
the file system stamps on the state file as it is touched under its lock (on NFS the file
server's, which sets it itself); the memory store's process clock. Callers pass and receive
durations (``pause(key, seconds)``, ``paused_for``, the wait ``take_tokens`` returns). What a
clock can still do: the store's own clock jumping (an NTP step) shifts the current pause and
window by the jump, and a window that starts in the future (the clock stepped back, or a test
passed its own ``now``) is taken to start now, so no wait for the window is ever longer than
one. ``now=`` on each method replaces the store's clock (tests of the rule use it).
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
from typing import Any, Protocol, TypeVar

from ..errors import StoreError
from .lease import LOCKS, Locks

__all__ = [
    "WINDOW",
    "Breaker",
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
    """One store's shared limits; every time is the store's clock unless ``now`` is given."""

    def try_slot(self, key: str, slot: int) -> Slot | None:
        """Take slot number ``slot`` of ``key`` without waiting, or None if it is held."""
        ...

    def pause(self, key: str, seconds: float, now: float | None = None) -> None:
        """Nobody calls ``key`` for ``seconds`` from now; a pause that ends later wins."""
        ...

    def paused_for(self, key: str, now: float | None = None) -> float:
        """The seconds before anybody may call ``key`` (0 if it is not paused)."""
        ...

    def take_tokens(self, key: str, tokens: int, per_minute: int, now: float | None = None) -> float:
        """Spend ``tokens`` of ``key``'s window and return 0, or return the seconds until the
        window has room (nothing spent). A request alone in an empty window always fits."""
        ...

    def breaker_state(self, key: str, change: Callable[[dict[str, Any], float], T], now: float | None = None) -> T:
        """``change(state, now)`` on ``key``'s breaker state, atomically for every process on
        the store (the state as changed is kept); its result."""
        ...


T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Breaker:
    """The one rule of a circuit breaker: ``failures`` in ``WINDOW`` seconds open it for ``cooldown``."""

    failures: int
    cooldown: float

    @staticmethod
    def _recent(state: dict[str, Any], now: float) -> list[float]:
        recent = [float(t) for t in state.get("failures", []) if now - WINDOW < float(t) <= now + WINDOW]
        state["failures"] = recent
        return recent

    def admit(self, state: dict[str, Any], now: float) -> tuple[float, int]:
        """(seconds to wait, failures in the last minute); no wait: call (as the probe, once open)."""
        recent = self._recent(state, now)
        open_until = float(state.get("open_until", 0.0))
        if not open_until:
            return 0.0, len(recent)
        if now < open_until:
            return open_until - now, len(recent)
        probing = float(state.get("probe_until", 0.0))
        if probing > now:
            return min(probing - now, 1.0), len(recent)  # another caller is the probe: ask again soon
        state["probe_until"] = now + self.cooldown
        return 0.0, len(recent)

    def failed(self, state: dict[str, Any], now: float) -> None:
        """A call failed: counted; it opens the breaker at ``failures``, or again after a probe."""
        recent = [*self._recent(state, now), now]
        state["failures"] = recent
        open_until = float(state.get("open_until", 0.0))
        if (open_until and now >= open_until) or (not open_until and len(recent) >= self.failures):
            state["open_until"], state["probe_until"] = now + self.cooldown, 0.0

    @staticmethod
    def succeeded(state: dict[str, Any], now: float) -> None:
        """A call succeeded: a breaker past its cool-down (the probe's answer) closes."""
        open_until = float(state.get("open_until", 0.0))
        if open_until and now >= open_until:
            state.clear()


def _window(state: dict[str, Any], tokens: int, per_minute: int, now: float) -> float:
    """The one rule of the token window, on a state dict every limiter keeps the same way."""
    # A window that starts in the future (the clock stepped back) is taken to start now.
    start = min(float(state.get("window_start", 0.0)), now)
    state["window_start"] = start
    if now >= start + WINDOW:
        state["window_start"], state["tokens"] = now, 0
        start = now
    spent = int(state.get("tokens", 0))
    if spent and spent + tokens > per_minute:
        return start + WINDOW - now
    state["tokens"] = spent + tokens
    return 0.0


def _pause(state: dict[str, Any], seconds: float, now: float) -> None:
    state["pause_until"] = max(float(state.get("pause_until", 0.0)), now + seconds)


def _paused_for(state: dict[str, Any], now: float) -> float:
    return max(0.0, float(state.get("pause_until", 0.0)) - now)


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
    def _state(self, key: str, now: float | None, name: str = "") -> Iterator[tuple[dict[str, Any], float]]:
        """The key's state (in the file ``name``, by default ``<key>.state``), locked for a
        read-modify-write (written back on exit), and the store's time: ``now``, or the time
        the file system stamps on the state file."""
        fd = self._open(name or f"{key}.state")
        try:
            while not self._locks.try_lock(fd):
                time.sleep(0.002)  # holders keep it for one read and one write
            clock = _file_time(fd) if now is None else now
            os.lseek(fd, 0, os.SEEK_SET)
            raw = os.read(fd, 4096)
            try:
                state = json.loads(raw) if raw else {}
            except ValueError:
                state = {}  # a torn write: the limits start afresh, which only loosens them
            before = dict(state)
            yield state, clock
            if state != before:
                data = json.dumps(state).encode()
                os.lseek(fd, 0, os.SEEK_SET)
                os.ftruncate(fd, 0)
                os.write(fd, data)
        finally:
            os.close(fd)

    def pause(self, key: str, seconds: float, now: float | None = None) -> None:
        with self._state(key, now) as (state, clock):
            _pause(state, seconds, clock)

    def paused_for(self, key: str, now: float | None = None) -> float:
        with self._state(key, now) as (state, clock):
            return _paused_for(state, clock)

    def take_tokens(self, key: str, tokens: int, per_minute: int, now: float | None = None) -> float:
        with self._state(key, now) as (state, clock):
            return _window(state, tokens, per_minute, clock)

    def breaker_state(self, key: str, change: Callable[[dict[str, Any], float], T], now: float | None = None) -> T:
        with self._state(key, now, name=f"{key}.breaker") as (state, clock):
            return change(state, clock)


def _file_time(fd: int) -> float:
    """The time the file system stamps on ``fd``'s file as it is touched now: one clock for
    every process of a file store (on NFS the file server's); the process's where a file's
    times cannot be set through its descriptor (Windows)."""
    if os.utime in os.supports_fd:
        try:
            os.utime(fd)
            return os.fstat(fd).st_mtime
        except OSError:
            pass
    return time.time()


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

    def pause(self, key: str, seconds: float, now: float | None = None) -> None:
        with self._lock:
            _pause(self._states.setdefault(key, {}), seconds, time.time() if now is None else now)

    def paused_for(self, key: str, now: float | None = None) -> float:
        with self._lock:
            return _paused_for(self._states.get(key, {}), time.time() if now is None else now)

    def take_tokens(self, key: str, tokens: int, per_minute: int, now: float | None = None) -> float:
        with self._lock:
            return _window(self._states.setdefault(key, {}), tokens, per_minute, time.time() if now is None else now)

    def breaker_state(self, key: str, change: Callable[[dict[str, Any], float], T], now: float | None = None) -> T:
        with self._lock:
            return change(self._states.setdefault(f"{key}.breaker", {}), time.time() if now is None else now)


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
