"""What a run that goes on keeps over the values a front end was configured with, said once.

A resume (or a follow-up) takes every recorded setting from the run's log, so a front end's
standing values (``%config AgentMagics.model``) reach only new runs. A person who configured
another model would otherwise believe the run goes on with it. ``kept_note`` compares the
configured values a front end did not apply with what the run goes on with (``settings_now``:
as it recorded them, then every change and fallback switch recorded since) and says, for each
that differs, how a resume may change it, as the settings table's On resume column says.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...core.runs import RunRecord
from ..display.step_ids import StepId
from ..models.base import model_choices_refused
from ..settings import AgentSettings, Setting, rows_of
from ..settings.flags import Front
from ..settings.rows import Command
from .fallback import switched_to
from .identity import recorded_workspace

__all__ = ["kept_note", "settings_now"]

_ROWS: Mapping[str, Setting] = {row.name: row for row in rows_of(AgentSettings)}


def settings_now(record: RunRecord) -> AgentSettings:
    """The settings a run goes on with: as it recorded them when it started, then each change a
    resume recorded and each switch to a fallback model, in the order of its log (as replay does).
    ``ValueError`` if the run is not an agent's."""
    settings = AgentSettings.from_json(record.summary.settings)
    for step in record.steps:
        if _is_settings(step.step_id) and isinstance(step.result, Mapping):
            settings = settings.but(**(step.result.get("changes") or {}))
        moved = switched_to(step.decisions)
        if moved is not None:
            settings = settings.but(model=moved)
    return settings


def _is_settings(step_id: str) -> bool:
    try:
        return StepId.parse(step_id).kind == "settings"
    except ValueError:
        return False


def kept_note(
    run_id: str, configured: Mapping[str, Any], now: AgentSettings, *, source: str, command: Command, front: Front
) -> str | None:
    """One sentence on the ``configured`` values (recorded settings by name, from ``source``)
    that differ from ``now`` and so are not applied, with the flag of ``command`` that changes
    each where a resume may; None when every one agrees (or there is none)."""
    # A run the demo answers takes no model choice at all (it answers as itself), so a
    # configured model is neither kept over nor changeable there: nothing to say of it.
    ignored = set(model_choices_refused(now.model_kind, configured))
    said = []
    for name, value in configured.items():
        row = _ROWS[name]
        if name in ignored:
            continue
        wanted = row.check(value) if value is not None else None
        if name == "workspace" and wanted is not None:
            wanted = recorded_workspace(wanted)
        kept = getattr(now, name)
        if wanted == kept:
            continue
        said.append(f"{name} {_said(kept)}, not {_said(wanted)} ({_how(row, command, front)})")
    if not said:
        return None
    return f"run {run_id} goes on with its recorded settings, not {source}'s: " + "; ".join(said)


def _how(row: Setting, command: Command, front: Front) -> str:
    changes = row.on_resume == "recorded" and row.reaches(command) and (row.cli if front == "cli" else row.notebook)
    return f"{row.flag} changes it" if changes else "fixed when the run started"


def _said(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, (tuple, list)):
        return ", ".join(map(str, value)) or "none"
    return str(value)
