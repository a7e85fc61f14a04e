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

What the model is told afterwards of a tool call cut off (a step in doubt, then skipped) is
``cut_off_text``. Nothing of such a call is recorded but the decision to skip it, so the
words are made again at every replay and must be the same each time: they depend only on the
log and on the wording version the run recorded (``AgentSettings.wording``). Version 1 (every log from
before the setting) says the process died, whatever happened. Version 2 says what the log
shows: a session that recorded its stop (the Stop button, ``%agent_stop``, Ctrl-C, a kernel
shutting down) cut the call off, in the words it recorded ("stopped by ada with the Stop
button"); with no stop recorded after the call began, its process died.
"""

from __future__ import annotations

import threading
from typing import Any

from ...core.events import RunFinished, StepStarted
from ...core.log import EventLog

__all__ = ["RunStopped", "StopSignal", "cut_off_text", "recorded_wording"]


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


def recorded_wording(recorded: dict[str, Any]) -> int:
    """The wording version a run's recorded settings give (1 for a log from before it was recorded)."""
    try:
        return int(recorded.get("wording") or 1)
    except (TypeError, ValueError):
        return 1


def _stopped_by(log: EventLog, step_id: str) -> str:
    """How the session that cut ``step_id`` off said it stopped, or '' if none did (its process died)."""
    began = False
    for event in log.events:
        if isinstance(event, StepStarted) and event.step == step_id:
            began = True
        elif began and isinstance(event, RunFinished):
            return str(event.error or "stopped") if event.status == "interrupted" else ""
    return ""


def cut_off_text(name: str, log: EventLog, step_id: str, wording: int) -> str:
    """The tool result the model gets for call ``name`` (step ``step_id``) whose outcome is unknown."""
    stopped = _stopped_by(log, step_id) if wording >= 2 else ""
    if stopped:
        return (
            f"This {name} call was cut off because the run was {stopped}, before its result was recorded, "
            "so whether it took effect is unknown. Check the workspace before doing it again."
        )
    return (
        f"The process running this {name} call died before its result was recorded, so "
        "whether it took effect is unknown. Check the workspace before doing it again."
    )
