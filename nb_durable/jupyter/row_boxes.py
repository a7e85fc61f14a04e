"""A live timeline's rows as widgets: held in boxes of ``ROWS_PER_BOX``, closed whole, and
holding the detail of at most ``budget.DETAIL_BUDGET`` characters of them (``LiveDetail``).

Setting a box's children sends all of them to the front end, so one box of every row made each
new step cost as much as the rows before it: rows go in boxes of ``ROWS_PER_BOX``, and a new
row touches only the last box (or makes a new one). A widget's model lives on in the kernel,
the browser and a saved notebook's widget state until it is closed, and a box's children are
not closed with it: ``close_tree`` closes a widget and everything inside it.

Each widget has a ``layout`` and a ``style``, models of their own that a saved notebook keeps
too (about 1.3 KB of a row's 1.8 KB of widget state): the rows all share one of each.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from typing import Any

from .budget import DETAIL_BUDGET, gap

__all__ = ["ROWS_PER_BOX", "LiveDetail", "RowBoxes", "close_tree"]

ROWS_PER_BOX = 50
"""Live rows per box of the timeline's widget."""


class RowBoxes:
    """The rows of a timeline, in a ``VBox`` of boxes (``box``) of at most ``ROWS_PER_BOX`` rows."""

    def __init__(self, widgets: Any) -> None:
        self._widgets = widgets
        self.box = widgets.VBox([])
        self.shared: tuple[Any, ...] = ()  # the rows' layout and style, made with the first row

    def row(self, markup: str) -> Any:
        """A new row's widget, showing ``markup``, with the layout and style every row shares."""
        if not self.shared:
            self.shared = (self._widgets.Layout(), self._widgets.widget_string.HTMLStyle())
        layout, style = self.shared
        return self._widgets.HTML(markup, layout=layout, style=style)

    def close_shared(self) -> None:
        """Close the rows' layout and style (the rows are closed, or there were none: ``close_tree``
        leaves them open for the rows a restart makes)."""
        for part in self.shared:
            part.close()

    def append(self, rows: list[Any]) -> None:
        """Add ``rows`` at the end, sending only the boxes they go in."""
        boxes = list(self.box.children)
        changed = False
        while rows:
            if boxes and len(boxes[-1].children) < ROWS_PER_BOX:
                room = ROWS_PER_BOX - len(boxes[-1].children)
                boxes[-1].children = (*boxes[-1].children, *rows[:room])
            else:
                room = ROWS_PER_BOX
                boxes.append(self._widgets.VBox(rows[:room]))
                changed = True
            rows = rows[room:]
        if changed:
            self.box.children = tuple(boxes)

    def swap(self, old: Any, new: Any) -> None:
        """Show ``new`` where row ``old`` is."""
        for box in self.box.children:
            if any(r is old for r in box.children):
                box.children = tuple(new if r is old else r for r in box.children)
                return


def close_tree(widget: Any, keep: Collection[Any] = ()) -> None:
    """Close a widget and every widget inside it: its children, and its ``layout`` and ``style``,
    models of their own that closing it leaves open, but for the ones in ``keep`` (shared with
    widgets that stay: ``RowBoxes.shared``). Every ``HTML``'s markup is emptied first, all of
    them before any is closed: a notebook executed by nbclient saves every model's last state,
    closed or not, and the markup of a timeline whose static form replaced it was a second copy
    of every row there. The kernel's IOPub socket drops what a slow reader leaves queued past its
    high-water mark, so the emptying goes at the head of the burst, the closings after it."""
    from ipywidgets import HTML  # the module runs without ipywidgets; a widget to close means it is loaded

    tree = list(_walk(widget))
    for each in tree:
        if isinstance(each, HTML) and each.comm is not None:
            each.value = ""
    for each in tree:
        for part in (getattr(each, "layout", None), getattr(each, "style", None)):
            if part is not None and not any(part is kept for kept in keep):
                part.close()
        each.close()


def _walk(widget: Any) -> Iterator[Any]:
    """A widget and every widget inside it, the innermost first."""
    for child in getattr(widget, "children", ()):
        yield from _walk(child)
    yield widget


class LiveDetail:
    """Which live rows still hold their detail. Each row's HTML lives in the kernel, the browser
    and a saved notebook's widget state, so a long run's rows held it all, unbounded: past the
    budget, a settled row in the middle is drawn again with its summary alone, and stays so."""

    def __init__(self, budget: int = DETAIL_BUDGET) -> None:
        self.budget = budget
        self.sizes: dict[str, int] = {}
        self.left_out: set[str] = set()

    def drawn(self, step_id: str, size: int) -> None:
        """Row ``step_id`` was drawn with ``size`` characters of detail."""
        self.sizes[step_id] = size

    def leave_out(self, settled: Callable[[str], bool]) -> list[str]:
        """The rows to draw again without their detail: past the budget, in the middle, ``settled``."""
        order = list(self.sizes)
        start, end = gap(list(self.sizes.values()), self.budget)
        out = [step_id for step_id in order[start:end] if step_id not in self.left_out and settled(step_id)]
        for step_id in out:
            self.left_out.add(step_id)
            self.sizes[step_id] = 0
        return out
