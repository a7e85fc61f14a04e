"""Waiting for a state, never for a time: ``wait_until`` polls a probe and says what it last saw.

A test that sleeps for "long enough" is slow on a quiet machine and wrong on a loaded one; a
test that waits for the state it means is neither. ``wait_until(probe, what)`` calls ``probe``
until it returns something truthy and returns that; if ``timeout`` passes first it fails the
test with ``what`` and the last value the probe returned (or ``seen()``, a description of the
state, when given), so a failure says how far things got, and where every other thread of
the process stood then (a wait that never ends is most often a thread blocked somewhere).
Processes in ``alive`` must keep running while it waits: one that ends fails the wait at
once, with its exit status.
"""

from __future__ import annotations

import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

__all__ = ["wait_until"]

T = TypeVar("T")


def wait_until(
    probe: Callable[[], T],
    what: str,
    timeout: float = 60,
    *,
    every: float = 0.02,
    alive: Iterable[Any] = (),
    seen: Callable[[], object] | None = None,
) -> T:
    """``probe()``'s first truthy value; an ``AssertionError`` naming ``what`` and the last value after ``timeout``."""
    deadline = time.monotonic() + timeout
    watched = list(alive)
    while True:
        last = probe()
        if last:
            return last
        for process in watched:
            code = process.poll()
            assert code is None, f"process {process.pid} ended (exit status {code}) while waiting for {what}"
        if time.monotonic() >= deadline:
            raise AssertionError(
                f"timed out after {timeout:g} s waiting for {what}; last seen: {seen() if seen else last!r}\n"
                f"the other threads then:\n{_threads()}"
            )
        time.sleep(every)


def _threads() -> str:
    """Where each other thread of this process stands: its name and its ten innermost frames (enough
    to show a finalizer the garbage collector runs on a thread, and what that thread was doing)."""
    frames = sys._current_frames()
    return "\n".join(
        f"--- {t.name}:\n" + "".join(traceback.format_stack(frames[t.ident])[-10:])
        for t in threading.enumerate()
        if t is not threading.current_thread() and t.ident in frames
    )
