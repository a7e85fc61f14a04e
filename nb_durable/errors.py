"""Every error nb_durable raises, under one base class.

Each message says what happened, to which run and step, and what to do next; errors with
structured fields build their message from them (keyword-only constructors), so a message
cannot drift from the fields a program reads. Each class knows its *outcome*: ``usage`` (a
mistake in what was asked: the notebook shows the message alone, the CLI exits 2),
``failed`` (exit 1), ``locked`` (exit 3) or ``in_doubt`` (exit 4); front ends map an error in
one line from ``outcome`` and ``exit_code``. Errors that are also a built-in kind of error (a
bad value, a missing key) subclass that built-in too, so ``except ValueError`` keeps working
for callers who do not know this tree::

    NbDurableError                      outcome
    ├── StoreError                      usage    a store cannot be opened, read or written
    │   ├── StoreFullError              failed   the disk or quota holding a store is full (.path, .errno)
    │   └── NetworkFileSystemError      usage    SQLite refused on a network file system (.fs_type)
    ├── NoUnfinishedRunError            usage    nothing to resume (or continue) in a store (also LookupError)
    ├── RunNotRunningError              usage    no such run goes on in the background here (also LookupError)
    ├── RunError                        failed   something is wrong with one run (.run_id)
    │   ├── InvalidRunIdError           usage    the id cannot name a run (also ValueError)
    │   ├── RunNotFoundError            usage    no run with that id in the store (also LookupError)
    │   ├── RunLockedError              locked   another process is writing the run
    │   │   └── LeaseLostError          locked   this writer no longer holds the run
    │   ├── LogCorruptedError           failed   damage before the last line of a log
    │   │   ├── ForeignRunError         usage    a log records another run id than it was opened as
    │   │   └── NewerLogError           usage    a log line of a newer schema: upgrade nb_durable
    │   ├── InvalidStepIdError          usage    a step id is empty or already used (also ValueError)
    │   ├── DivergenceError             usage    the code asks for other steps than the log recorded
    │   ├── SettingsMismatchError       usage    a run resumed or rerun with other settings
    │   ├── InDoubtError                in_doubt an external step's outcome is unknown; policy fail
    │   ├── StepResultError             failed   a step returned what JSON cannot hold (also TypeError)
    │   ├── UnencodableTextError        usage    text to record is not UTF-8 (a lone surrogate; also ValueError)
    │   ├── ToolsChangedError           usage    tools a run used are gone or changed on their server
    │   └── RunFailedError              failed   an agent run ended as failed; resumable after the fix
    │       ├── ModelCallError          failed   the Messages API refused a request (400, 401, 403, 404)
    │       ├── RetriesExhaustedError   failed   transient failures outlasted the retry policy
    │       └── DecisionNeededError     failed   an in-doubt step or an approval needs a person
    ├── ModelError                      failed   a model call failed (.status, .error_type, .request_id)
    │   ├── TransientModelError         failed   worth retrying: 429, 529, 5xx, timeouts, no connection
    │   └── ScriptExhaustedError        failed   a ScriptedModel got more requests than it had replies
    ├── ToolError                       failed   a tool was misused; becomes an is_error tool_result
    │   ├── WorkspaceError              usage    a path leaves the workspace
    │   └── McpServerError              failed   an MCP server did not start, died, timed out or erred (.server)
    ├── McpConfigError                  usage    an mcpServers config cannot be read (also ValueError)
    ├── BatchFileError                  usage    a line of a batch file is not a task (.path, .line; also ValueError)
    ├── McpNotInstalledError            usage    the `mcp` package is missing: nb-durable[mcp] (also ImportError)
    └── NobodyToAskError                failed   an asker or approver has nobody to ask (no stdin)

One warning, ``TornLineWarning`` (a UserWarning), says a crash's torn last line was dropped.
One BaseException outside the tree, ``SimulatedCrash``, stands in for a killed process: like
KeyboardInterrupt it passes every ``except Exception`` on its way out.
"""

from __future__ import annotations

import errno as _errno
import os
import sys
from collections.abc import Sequence
from typing import ClassVar, Literal

__all__ = [
    "BatchFileError",
    "DecisionNeededError",
    "DivergenceError",
    "EXIT_CODES",
    "ForeignRunError",
    "InDoubtError",
    "InvalidRunIdError",
    "InvalidStepIdError",
    "LeaseLostError",
    "LogCorruptedError",
    "McpConfigError",
    "McpNotInstalledError",
    "McpServerError",
    "ModelCallError",
    "ModelError",
    "NbDurableError",
    "NetworkFileSystemError",
    "NewerLogError",
    "NoUnfinishedRunError",
    "NobodyToAskError",
    "Outcome",
    "RetriesExhaustedError",
    "RunError",
    "RunFailedError",
    "RunLockedError",
    "RunNotFoundError",
    "RunNotRunningError",
    "ScriptExhaustedError",
    "SettingsMismatchError",
    "SimulatedCrash",
    "StepResultError",
    "StoreError",
    "StoreFullError",
    "ToolError",
    "ToolsChangedError",
    "TornLineWarning",
    "TransientModelError",
    "UnencodableTextError",
    "WorkspaceError",
    "full_disk",
    "stacklevel_outside_package",
]


