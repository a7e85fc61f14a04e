"""What the model is told of a tool call cut off before its result was recorded (a step in doubt, skipped).

Nothing of such a call is recorded but the decision to skip it, so the words are made again
at every replay and must be the same each time: they depend only on the log and on the
wording version the run recorded (``AgentSettings.wording``). Version 1 (every log from
before the setting) says the process died, whatever happened. Version 2 says what the log
shows: a session that recorded its stop (the Stop button, ``%agent_stop``, Ctrl-C, a kernel
shutting down) cut the call off, in the words it recorded ("stopped by ada with the Stop
button"); with no stop recorded after the call began, its process died.
"""

from __future__ import annotations

from typing import Any

from ...core.events import RunFinished, StepStarted
from ...core.log import EventLog

__all__ = ["cut_off_text", "recorded_wording"]


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
