"""What a resume or a follow-up asks to change in a run's settings: one ``Change``.

A resume takes every setting from the run's log; a ``Change`` names the few it changes,
each a row of the table whose ``on_resume`` allows it. ``recorded`` changes (another model,
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


@dataclass(frozen=True, slots=True)
class Change:
    """The settings a resume or a follow-up changes (the rest: as the run recorded them)."""

    values: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        checked = {}
        for name, value in self.values.items():
            if value is None:
                continue  # unset: keep what the run recorded
            row = CHANGEABLE.get(name)
            if row is None:
                raise SettingError(
                    setting=name,
                    value=value,
                    reason="cannot change when a run goes on (it is part of what the run is): start a new run",
                )
            checked[name] = row.check(value)
        object.__setattr__(self, "values", MappingProxyType(checked))

    @classmethod
    def of(cls, **values: Any) -> Change:
        """A change of the settings named (None: keep)."""
        return cls(values)

    def recorded(self) -> dict[str, Any]:
        """The changes recorded as a decision at the run's next point."""
        return {k: v for k, v in self.values.items() if CHANGEABLE[k].on_resume == "recorded"}

    def for_session(self) -> dict[str, Any]:
        """The changes that hold for this session only, never recorded."""
        return {k: v for k, v in self.values.items() if CHANGEABLE[k].on_resume == "session"}

    def __bool__(self) -> bool:
        return bool(self.values)
