"""A child's stop signal: its own, and its parent's too.

Stopping a parent stops its children at their next boundary; stopping one child (a person
on that child alone) stops only that child. ``LinkedStop`` is a ``StopSignal`` that is also
set while its parent's is.
"""

from __future__ import annotations

import threading

from ..run.stopping import RunStopped, StopSignal

__all__ = ["LinkedStop"]


class LinkedStop(StopSignal):
    """A child's stop signal: set when it is asked to stop, or when its parent's is."""

    def __init__(self, parent: StopSignal | None) -> None:
        super().__init__()
        self.parent = parent

    def _parent_reason(self) -> str | None:
        parent = self.parent
        if parent is not None and parent.requested:
            return f"its parent run was stopped ({parent.reason})"
        return None

    @property
    def asked_alone(self) -> bool:
        """Whether this child itself was asked to stop (not through its parent)."""
        return self._event.is_set()

    @property
    def requested(self) -> bool:
        return super().requested or self._parent_reason() is not None

    def check(self) -> None:
        # The parent's stop first: a stopped parent's session ends, and its end asks each child
        # to stop too ("its parent's session ended"), which would otherwise hide the cause.
        why = self._parent_reason()
        if why is not None:
            raise RunStopped(why)
        super().check()

    def sleep(self, seconds: float) -> None:
        done = threading.Event()
        deadline = max(0.0, seconds)
        step = 0.05
        waited = 0.0
        while waited < deadline:
            self.check()
            if done.wait(min(step, deadline - waited)):
                break
            waited += step
        self.check()

    def wait_for(self, done: threading.Event, poll: float = 0.1) -> None:
        while not done.wait(poll):
            self.check()
