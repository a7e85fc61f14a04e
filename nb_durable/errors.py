"""Every error nb_durable raises, under one base class.

Each message says what happened, to which run and step, and what to do next. Errors that
are also a built-in kind of error (a bad value, a missing key) subclass that built-in too,
so ``except ValueError`` keeps working for callers who do not know this tree::

    NbDurableError
    ├── StoreError                  a store cannot be opened, read or written
    ├── RunError                    something is wrong with one run (carries .run_id)
    │   ├── InvalidRunIdError       the id cannot name a run (also ValueError)
    │   ├── RunNotFoundError        no run with that id in the store (also LookupError)
    │   ├── RunLockedError          another process is writing the run
    │   │   └── LeaseLostError      this writer no longer holds the run
    │   ├── LogCorruptedError       damage before the last line of a log
    │   ├── InvalidStepIdError      a step id is empty or already used in the run (also ValueError)
    │   ├── DivergenceError         the code asks for other steps than the log recorded
    │   ├── InDoubtError            an external step's outcome is unknown; the policy is fail
    │   ├── StepResultError         a step returned something JSON cannot hold (also TypeError)
    │   └── RunFailedError          an agent run ended as failed; resumable after the fix
    │       ├── ModelCallError      the Messages API refused a request (400, 401, 403, 404)
    │       ├── RetriesExhaustedError  transient failures outlasted the retry policy
    │       └── DecisionNeededError    an in-doubt step or an approval needs a person
    ├── ModelError                  a model call failed (carries .status, .error_type, .request_id)
    │   ├── TransientModelError     worth retrying: 429, 529, 5xx, timeouts, connection errors
    │   └── ScriptExhaustedError    a ScriptedModel got more requests than it had replies
    └── ToolError                   a tool was misused; becomes an is_error tool_result
        └── WorkspaceError          a path leaves the workspace

One warning, ``TornLineWarning`` (a UserWarning), says a crash's torn last line was dropped.
One BaseException outside the tree, ``SimulatedCrash``, stands in for a killed process: like
KeyboardInterrupt it passes every ``except Exception`` on its way out.
"""

from __future__ import annotations

__all__ = [
    "DecisionNeededError",
    "DivergenceError",
    "InDoubtError",
    "InvalidRunIdError",
    "InvalidStepIdError",
    "LeaseLostError",
    "LogCorruptedError",
    "ModelCallError",
    "ModelError",
    "NbDurableError",
    "RetriesExhaustedError",
    "RunError",
    "RunFailedError",
    "RunLockedError",
    "RunNotFoundError",
    "ScriptExhaustedError",
    "SimulatedCrash",
    "StepResultError",
    "StoreError",
    "ToolError",
    "TornLineWarning",
    "TransientModelError",
    "WorkspaceError",
]


class NbDurableError(Exception):
    """The base of every error nb_durable raises."""


class StoreError(NbDurableError):
    """A store cannot be opened, read or written (bad URL, unwritable folder, missing driver)."""


class RunError(NbDurableError):
    """Something is wrong with one run; ``run_id`` names it."""

    def __init__(self, message: str, *, run_id: str) -> None:
        super().__init__(message)
        self.run_id = run_id


class InvalidRunIdError(RunError, ValueError):
    """The id cannot name a run (empty, too long, path separators, ``..``)."""


class RunNotFoundError(RunError, LookupError):
    """The store holds no run with that id."""


class RunLockedError(RunError):
    """Another writer holds the run's lease; ``holder`` describes it (pid, host, since)."""

    def __init__(self, message: str, *, run_id: str, holder: dict[str, object] | None) -> None:
        super().__init__(message, run_id=run_id)
        self.holder = holder


class LeaseLostError(RunLockedError):
    """This writer no longer holds the run (superseded in this process, or its connection died)."""


class LogCorruptedError(RunError):
    """A log is damaged somewhere a crash cannot explain; ``location`` and ``line`` say where."""

    def __init__(self, message: str, *, run_id: str, location: str, line: int) -> None:
        super().__init__(message, run_id=run_id)
        self.location = location
        self.line = line


class InvalidStepIdError(RunError, ValueError):
    """A step id is empty, not a string, or already used by another step of the run."""


class DivergenceError(RunError):
    """The code asked for a different step than the log recorded at that position."""

    def __init__(
        self, message: str, *, run_id: str, position: int, recorded: str, requested: str
    ) -> None:
        super().__init__(message, run_id=run_id)
        self.position = position
        self.recorded = recorded
        self.requested = requested


class InDoubtError(RunError):
    """An external step started but never completed, and the in-doubt policy is ``fail``."""

    def __init__(self, message: str, *, run_id: str, step_id: str) -> None:
        super().__init__(message, run_id=run_id)
        self.step_id = step_id


class StepResultError(RunError, TypeError):
    """A step returned a value that JSON cannot hold; nothing was recorded for it."""

    def __init__(self, message: str, *, run_id: str, step_id: str) -> None:
        super().__init__(message, run_id=run_id)
        self.step_id = step_id


class RunFailedError(RunError):
    """An agent run ended as failed; fix the cause and resume it."""


class ModelCallError(RunFailedError):
    """The Messages API refused a request for a reason retrying cannot fix."""

    def __init__(self, message: str, *, run_id: str, status: int | None) -> None:
        super().__init__(message, run_id=run_id)
        self.status = status


class RetriesExhaustedError(RunFailedError):
    """Transient failures (429, 529, 5xx, timeouts) outlasted the retry policy."""


class DecisionNeededError(RunFailedError):
    """A step needs a person's decision and nobody can be asked here."""


class ModelError(NbDurableError):
    """A model call failed; the agent loop retries the transient ones and fails on the rest."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        error_type: str | None = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.error_type = error_type
        self.request_id = request_id


class TransientModelError(ModelError):
    """A failure that may pass: overloaded, rate limited, server error, timeout, no connection.

    ``retry_after`` is the server's requested wait in seconds (from ``retry-after-ms`` or
    ``retry-after``), if it gave one.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        error_type: str | None = None,
        request_id: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, status=status, error_type=error_type, request_id=request_id)
        self.retry_after = retry_after


class ScriptExhaustedError(ModelError):
    """A ScriptedModel received more requests than replies were scripted."""


class ToolError(NbDurableError):
    """A tool was called wrongly; the agent turns it into an ``is_error`` tool_result."""


class WorkspaceError(ToolError):
    """A path leaves the tool's workspace (``..``, an absolute path, a symlink out)."""


class TornLineWarning(UserWarning):
    """A log's last line was cut short by a crash and was dropped on load."""


class SimulatedCrash(BaseException):
    """A run was stopped as a killed process would stop (``--crash-at``); resume it."""