Outcome = Literal["usage", "failed", "locked", "in_doubt"]
"""How an error ends a command: a mistake in what was asked, a failed run, a run another
process writes, or a step that needs a decision."""

EXIT_CODES: dict[str, int] = {
    "completed": 0,
    "failed": 1,
    "usage": 2,
    "locked": 3,
    "in_doubt": 4,
    "truncated": 5,
    "refused": 6,
    "context_full": 7,
    "budget_exhausted": 8,
    "interrupted": 130,
}
"""The CLI's exit code for each way a command ends: an error's outcome, or how a run ended
(``completed`` is success; ``interrupted`` is the shell's code for Ctrl-C)."""


class NbDurableError(Exception):
    """The base of every error nb_durable raises."""

    outcome: ClassVar[Outcome] = "failed"

    @property
    def exit_code(self) -> int:
        """The CLI's exit code for this error."""
        return EXIT_CODES[self.outcome]

    @property
    def user_mistake(self) -> bool:
        """Whether the fix is in what was asked (or in waiting for another writer), not in the run."""
        return self.outcome in ("usage", "locked")


class StoreError(NbDurableError):
    """A store cannot be opened, read or written (bad URL, unwritable folder, missing driver)."""

    outcome: ClassVar[Outcome] = "usage"


_FULL = frozenset(
    code for code in (_errno.ENOSPC, getattr(_errno, "EDQUOT", None), _errno.EFBIG) if code is not None
)


def full_disk(error: BaseException) -> int | None:
    """The errno if ``error`` says the disk, a quota or a file size limit is full, else None."""
    code = getattr(error, "errno", None)
    return code if isinstance(error, OSError) and code in _FULL else None


class StoreFullError(StoreError):
    """The disk (or quota) holding a store is full; the write was undone, nothing recorded is lost."""

    outcome = "failed"

    def __init__(self, *, doing: str, path: str, code: int) -> None:
        super().__init__(
            f"{doing}: the file system holding it is full ({os.strerror(code)}). Nothing recorded "
            "was lost and the write that failed was undone. Free some space (or raise the quota, or "
            "point the store at another disk), then go on: the same log keeps writing, or resume the run."
        )
        self.path = path
        self.errno = code


class NetworkFileSystemError(StoreError):
    """A SQLite store on a network file system, where WAL mode's shared memory does not work."""

    def __init__(self, message: str, *, path: str, fs_type: str) -> None:
        super().__init__(message)
        self.path = path
        self.fs_type = fs_type


class NoUnfinishedRunError(NbDurableError, LookupError):
    """A resume named no run, and the store holds no unfinished run to pick."""

    outcome = "usage"

    def __init__(self, *, store: str, finished: bool = False) -> None:
        if finished:
            message = (
                f"no finished run in {store} to continue: name the run to continue, or start a new "
                "one; listing the runs shows them all."
            )
        else:
            message = (
                f"no unfinished run in {store} to resume: every run there has completed (or there are "
                "none). Name the run to resume; listing the runs shows them all."
            )
        super().__init__(message)
        self.store = store


class RunNotRunningError(NbDurableError, LookupError):
    """Stopping or waiting named a run that goes on in no background thread of this process."""

    outcome = "usage"

    def __init__(self, *, run_id: str | None, going: Sequence[str], ended: str | None = None) -> None:
        listed = ", ".join(repr(r) for r in going)
        if ended is not None:
            message = f"run {run_id!r} has already ended ({ended}) in the background: resume it to go on"
        elif run_id is None:
            message = (
                f"{len(going)} runs go on in the background here ({listed}): name the one you mean"
                if going
                else "no run goes on in the background in this process: start one with --background"
            )
        else:
            message = (
                f"run {run_id!r} goes on in no background thread of this process"
                + (f" (these do: {listed})" if going else "")
                + "; a run started elsewhere (another kernel, or before a restart) is seen with the list of "
                "runs and resumed by its id"
            )
        super().__init__(message)
        self.run_id = run_id
        self.going = tuple(going)


class RunError(NbDurableError):
    """Something is wrong with one run; ``run_id`` names it."""

    def __init__(self, message: str, *, run_id: str) -> None:
        super().__init__(message)
        self.run_id = run_id


