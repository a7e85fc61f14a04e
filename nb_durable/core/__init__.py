"""Durable steps on an append-only log, with the standard library only.

Nothing here imports Jupyter or Anthropic: ``core`` is the layer everything else stands on.
"""

from .events import Effect, Event
from .history import RunStatus, StepRecord
from .log import EventLog, OutcomeUnknown, StepContext, current_step, fork, request_hash, run_step
from .stores import Store, open_store

__all__ = [
    "Effect",
    "Event",
    "EventLog",
    "OutcomeUnknown",
    "RunStatus",
    "Store",
    "StepContext",
    "StepRecord",
    "current_step",
    "fork",
    "open_store",
    "request_hash",
    "run_step",
]
