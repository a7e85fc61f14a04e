"""Stopping a run from another thread: a signal the run checks at its step boundaries.

A run on a worker thread cannot be interrupted the way the kernel's interrupt button stops
the main thread, so whoever holds the run's ``StopSignal`` (a Stop button, ``%agent_stop``,
a kernel shutting down) sets it, and the run looks at it where stopping loses nothing:

* before a step begins (nothing of it is recorded yet), so the run ends *interrupted*;
* while ``run_bash`` waits for its command: the command's process tree is killed, and the
  step is *in doubt* (it may have done part of its work), exactly as after Ctrl-C;
* while an MCP call is in flight: the call is cancelled (``notifications/cancelled``), and
  an external tool's step is *in doubt*, as the server may have begun its effect;
* while the run waits for a person's decision, or between retries of a failed model call.

A model call in flight is let finish and recorded: its tokens are paid for either way, so
stopping after it loses nothing, and the resume does not pay for it again. What the run
raises is ``RunStopped``, a ``KeyboardInterrupt``, so it takes the path Ctrl-C takes through
the loop and the log and passes every ``except Exception`` on its way out.
"""

from __future__ import annotations

import threading

__all__ = ["RunStopped", "StopSignal"]


class RunStopped(KeyboardInterrupt):
    """Raised into a run at a step boundary once its stop was asked for (recorded as interrupted)."""


class StopSignal:
    """Asks one run to stop; thread-safe, and set at most once (the first reason is kept)."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self.reason = ""

    def request(self, reason: str = "stopped by the user") -> None:
        """Ask the run to stop at its next step boundary; returns at once."""
        with self._lock:
            if not self._event.is_set():
                self.reason = reason
                self._event.set()

    @property
    def requested(self) -> bool:
        return self._event.is_set()

    def check(self) -> None:
        """Raise ``RunStopped`` if a stop was asked for."""
        if self._event.is_set():
            raise RunStopped(self.reason)

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` (a retry's delay), or raise ``RunStopped`` as soon as a stop is asked."""
        if self._event.wait(max(0.0, seconds)):
            raise RunStopped(self.reason)

    def wait_for(self, done: threading.Event, poll: float = 0.1) -> None:
        """Block until ``done`` is set, or raise ``RunStopped`` when a stop is asked first."""
        while not done.wait(poll):
            self.check()