class InvalidRunIdError(RunError, ValueError):
    """The id cannot name a run (empty, too long, path separators, ``..``)."""

    outcome = "usage"


class RunNotFoundError(RunError, LookupError):
    """The store holds no run with that id (``known`` lists a few that it does hold)."""

    outcome = "usage"

    def __init__(self, *, run_id: str, where: str, known: Sequence[str] = (), reason: str = "") -> None:
        if reason:
            message = f"run {run_id!r} {reason}"
        else:
            if known:
                listed = ", ".join(repr(k) for k in list(known)[:5]) + (", ..." if len(known) > 5 else "")
                hint = f"It has {len(known)} run(s): {listed}; listing the runs shows them all."
            else:
                hint = "It has no runs yet."
            message = f"no run {run_id!r} in {where}. {hint}"
        super().__init__(message, run_id=run_id)
        self.where = where
        self.known = tuple(known)


class RunLockedError(RunError):
    """Another writer holds the run's lease; ``holder`` describes it (pid, host, since)."""

    outcome = "locked"

    def __init__(self, message: str, *, run_id: str, holder: dict[str, object] | None) -> None:
        super().__init__(message, run_id=run_id)
        self.holder = holder


class LeaseLostError(RunLockedError):
    """This writer no longer holds the run (superseded in this process, or its connection died)."""


class LogCorruptedError(RunError):
    """A log is damaged somewhere a crash cannot explain; ``location`` and ``line`` say where."""

    def __init__(self, *, run_id: str, location: str, line: int, why: str, foreign: bool = False) -> None:
        if foreign:
            message = (
                f"{location} is not an nb_durable log: line 1 {why}. If this file belongs to "
                "another tool, move it out of the runs folder."
            )
        else:
            message = (
                f"run {run_id!r} is damaged at line {line} of {location}: {why}. This is not a "
                "torn write (those only affect the last line), so nothing was dropped. Restore the "
                "file from a copy, or fork the intact prefix into a new run with "
                f"fork({run_id!r}, new_id, at=N)."
            )
        super().__init__(message, run_id=run_id)
        self.location = location
        self.line = line
        self.why = why


class ForeignRunError(LogCorruptedError):
    """A log records another run than the id it was opened as (a file copied or renamed into place)."""

    outcome = "usage"

    def __init__(self, *, run_id: str, recorded: str, location: str) -> None:
        RunError.__init__(
            self,
            f"{location} records run {recorded!r}, not {run_id!r}: it was copied or renamed into place. "
            "Nothing was read or written. Put it back under its own id, or delete it; to go on "
            f"with {recorded!r}'s steps under a new id, fork {recorded!r} into it.",
            run_id=run_id,
        )
        self.location = location
        self.line = 1
        self.why = f"it records run {recorded!r}"
        self.recorded = recorded


class NewerLogError(LogCorruptedError):
    """A log holds a line written by a newer nb_durable (a newer schema version)."""

    outcome = "usage"

    def __init__(self, *, run_id: str, location: str, line: int, version: int, reads: int) -> None:
        RunError.__init__(
            self,
            f"run {run_id!r} has a line written by a newer nb_durable (line {line} of {location}: log "
            f"schema v{version}; this one reads up to v{reads}). Nothing was "
            "dropped or changed: upgrade nb_durable (pip install -U nb-durable) to read or resume it.",
            run_id=run_id,
        )
        self.location = location
        self.line = line
        self.why = f"log schema v{version}"
        self.version = version


class InvalidStepIdError(RunError, ValueError):
    """A step id is empty, not a string, or already used by another step of the run."""

    outcome = "usage"


class DivergenceError(RunError):
    """The code asked for a different step than the log recorded at ``position``."""

    outcome = "usage"

    def __init__(self, *, run_id: str, position: int, recorded: str, requested: str, why: str) -> None:
        super().__init__(
            f"run {run_id!r} diverged at step {position}: the log recorded {recorded}, but the "
            f"code asked for {requested} ({why}). The code or its inputs changed since the run "
            "was recorded. Start a new run, or keep the steps that still match with "
            f"fork({run_id!r}, 'new-id', at={position}) and continue that one.",
            run_id=run_id,
        )
        self.position = position
        self.recorded = recorded
        self.requested = requested


class SettingsMismatchError(RunError):
    """A run was started again with settings other than those it recorded (``changed``)."""

    outcome = "usage"

    def __init__(self, *, run_id: str, changed: Sequence[str], recorded: str, requested: str) -> None:
        super().__init__(
            f"run {run_id!r} already exists with other settings ({', '.join(changed)} differ: "
            f"recorded {recorded}, asked for {requested}). Use a new run id to start afresh, or "
            "resume the run as it was recorded.",
            run_id=run_id,
        )
        self.changed = tuple(changed)
        self.recorded = recorded
        self.requested = requested


