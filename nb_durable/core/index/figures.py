"""The run index's figures (tokens, dollars): the counter that says what a run's events add.

Core knows nothing of models or prices, so the agent registers the counter (``set_figures``);
each figure is a sum of numbers, added in log order, so the incremental row and a rebuilt one
agree exactly (``rows.count_log``, ``core.writing.writer``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from ..events import AttemptFailed, Event

__all__ = ["NO_COUNTER", "Figures", "add_figures", "counted_of", "counts_figures", "figures", "set_figures"]

NO_COUNTER = 0
"""The rule of the counter a process has before the agent registers its own: it counts nothing."""


class Figures(Protocol):
    """What a run's events add to its figures (tokens, dollars): the agent's counter."""

    rule: int
    """The version of ``count``'s rule: raised whenever it would add other figures for the same event."""

    def wants(self, kind: str, step_id: str | None) -> bool:
        """Whether an event of this kind (and step) may count: asked before decoding it."""
        ...

    def count(self, settings: Mapping[str, Any], kind: str, value: Any) -> Mapping[str, float]:
        """What the event adds (``value``: a step's result, a run_finished's output, an
        attempt_failed's usage: ``counted_of``)."""
        ...


class _Nothing:
    rule = NO_COUNTER

    def wants(self, kind: str, step_id: str | None) -> bool:
        return False

    def count(self, settings: Mapping[str, Any], kind: str, value: Any) -> Mapping[str, float]:
        return {}


_figures: list[Figures] = [_Nothing()]


def set_figures(counter: Figures) -> None:
    """Count runs' figures with ``counter`` from now on (the agent registers its own on import)."""
    _figures[0] = counter


def figures() -> Figures:
    """The counter in use."""
    return _figures[0]


def counts_figures() -> bool:
    """Whether this process has a counter (the agent registers its own on import). One that has
    none cannot count a row's figures: it believes those of a row of its own ``ROW_RULE``, as
    it cannot check them, rather than take them for none (``IndexRow.current``, ``check``)."""
    return _figures[0].rule != 0


def add_figures(total: Mapping[str, float], more: Mapping[str, float]) -> dict[str, float]:
    """``total`` with ``more`` added, figure by figure."""
    out = dict(total)
    for name, amount in more.items():
        out[name] = out.get(name, 0) + amount
    return out

def counted_of(event: Event) -> Any:
    """What ``Figures.count`` counts an event other than a step's result by: its output, a failed attempt's usage."""
    return event.usage if isinstance(event, AttemptFailed) else getattr(event, "output", None)
