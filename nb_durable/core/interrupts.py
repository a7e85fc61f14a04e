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
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

__all__ = ["interrupts_held"]


@contextmanager
def interrupts_held() -> Iterator[None]:
    """Run the block with SIGINT held; an interrupt that came meanwhile is raised at its end."""
    # Python runs signal handlers only in the main thread, and only there may they be changed:
    # elsewhere no Ctrl-C can land inside the block.
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    handler = signal.getsignal(signal.SIGINT)
    if not callable(handler):  # ignored, or left to the system: no KeyboardInterrupt to hold
        yield
        return
    arrived: list[tuple[int, FrameType | None]] = []
    signal.signal(signal.SIGINT, lambda number, frame: arrived.append((number, frame)))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, handler)
        if arrived:
            handler(*arrived[0])