class InDoubtError(RunError):
    """An external step started but never completed, and the in-doubt policy is ``fail``."""

    outcome = "in_doubt"

    def __init__(self, *, run_id: str, step_id: str, started: str) -> None:
        super().__init__(
            f"step {step_id!r} of run {run_id!r} started at {started} and never completed: its "
            "process died during an external effect, so whether the effect happened is unknown. "
            "Check by hand, then resume with in_doubt='rerun' to run it again or in_doubt='skip' "
            "to go on without it (the decision is recorded).",
            run_id=run_id,
        )
        self.step_id = step_id


class StepResultError(RunError, TypeError):
    """A step returned a value that JSON cannot hold; nothing was recorded for it."""

    def __init__(self, *, run_id: str, step_id: str, what: str, reason: str, after: str = "") -> None:
        super().__init__(
            f"{what} of run {run_id!r} returned {reason}. Return JSON data: dict, list, str, "
            f"int, float, bool or None.{after}",
            run_id=run_id,
        )
        self.step_id = step_id


class UnencodableTextError(RunError, ValueError):
    """Text to record (a task, a setting, an output) holds a lone surrogate, which UTF-8 cannot hold."""

    outcome = "usage"

    def __init__(self, *, run_id: str, what: str, sample: str) -> None:
        super().__init__(
            f"cannot record {what} of run {run_id!r}: it holds text that UTF-8 cannot hold ({sample!r}, "
            "a lone surrogate: what Python makes of a file name or argument that is not UTF-8). Nothing "
            "was written. Pass UTF-8 text; os.fsencode(text).decode('utf-8', 'backslashreplace') keeps "
            "every byte.",
            run_id=run_id,
        )


class ToolsChangedError(RunError):
    """Tools a run used are gone from their server, or their schema or effect changed (``changes``)."""

    outcome = "usage"

    def __init__(self, *, run_id: str, changes: Sequence[str], accept_flag: str) -> None:
        super().__init__(
            f"run {run_id!r} cannot go on with the tools it recorded: {'; '.join(changes)}. The model "
            "chose its calls for the tools as recorded. Fork the run before the first step that used "
            f"a changed tool and continue the fork, or accept the change with {accept_flag} (recorded "
            "as a decision) if the new version takes the same input.",
            run_id=run_id,
        )
        self.changes = tuple(changes)


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

    outcome = "usage"


class McpServerError(ToolError):
    """An MCP server did not start, died, timed out or answered with a protocol error.

    ``transient`` says whether trying again may help (and is safe: the call cannot have run).
    """

    def __init__(self, message: str, *, server: str, transient: bool = False, ran: bool = False) -> None:
        super().__init__(message)
        self.server = server
        self.transient = transient
        self.ran = ran
        """Whether the call may have reached the server (its effect may have happened)."""
        self.retry_after: float | None = None


class McpConfigError(NbDurableError, ValueError):
    """An MCP configuration (``mcpServers`` JSON) is missing, malformed or names an unset variable."""

    outcome = "usage"


class BatchFileError(NbDurableError, ValueError):
    """A line of a batch file (JSON lines of tasks) cannot be read as a task; nothing was queued."""

    outcome = "usage"

    def __init__(self, *, path: str, line: int, reason: str) -> None:
        super().__init__(f"{path}, line {line}: {reason}. Fix that line and submit the batch again: nothing was queued")
        self.path = path
        self.line = line


class McpNotInstalledError(NbDurableError, ImportError):
    """MCP servers were asked for, but the ``mcp`` package is not installed."""

    outcome = "usage"

    def __init__(self) -> None:
        super().__init__(
            "MCP servers need the official MCP Python SDK, which is not installed: "
            "pip install 'nb-durable[mcp]' (or pip install mcp), then restart the kernel."
        )


class NobodyToAskError(NbDurableError):
    """Raised by an asker or approver when nobody can answer where the run is (no stdin, as
    under nbclient); the message says what to do instead. The loop turns it into a
    ``DecisionNeededError`` naming the run and the step."""


class TornLineWarning(UserWarning):
    """A log's last line was cut short by a crash and was dropped on load."""


class SimulatedCrash(BaseException):
    """A run was stopped as a killed process would stop (``--crash-at``); resume it."""


_PACKAGE = os.path.dirname(os.path.abspath(__file__))


def stacklevel_outside_package() -> int:
    """The ``stacklevel`` that points a warning at the user's code, not at nb_durable's."""
    frame = sys._getframe(2)  # the caller of the function that warns
    level = 2
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    return level
