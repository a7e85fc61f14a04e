"""What a resume or a follow-up asks to change in a run's settings: one ``Change``.

A resume takes every setting from the run's log; a ``Change`` names the few it changes,
each a row of the table whose ``on_resume`` allows it. A recorded setting a resume may not
change may still be given again (a script that repeats its ``--workspace``): it is ``kept``,
and must be the value the run recorded, which only the run's log can tell (the session checks
it before anything is recorded). ``recorded`` changes (another model,
a larger budget) are recorded as a decision at the run's next point, so every later replay
sends the same requests; ``session`` changes (a turn limit, how calls are cached) apply to
this session alone and are never recorded.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ...errors import SettingError
from .rows import Setting, rows_of
from .table import AgentSettings

__all__ = ["CHANGEABLE", "Change"]

CHANGEABLE: Mapping[str, Setting] = MappingProxyType({row.name: row for row in rows_of(AgentSettings) if row.changeable})
"""The recorded settings a resume or a follow-up may change, by name."""

_RECORDED: Mapping[str, Setting] = {row.name: row for row in rows_of(AgentSettings)}


@dataclass(frozen=True, slots=True)
class Change:
    """The settings a resume or a follow-up changes (the rest: as the run recorded them)."""

    values: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        checked = {}
        for name, value in self.values.items():
            if value is None:
                continue  # unset: keep what the run recorded
            row = _RECORDED.get(name)
            if row is None:
                raise SettingError(setting=name, value=value, reason="is no setting a run records")
            checked[name] = row.check(value)
        object.__setattr__(self, "values", MappingProxyType(checked))

    @classmethod
    def of(cls, **values: Any) -> Change:
        """A change of the settings named (None: keep)."""
        return cls(values)

    def recorded(self) -> dict[str, Any]:
        """The changes recorded as a decision at the run's next point."""
        return {k: v for k, v in self.values.items() if _RECORDED[k].on_resume == "recorded"}

    def for_session(self) -> dict[str, Any]:
        """The changes that hold for this session only, never recorded."""
        return {k: v for k, v in self.values.items() if _RECORDED[k].on_resume == "session"}

    def kept(self) -> dict[str, Any]:
        """The settings given again that a resume may not change: each must be as the run recorded it."""
        return {k: v for k, v in self.values.items() if _RECORDED[k].on_resume == "no"}

    def __bool__(self) -> bool:
        return bool(self.values)
