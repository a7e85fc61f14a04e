"""The timeline widget: one display per run, updated live, frozen to static HTML at the end.

The display is a core-ipywidgets ``VBox``: a header ``HTML``, one ``HTML`` for every step
served by replay (they arrive at once, so they share one widget, redrawn at most every
``throttle`` seconds), one ``HTML`` per live step (so a row a reader has opened is not
redrawn by its neighbours), and the final answer. Beside the widget view, each display
carries ``text/html`` (the same timeline, static) and ``text/plain``. When the run ends the
display is replaced by its static form alone, so a saved notebook, nbconvert and a notebook
reopened without its kernel (whose widget models are gone) still show the whole timeline.
Nothing replaces the display while the run goes: that would redraw the widget and close the
rows a reader has opened.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from ..agent.hooks import Observer
from ..agent.progress import ENDED
from ..agent.views import RunView, StepView
from .render import STYLE, UNFINISHED, render_answer, render_header, render_page, render_step, render_text

__all__ = ["StaticTimeline", "Timeline"]


@dataclass(frozen=True)
class StaticTimeline:
    """A timeline drawn once: HTML and text, no widget (a finished run, ``%agent_show``)."""

    html: str
    text: str

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, str]:
        return {"text/html": self.html, "text/plain": self.text}


class Timeline(Observer):
    """A run's live timeline in a notebook; give it to the agent loop as its observer."""

    def __init__(self, run: RunView, *, throttle: float = 0.1) -> None:
        import ipywidgets as widgets

        self._widgets = widgets
        self.run = run
        self.steps: dict[str, StepView] = {}
        self.throttle = throttle
        self._replayed_html: dict[str, str] = {}
        self._live: dict[str, Any] = {}
        self._dirty_replayed = False
        self._dirty_live: set[str] = set()
        self._last_flush = 0.0
        self._handle: Any = None
        self._wanted = False
        self._header = widgets.HTML(STYLE + render_header(run))
        self._replayed = widgets.HTML("")
        self._rows = widgets.VBox([])
        self._answer = widgets.HTML("")
        self.widget = widgets.VBox([self._header, self._replayed, self._rows, self._answer])
        self.widget.add_class("nbd-timeline")

    # -- display -------------------------------------------------------------------------

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        bundle: dict[str, Any] = dict(self.widget._repr_mimebundle_(**kwargs) or {})
        # The fallback is frozen as displayed and seen only where the widget is not: after
        # the kernel died, or without widgets. It cannot know the run goes on, so it says
        # "started" and how to resume, never "running" (finish() replaces it if the run ends).
        views = [v.but(state=UNFINISHED) if v.state == "in_flight" else v for v in self.steps.values()]
        run = self.run.but(status=UNFINISHED) if self.run.status == "running" else self.run
        bundle["text/html"] = render_page(run, views)
        bundle["text/plain"] = render_text(run, views)
        return bundle

    def show(self) -> None:
        """Display the timeline in the current cell's output once the run has opened.

        A run that never opens (unknown, locked, diverged) shows its error alone, no timeline.
        """
        self._wanted = True

    def _display(self) -> None:
        if self._wanted and self._handle is None:
            from IPython.display import display

            self._handle = display(self, display_id=True)

    # -- the observer --------------------------------------------------------------------

    def run_changed(self, run: RunView) -> None:
        self.run = run
        self._display()
        if run.status in ENDED:
            self.finish()
        else:
            self._flush()

    def step_changed(self, step: StepView) -> None:
        previous = self.steps.get(step.step_id)
        self.steps[step.step_id] = step
        if step.state in ("replayed", "recorded") and step.step_id not in self._live:
            # Replayed steps arrive in a burst: one shared widget, redrawn at the throttle's pace.
            self._replayed_html[step.step_id] = render_step(step)
            self._dirty_replayed = True
            self._flush()
            return
        if step.step_id not in self._live:
            row = self._widgets.HTML(render_step(step))
            self._live[step.step_id] = row
            self._rows.children = (*self._rows.children, row)
        self._dirty_live.add(step.step_id)
        # A change of state shows at once; streamed text waits for the throttle.
        self._flush(force=previous is None or previous.state != step.state)

    def _flush(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last_flush < self.throttle:
            return
        self._last_flush = now
        if self._dirty_replayed:
            self._replayed.value = "".join(self._replayed_html.values())
            self._dirty_replayed = False
        for step_id in self._dirty_live:
            self._live[step_id].value = render_step(self.steps[step_id])
        self._dirty_live.clear()
        self._header.value = STYLE + render_header(self.run)

    def finish(self) -> None:
        """Draw the final state, then replace the display by its static form."""
        if self._handle is None:
            return
        self._flush(force=True)
        self._answer.value = render_answer(self.run)
        self._handle.update(self.static())

    def static(self) -> StaticTimeline:
        """The timeline as it stands, as HTML and text only (no widget)."""
        views = list(self.steps.values())
        return StaticTimeline(render_page(self.run, views), render_text(self.run, views))
