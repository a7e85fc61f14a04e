"""What can go wrong running an agent: failed runs, model calls, tools, MCP, batches, people.

Raised by ``nb_durable.agent`` and the front ends, never by the core. The whole tree is
drawn in ``nb_durable.errors``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from .base import NbDurableError
from .runs import RunError

__all__ = [
    "BatchFileError",
    "DecisionNeededError",
    "McpConfigError",
    "McpNotInstalledError",
    "McpServerError",
    "json_said",
    "ModelCallError",
    "ModelError",
    "NobodyToAskError",
    "RetriesExhaustedError",
    "RunFailedError",
    "RunNotRunningError",
    "ScriptExhaustedError",
    "SettingError",
    "SettingsMismatchError",
    "ToolError",
    "ToolsChangedError",
    "TransientModelError",
    "WorkspaceError",
]


class RunNotRunningError(NbDurableError, LookupError):
    """Stopping or waiting named a run that goes on in no background thread of this process."""

    outcome = "usage"

    def __init__(self, *, run_id: str | None, going: Sequence[str], ended: str | None = None, elsewhere: str | None = None) -> None:
        listed = ", ".join(repr(r) for r in going)
        if elsewhere is not None:  # its lease is held by another process: it cannot be reached from here
            message = (
                f"run {run_id!r} goes on in another process ({elsewhere}), not in the background of this one: "
                "stop it where it runs (the %agent_stop of the kernel running it, or SIGTERM to the worker) and "
                f"read_run({run_id!r}) shows where it stands; once it stops, resume_agent({run_id!r}) goes on here"
            )
        elif ended == "completed":
            message = f"run {run_id!r} has already completed in the background: there is nothing to stop or wait for"
        elif ended is not None:
            message = f"run {run_id!r} has already ended ({ended}) in the background: resume_agent({run_id!r}) goes on from there"
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
                + "; a run started elsewhere (another kernel, or before a restart) is listed by list_runs() "
                f"and resumed with resume_agent({run_id!r})"
            )
        super().__init__(message)
        self.run_id = run_id
        self.going = tuple(going)


class SettingsMismatchError(RunError):
    """A run was started again with settings other than those it recorded (``changed``)."""

    outcome = "usage"

    def __init__(
        self, *, run_id: str, changed: Sequence[str], recorded: str, requested: str, changeable: Sequence[str] = ()
    ) -> None:
        # ``changeable``: those of ``changed`` a resume may change from the run's next turn.
        if changeable:
            go_on = (
                f"or resume the run (resume_agent({run_id!r})): a resume keeps its settings, but may change "
                f"{', '.join(changeable)} from its next turn on, recorded as a decision"
            )
        else:
            go_on = "or resume the run as it was recorded"
        super().__init__(
            f"run {run_id!r} already exists with other settings ({', '.join(changed)} "
            f"{'differs' if len(changed) == 1 else 'differ'}: "
            f"recorded {recorded}, asked for {requested}). Use a new run id to start afresh, {go_on}.",
            run_id=run_id,
        )
        self.changed = tuple(changed)
        self.recorded = recorded
        self.requested = requested


class RunNotFinishedError(RunError):
    """A follow-up named a run that has not finished (queued, going on, or stopped before its end)."""

    outcome = "usage"

    def __init__(self, *, run_id: str, status: str) -> None:
        # resume_agent(...) is said in each front end's words (nb-durable resume, %agent_resume).
        super().__init__(
            f"run {run_id!r} is {status}, not finished: resume it first with resume_agent({run_id!r}), then continue it",
            run_id=run_id,
        )
        self.status = status


class NotAnAgentRunError(RunError, TypeError):
    """A resume or follow-up named a run of plain steps (``EventLog``, ``durable_run``): no agent wrote it."""

    outcome = "usage"

    def __init__(self, *, run_id: str, why: str) -> None:
        # read_run(...) is said in each front end's words (nb-durable show, %agent_show).
        super().__init__(
            f"run {run_id!r} is not an agent run ({why}), so there is no agent to resume: a run of plain "
            "steps (EventLog, durable_run) goes on when its own code runs again, replaying what it "
            f"recorded. Inspect it with read_run({run_id!r}).",
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
        self.usage: dict[str, Any] | None = None
        """What a streamed reply reported it had used before it broke (``AttemptFailed.usage``):
        paid for though no answer came; None when the failure came before any report."""


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


BATCH_LINES_SHOWN = 20
"""How many bad lines of a batch file its error says one by one (it counts the rest)."""


class BatchFileError(NbDurableError, ValueError):
    """A batch file (JSON lines of tasks), or lines of it, cannot be read as tasks; nothing was queued.

    ``problems`` holds every bad line as (line number, what is wrong), in line order, so a
    person fixes them all in one go; ``line`` is the first (None when the file as a whole
    cannot be read, ``reason`` saying why). The message says the first ``BATCH_LINES_SHOWN``
    and counts the rest. ``listing``: the file was given to name a batch's runs (``runs
    --batch``, ``wait --batch``), not to queue them, so the message says that, not that nothing
    was queued.
    """

    outcome = "usage"

    def __init__(
        self,
        *,
        path: str,
        line: int | None = None,
        reason: str = "",
        problems: Sequence[tuple[int, str]] = (),
        listing: bool = False,
    ) -> None:
        self.problems = tuple(sorted(problems)) or (((line, reason),) if line is not None else ())
        self.path = path
        self.reason = reason
        self.line = self.problems[0][0] if self.problems else None
        # Queueing refuses a file with a bad line whole; a listing can name no runs from one.
        after_one, after_many = (
            ("A batch file with a bad line names no runs: fix that line, or give the batch's id", "Fix those lines, or give the batch's id")
            if listing
            else ("Fix that line and submit the batch again: nothing was queued", "Fix those lines and submit the batch again")
        )
        if not self.problems:
            then = "--batch takes the tasks file that queued a batch, or the batch's id" if listing else "Nothing was queued"
            super().__init__(f"cannot read the batch file {path}: {reason}. {then}")
        elif len(self.problems) == 1:
            [(first, why)] = self.problems
            super().__init__(f"{path}, line {first}: {why}. {after_one}")
        else:
            shown = [f"  line {n}: {why}" for n, why in self.problems[:BATCH_LINES_SHOWN]]
            if (more := len(self.problems) - BATCH_LINES_SHOWN) > 0:
                shown.append(f"  and {more} more bad line(s)")
            consequence = "it names no runs" if listing else "nothing was queued"
            super().__init__(f"{path}: {len(self.problems)} lines are not tasks, so {consequence}:\n" + "\n".join(shown) + f"\n{after_many}")


class SettingError(NbDurableError, ValueError):
    """A setting was given a value it cannot take (``.setting``, ``.value``, ``.reason``).

    ``spelled`` is how the front end that was given the value names the setting (``--max-usd``,
    ``AgentMagics.max_usd``, ``NB_DURABLE_TOKENS_PER_MINUTE``; by default its Python name), so
    the message says it in the words the person used. ``as_json``: the value came from a JSON
    file (a batch file's line), so it is shown as that file spells it (``true``, ``null``).
    """

    outcome = "usage"

    def __init__(self, *, setting: str, value: object, reason: str, spelled: str = "", as_json: bool = False) -> None:
        self.setting = setting
        self.value = value
        self.reason = reason
        self.spelled = spelled or setting
        # A flag's value as typed, but blank text quoted: "not " would show nothing.
        typed = spelled.startswith("-") and not (isinstance(value, str) and not value.strip())
        shown: object = json_said(value) if as_json else value if typed else repr(value)
        if typed and isinstance(value, float) and value.is_integer():
            shown = int(value)  # argparse read the "-1" typed as -1.0, which is not what was typed
        super().__init__(f"{self.spelled} {reason}, not {shown}")


def json_said(value: object) -> str:
    """A value as JSON writes it (``true``, ``null``, ``"text"``), for a message about a JSON file."""
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):  # not JSON at all: said as Python says it
        return repr(value)


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
