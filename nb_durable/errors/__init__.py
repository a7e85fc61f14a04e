"""Every error nb_durable raises, under one base class.

Each message says what happened, to which run and step, and what to do next; errors with
structured fields build their message from them (keyword-only constructors), so a message
cannot drift from the fields a program reads. Each class knows its *outcome*: ``usage`` (a
mistake in what was asked: the notebook shows the message alone, the CLI exits 2),
``failed`` (exit 1), ``locked`` (exit 3) or ``in_doubt`` (exit 4); front ends map an error in
one line from ``outcome`` and ``exit_code``. Errors that are also a built-in kind of error (a
bad value, a missing key) subclass that built-in too, so ``except ValueError`` keeps working
for callers who do not know this tree (``base`` holds the root, ``stores`` a store's errors,
``runs`` what the core raises about runs, ``agent`` the rest)::

    NbDurableError                      outcome
    ├── StoreError                      usage    a store cannot be opened, read or written
    │   ├── StoreNameError              usage    a path or URL that cannot name a store (an unknown scheme, no database)
    │   ├── StoreAccessError            usage    the server refused the user: no such role, a wrong password, no rights on the schema
    │   ├── StoreNotFoundError          usage    a reader named a store that is not there: nothing was made
    │   ├── StoreShortError             failed   a write the store cannot take for now, undone; a step's result kept
    │   │   ├── StoreFullError          failed   the disk or quota holding a store (or an export) is full (.path, .errno)
    │   │   └── ServerShortError        failed   a server short of connections or locks for longer than the wait (.lacks)
    │   ├── NetworkFileSystemError      usage    SQLite refused on a network file system (.fs_type)
    │   └── StoreReadOnlyError          usage    a write to a store that can only be read (.path, .why)
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
    │   ├── RunNotFinishedError         usage    a follow-up for a run that has not finished: resume it first
    │   ├── NotAnAgentRunError          usage    a resume of a run of plain steps: its own code goes on (also TypeError)
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
    ├── BatchFileError                  usage    a batch file, or lines of it, are not tasks (.path, .problems; also ValueError)
    ├── SettingError                    usage    a setting given a value it cannot take (.setting; also ValueError)
    ├── McpNotInstalledError            usage    the `mcp` package is missing: nb-durable[mcp] (also ImportError)
    └── NobodyToAskError                failed   an asker or approver has nobody to ask (no stdin)

Outside the tree, by rule: a warning is never an error, and what must pass every ``except
Exception`` is not an Exception. So the warnings are ``UserWarning``s: ``TornLineWarning``
(here: a crash's torn last line was dropped), ``StoreWaitWarning`` (here: a store's server
dropped the connection, or is short of capacity, and is waited for), ``SharedStepNameWarning`` (here: two functions
are one ``@step`` name in a run), ``nb_durable.agent.DisplayWarning`` (a display
failed; the run went on) and ``nb_durable.agent.EndpointChangedWarning`` (a run resumed
against another endpoint). What stops a run from outside is a ``BaseException``:
``SimulatedCrash`` (here) stands in for a killed process, and ``nb_durable.agent.RunStopped``
(a Stop button, ``%agent_stop``) and a worker's ``WorkerStopped`` are ``KeyboardInterrupt``s,
so they take Ctrl-C's path through the loop and the log.
"""

from __future__ import annotations

# The classes live in four modules (base, stores and runs: the core's, agent: the agent's); this
# module is their one namespace, and its docstring draws the whole tree.
from .agent import (
    BatchFileError,
    DecisionNeededError,
    McpConfigError,
    McpNotInstalledError,
    McpServerError,
    ModelCallError,
    ModelError,
    NobodyToAskError,
    NotAnAgentRunError,
    RetriesExhaustedError,
    RunFailedError,
    RunNotFinishedError,
    RunNotRunningError,
    ScriptExhaustedError,
    SettingError,
    SettingsMismatchError,
    ToolError,
    ToolsChangedError,
    TransientModelError,
    WorkspaceError,
)
from .base import (
    EXIT_CODES,
    NbDurableError,
    Outcome,
    SharedStepNameWarning,
    SimulatedCrash,
    StoreWaitWarning,
    TornLineWarning,
    stacklevel_outside_package,
    warn_each_time,
)
from .runs import (
    DivergenceError,
    ForeignRunError,
    InDoubtError,
    InvalidRunIdError,
    InvalidStepIdError,
    LeaseLostError,
    LogCorruptedError,
    NewerLogError,
    NoUnfinishedRunError,
    RunError,
    RunLockedError,
    RunNotFoundError,
    StepResultError,
    UnencodableTextError,
)
from .stores import (
    NetworkFileSystemError,
    ServerShortError,
    StoreAccessError,
    StoreError,
    StoreFullError,
    StoreNameError,
    StoreNotFoundError,
    StoreReadOnlyError,
    StoreShortError,
    full_disk,
)

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
    "NotAnAgentRunError",
    "Outcome",
    "RetriesExhaustedError",
    "RunError",
    "RunFailedError",
    "RunLockedError",
    "RunNotFinishedError",
    "RunNotFoundError",
    "RunNotRunningError",
    "ScriptExhaustedError",
    "ServerShortError",
    "SettingError",
    "SettingsMismatchError",
    "SharedStepNameWarning",
    "SimulatedCrash",
    "StepResultError",
    "StoreAccessError",
    "StoreError",
    "StoreFullError",
    "StoreNameError",
    "StoreNotFoundError",
    "StoreReadOnlyError",
    "StoreShortError",
    "StoreWaitWarning",
    "ToolError",
    "ToolsChangedError",
    "TornLineWarning",
    "TransientModelError",
    "UnencodableTextError",
    "WorkspaceError",
    "full_disk",
    "stacklevel_outside_package",
    "warn_each_time",
]
