"""How the ways a run routes around a cause read: a switch to a fallback model, a compaction.

The one owner of a switch's wording: the session records it (``switch_decision``), reads it
back to know which model the run moved to (``switch_of``), and every display says it as a
decision row (``switches_said``: ``switched to M, overloaded: 3 x 529``). A compaction's row
says what it replaced and saved (``compaction_said``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from ...core.events import Decision

__all__ = ["ASKED_ON_RESUME", "RESUMED_BY", "SWITCHED_BY", "compaction_said", "switch_decision", "switch_of", "switches_said"]

SWITCHED_BY = "fallback"
"""Who a switch to a fallback model names as its decider: the run's own rule, not a person."""
RESUMED_BY = "resume"
"""Who a resume's own decisions name: a change of settings, a model step moved to the model it names."""
ASKED_ON_RESUME = "asked on resume"
"""Why a model step a resume found unfinished moved to the model that resume names."""

_SWITCH = re.compile(r"^model -> (?P<model>\S+) because (?P<why>.+)$", re.S)


def switch_decision(model: str, why: str) -> str:
    """How a switch of a model step's model is recorded: ``model -> M because overloaded: 3 x 529``."""
    return f"model -> {model} because {why}"


def switch_of(decision: Decision) -> tuple[str, str] | None:
    """(the model, why) of a recorded switch of a model step's model, to a fallback or to the
    model a resume names; None for any other decision."""
    found = _SWITCH.match(decision.decision) if decision.by in (SWITCHED_BY, RESUMED_BY) else None
    return None if found is None else (found["model"], found["why"])


def switches_said(decisions: Iterable[Decision]) -> str:
    """A step's switches as its decision row says them ('' if it made none)."""
    return "; ".join(f"switched to {m}, {why}" for m, why in filter(None, map(switch_of, decisions)))


def compaction_said(result: Mapping[str, Any]) -> str:
    """A compaction step's row: what it replaced, and the tokens it saved ('' before it has a
    result); or, when its call failed, why (the conversation went on as it was)."""
    if not result:
        return ""
    if "failed" in result:
        return f"failed: {result['failed']}"
    before, after = int(result.get("before", 0)), int(result.get("after", 0))
    # What it saved leads, so a row cut to the terminal's width still says it.
    return (
        f"saved ~{max(0, before - after):,} tokens: compacted {result.get('replaced', '?')} messages into a "
        f"summary (~{before:,} -> ~{after:,})"
    )
