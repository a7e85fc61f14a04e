"""Where a stopping worker's runs stop (``ResumeWorker`` holds the fields): at the next step that
is not an external effect, while a model call waits on its Message Batch, or waits to try again."""

from __future__ import annotations

import threading

from ...core.context import current_step
from ...core.index.rows import STOPPED_BY_WORKER
from ..display.views import StepView

__all__ = ["StopPoints", "WorkerStopped"]


class WorkerStopped(KeyboardInterrupt):
    """Raised into a run at a step boundary when its worker is stopping (recorded as interrupted)."""


class StopPoints:
    """The run hooks that raise ``WorkerStopped`` into a run once its worker is stopping."""

    name: str
    _stopping: threading.Event

    def _before_step(self, position: int, view: StepView) -> None:
        if not self._stopping.is_set():
            return
        running = current_step()
        if running is not None and running.effect == "external":
            return  # never cut an effect off: it would be in doubt; stop at the next step
        raise WorkerStopped(
            f"{STOPPED_BY_WORKER} {self.name} before step {view.step_id}; any worker resumes it"
        )

    def _while_waiting(self) -> None:
        if self._stopping.is_set():  # a Message Batch may take hours; the resume polls it
            raise WorkerStopped(f"{STOPPED_BY_WORKER} {self.name} while a model call waited on its Message Batch; any worker resumes it")

    def _between_retries(self, seconds: float) -> None:
        # A 529 storm's retries outlasted a graceful stop by half a minute, then recorded the run
        # failed, left for a person: the wait ends when the stop comes, the run interrupted.
        if self._stopping.wait(max(0.0, seconds)):
            raise WorkerStopped(f"{STOPPED_BY_WORKER} {self.name} while a model call waited to try again; any worker resumes it")
