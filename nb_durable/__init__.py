"""nb_durable: durable agents for Jupyter.

Every model call and every tool call is a *step* whose result is written to an append-only
log before the run moves on; after a crash or a kernel restart the run replays the recorded
steps (executing nothing) and continues live from the first unrecorded one.

``%load_ext nb_durable`` adds the ``%%agent`` magics; ``run_agent``/``resume_agent`` run the
same durable agent from Python; ``EventLog``/``run_step`` and ``durable_run``/``@step`` make
any Python code durable. This module imports neither IPython nor ipywidgets nor anthropic:
those load on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .core.durable import durable_run, step
from .core.events import Effect, Event
from .core.history import RunStatus, StepRecord
from .core.log import (
    Durability,
    EventLog,
    InDoubtPolicy,
    OutcomeUnknown,
    StepContext,
    current_step,
    fork,
    request_hash,
    run_step,
)
from .core.runs import RunRecord, RunSummary, list_runs, read_run, read_summary
from .core.stores import Store, open_store
from .core.transfer import copy_runs
from .errors import (
    DecisionNeededError,
    DivergenceError,
    InDoubtError,
    InvalidRunIdError,
    InvalidStepIdError,
    LeaseLostError,
    LogCorruptedError,
    ModelCallError,
    ModelError,
    NbDurableError,
    RetriesExhaustedError,
    RunError,
    RunFailedError,
    RunLockedError,
    RunNotFoundError,
    StepResultError,
    StoreError,
    ToolError,
    TornLineWarning,
    TransientModelError,
    WorkspaceError,
)

if TYPE_CHECKING:
    from .agent.loop import AgentResult, Approval, resume_agent, run_agent
    from .agent.models.anthropic import AnthropicModel
    from .agent.models.demo import DemoModel
    from .agent.models.scripted import ScriptedModel
    from .agent.observe import Observer, RunView, StepView
    from .agent.retry import RetryPolicy
    from .agent.tools import ToolContext, ToolRegistry, ToolResult, builtin_tools, tool

__version__ = "0.1.0"

# The agent's names load on first use (PEP 562), so importing nb_durable, and %load_ext,
# stay as light as the core.
_AGENT = {
    "AgentResult": "loop",
    "AnthropicModel": "models.anthropic",
    "Approval": "loop",
    "DemoModel": "models.demo",
    "Observer": "observe",
    "RetryPolicy": "retry",
    "RunView": "observe",
    "ScriptedModel": "models.scripted",
    "StepView": "observe",
    "ToolContext": "tools",
    "ToolRegistry": "tools",
    "ToolResult": "tools",
    "builtin_tools": "tools",
    "resume_agent": "loop",
    "run_agent": "loop",
    "tool": "tools",
}


def __getattr__(name: str) -> Any:
    module = _AGENT.get(name)
    if module is None:
        raise AttributeError(f"module 'nb_durable' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".agent.{module}", __name__), name)
    globals()[name] = value
    return value

__all__ = [
    "AgentResult",
    "AnthropicModel",
    "Approval",
    "DecisionNeededError",
    "DemoModel",
    "DivergenceError",
    "Durability",
    "Effect",
    "Event",
    "EventLog",
    "InDoubtError",
    "InDoubtPolicy",
    "InvalidRunIdError",
    "InvalidStepIdError",
    "LeaseLostError",
    "LogCorruptedError",
    "ModelCallError",
    "ModelError",
    "NbDurableError",
    "Observer",
    "OutcomeUnknown",
    "RetriesExhaustedError",
    "RetryPolicy",
    "RunError",
    "RunFailedError",
    "RunLockedError",
    "RunNotFoundError",
    "RunRecord",
    "RunStatus",
    "RunSummary",
    "RunView",
    "ScriptedModel",
    "StepContext",
    "StepRecord",
    "StepResultError",
    "StepView",
    "Store",
    "StoreError",
    "ToolContext",
    "ToolError",
    "ToolRegistry",
    "ToolResult",
    "TornLineWarning",
    "TransientModelError",
    "WorkspaceError",
    "__version__",
    "builtin_tools",
    "copy_runs",
    "current_step",
    "durable_run",
    "fork",
    "list_runs",
    "load_ipython_extension",
    "open_store",
    "read_run",
    "read_summary",
    "request_hash",
    "resume_agent",
    "run_agent",
    "run_step",
    "step",
    "tool",
    "unload_ipython_extension",
]


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext nb_durable``: register the agent magics."""
    from .jupyter.magics import load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext nb_durable``: remove the agent magics."""
    from .jupyter.magics import unload

    unload(ipython)
