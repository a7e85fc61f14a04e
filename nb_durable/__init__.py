"""nb_durable: durable agents for Jupyter.

Every model call and every tool call is a *step* whose result is written to an append-only
log before the run moves on; after a crash or a kernel restart the run replays the recorded
steps (executing nothing) and continues live from the first unrecorded one.

``%load_ext nb_durable`` adds the ``%%agent`` magics. This module imports neither IPython
nor ipywidgets nor anthropic: those load on first use.
"""

from __future__ import annotations

from typing import Any

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

__version__ = "0.1.0"

__all__ = [
    "DecisionNeededError",
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
    "OutcomeUnknown",
    "RetriesExhaustedError",
    "RunError",
    "RunFailedError",
    "RunLockedError",
    "RunNotFoundError",
    "RunRecord",
    "RunStatus",
    "RunSummary",
    "StepContext",
    "StepRecord",
    "StepResultError",
    "Store",
    "StoreError",
    "ToolError",
    "TornLineWarning",
    "TransientModelError",
    "WorkspaceError",
    "__version__",
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
    "run_step",
    "step",
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
