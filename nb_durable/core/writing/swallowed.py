"""A Ctrl-C that Python swallows is sent again, so one press still stops the run.

Python runs a SIGINT handler at the main thread's next bytecode boundary, wherever that is.
When it is inside a weakref callback or a ``__del__`` (an import's module lock being freed,
httpx or the SDK closing a connection), the handler's ``KeyboardInterrupt`` cannot leave it:
Python passes it to ``sys.unraisablehook``, prints "Exception ignored in: ...", and carries
on, and the run goes on as if nobody had pressed. The hook installed here takes such an
interrupt instead and has SIGINT sent to the main thread again, so the handler runs at a
later boundary: one where its interrupt stops the run (or, swallowed in its turn, it is sent
once more). It is the same press, not another one, and it comes back as what it was: a first
press is held by a store's write under way as any first Ctrl-C is (``interrupts_held``); a
second press inside a write, the one a write lets through, goes through again (the handler is
told what was swallowed, ``swallowed(error)``), so two presses during one write still stop it
at once. The hook is in place from a run's start (``interrupts_watched``, called as the run
opens its store, before its lease and its first line): a press swallowed at any point of the
run is sent again. Finding no Python handler for SIGINT, it sends nothing: sent, the signal
would end the process.

The signal is sent by a thread of its own, a moment later, not by the hook: sent from
inside, it would be handled before the hook returns, and what a hook raises is swallowed too.
A real signal to the main thread, not a flag or ``interrupt_main``: the main thread may be
blocked in a read (a model call) that only a signal cuts short. Everything else goes to the
hook that was found, unchanged. Like the SIGINT holding, the hook wraps whatever hook it finds
and goes back in front if someone sets their own (pytest does), so it never wraps itself.
"""

from __future__ import annotations

import os
import queue
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["deliver_swallowed_interrupts"]

# How long the courier lets the main thread go on first. A signal that lands while the main
# thread lets go of the GIL to block (a read, a sleep) is handled only once that call returns,
# and sent at once it lands just there: the courier gets the GIL as the main thread lets go.
_LATER = 0.02
# Sent once more, twice at most, if the handler has not run a while later: an earlier one
# landed there after all. Until the handler runs, Python keeps one SIGINT pending however
# many arrive, so a signal sent again is never a second press.
_AGAIN, _TIMES, _LOOK = 0.25, 2, 0.005


def _heard(handler: Any) -> int | None:
    """How many SIGINTs ``handler`` has heard, if it counts them (``interrupts._Holding`` does)."""
    heard = getattr(handler, "heard", None)
    return heard if isinstance(heard, int) else None


class _Courier:
    """The thread that sends a swallowed press again, and the presses it is given."""

    __slots__ = ("presses", "thread")

    def __init__(self) -> None:
        self.presses: queue.SimpleQueue[tuple[int, Any, int | None]] = queue.SimpleQueue()
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        if self.thread is None:
            self.thread = threading.Thread(target=self._carry, name="nb_durable: Ctrl-C sent again", daemon=True)
            self.thread.start()

    def forked(self) -> None:
        # A fork keeps only the thread that forked: the child starts a courier of its own.
        self.presses, self.thread = queue.SimpleQueue(), None

    def _carry(self) -> None:
        while True:
            main, handler, heard = self.presses.get()
            time.sleep(_LATER)
            for _ in range(1 + _TIMES):
                # Handled: this press, or a person who pressed again meanwhile. A handler that
                # does not count, or was replaced, cannot say: it is sent the one signal.
                if heard is not None and _heard(handler) != heard:
                    break
                signal.pthread_kill(main, signal.SIGINT)
                if heard is None:
                    break
                given_up = time.monotonic() + _AGAIN
                while time.monotonic() < given_up and _heard(handler) == heard and signal.getsignal(signal.SIGINT) is handler:
                    time.sleep(_LOOK)
                if signal.getsignal(signal.SIGINT) is not handler:
                    break


_COURIER = _Courier()
os.register_at_fork(after_in_child=_COURIER.forked)


class _Redelivering:
    """An unraisable hook that sends a swallowed Ctrl-C again; all else goes to ``passed_to``."""

    __slots__ = ("passed_to",)

    def __init__(self, passed_to: Callable[[Any], object]) -> None:
        self.passed_to = passed_to

    def __call__(self, unraisable: Any) -> None:
        # Every call below may run a pending SIGINT handler, whose KeyboardInterrupt, raised
        # in here, would be lost as well: each one caught is a press taken, to send again.
        try:
            # Only a signal handler's interrupt, raised on the main thread, is a person's press.
            if unraisable.exc_type is not KeyboardInterrupt or threading.current_thread() is not threading.main_thread():
                self.passed_to(unraisable)
                return
        except KeyboardInterrupt:
            pass
        while True:
            try:
                handler = signal.getsignal(signal.SIGINT)
                if not callable(handler):  # no handler raised it: a SIGINT sent now would end the process
                    return
                told = getattr(handler, "swallowed", None)
                if callable(told):  # the press comes back as it went: a second press let through goes through again
                    told(unraisable.exc_value)
                _COURIER.presses.put((threading.main_thread().ident or 0, handler, _heard(handler)))
                return
            except KeyboardInterrupt:
                continue


def deliver_swallowed_interrupts() -> None:
    """Have a Ctrl-C that a finalizer or weakref callback swallowed sent again (main thread only)."""
    if isinstance(sys.unraisablehook, _Redelivering):
        return
    _COURIER.start()
    sys.unraisablehook = _Redelivering(sys.unraisablehook)
