"""Ctrl-C held back while a run's lines go out, so a store and the history never disagree.

SIGINT (Ctrl-C, the kernel's interrupt button) raises ``KeyboardInterrupt`` in the main
thread between any two bytecodes. Landing after a store has taken a line (its ``fsync``
returned, a transaction committed) but before the writer counts it, it would leave a line
on disk that the writer does not know: the run's next line (the ``run_finished`` that an
interrupt writes) would reuse its sequence number, and every reader would drop it as a torn
write (a SQLite store refuses it outright), or refuse the run as damaged when more lines
follow. ``interrupts_held`` makes the store's write and its bookkeeping one step as far as
Ctrl-C is concerned: an interrupt that arrives inside is raised as the block ends. A real kill
needs no such care: the process is gone, and the next writer reads what the store holds.
A second Ctrl-C inside the block is not held: a write that waits on a database must not
swallow every interrupt.

It is on every append's path, so it does not swap handlers each time (two system calls, as
long as a whole unsynced append): the handler it installs stays, wrapping the one it found,
and a write only flips a flag on it. Whoever installs a handler of their own after it (IPython
at each cell, the CLI) simply replaces it; the next write wraps theirs. A run installs it as
it starts (``interrupts_watched``), before its first write, and a front end as it prepares
one (``prepare_run``), so that a press Python swallows while a run is prepared, opens its log
or takes its lease is sent again too (``swallowed.py``).

A press that a finalizer swallowed is sent again as the press it was: a first one is held by
a write under way, a second one inside a write (the one that went through) goes through
again, at once, so two presses during one write stop the run as two, swallowed or not.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any

from .swallowed import deliver_swallowed_interrupts

__all__ = ["interrupts_held", "interrupts_watched"]

Handler = Callable[[int, FrameType | None], Any]


class _Holding:
    """A SIGINT handler that keeps a signal while a write is under way, else passes it on."""

    __slots__ = ("arrived", "depth", "heard", "insisting", "let_through", "passed_to")

    def __init__(self, passed_to: Handler) -> None:
        self.passed_to = passed_to
        self.depth = 0
        self.arrived: tuple[int, FrameType | None] | None = None
        self.heard = 0  # a swallowed Ctrl-C is sent again until this says it was heard (swallowed.py)
        self.let_through: BaseException | None = None  # what a second press inside a write raised
        self.insisting = False  # the press sent next is that second press, swallowed: it goes through

    def __call__(self, number: int, frame: FrameType | None) -> Any:
        self.heard += 1
        if self.depth and self.arrived is None and not self.insisting:
            self.arrived = (number, frame)
            return None
        # A second Ctrl-C while a write waits (a PostgreSQL store riding out a restart, up to
        # 30 s) is a person insisting, and goes through. At worst the run's end line then
        # repeats a sequence number: the database refuses it, a file's reader drops it as torn,
        # and the run reads as a killed process leaves it, its stored steps whole.
        self.arrived, self.insisting = None, False
        try:
            return self.passed_to(number, frame)
        except BaseException as e:
            if self.depth:
                self.let_through = e
            raise

    def swallowed(self, error: BaseException | None) -> None:
        """Told that a finalizer swallowed ``error``: if it is a second press let through inside
        a write, the press sent again goes through too, never held as a first (swallowed.py)."""
        if error is not None and error is self.let_through:
            self.let_through, self.insisting = None, True


def _holding() -> _Holding | None:
    """The SIGINT handler, wrapped in a ``_Holding`` (and swallowed presses sent again), if it
    can be: on the main thread, with a Python handler in place."""
    # Python runs signal handlers only in the main thread, and only there may they be
    # changed: elsewhere no Ctrl-C can land.
    if threading.current_thread() is not threading.main_thread():
        return None
    handler = signal.getsignal(signal.SIGINT)
    if not callable(handler):  # ignored, or left to the system: no KeyboardInterrupt to hold
        return None
    deliver_swallowed_interrupts()  # a Ctrl-C that a finalizer swallows comes back: held here, or stops the run
    if not isinstance(handler, _Holding):
        handler = _Holding(handler)
        signal.signal(signal.SIGINT, handler)
    return handler


def interrupts_watched() -> None:
    """Have a Ctrl-C that Python swallows sent again from now on: called as a run starts,
    before its first write, so that no press between the two is lost."""
    _holding()


# Lower case: a context manager used as a function, ``with interrupts_held():``.
class interrupts_held:
    """Run the block with SIGINT held; an interrupt that came meanwhile is raised at its end."""

    __slots__ = ("_holding",)

    def __enter__(self) -> None:
        self._holding = _holding()
        if self._holding is not None:
            self._holding.depth += 1

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None) -> None:
        holding = self._holding
        if holding is None:
            return
        holding.depth -= 1
        if holding.depth == 0:
            holding.let_through = None  # not swallowed: it left the write (and its frames go with it)
        if holding.depth == 0 and holding.arrived is not None:
            arrived, holding.arrived = holding.arrived, None
            holding.passed_to(*arrived)
