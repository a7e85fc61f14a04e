"""The timeline widget: one display per run, updated live, with the run's buttons.

The display is a core-ipywidgets ``VBox``: a header ``HTML``, the bar of run buttons (Stop,
Resume, Fork from here: ``controls``), one ``HTML`` for every step served by replay (they arrive
at once, so they share one widget, redrawn at most every ``throttle`` seconds), one ``HTML`` per
live step (so a row a reader has opened is not redrawn by its neighbours; a question the run
waits on puts its answer buttons under its row), the final answer, the timelines of runs forked
from this one, and the styles (an ``HTML`` set once). A child run's start row unfolds into the
child's own timeline (``child_rows``). What goes over the wire per step does not grow with the
run: live rows sit in boxes (``row_boxes``), and the styles are never sent again with the
header. Nor does it outrun a browser: changes go out at most every ``throttle`` seconds (a
change of state within one, by a timer if nothing else comes), and a row is made in the state it
has then, so a step that started and ended meanwhile costs one new row. Beside the widget view,
each display carries ``text/html`` (the same timeline, static) and ``text/plain``.

Each display has its own display id (``displays``): a later cell showing the same run never
redraws this one; what a later session did is added as one line under the header ("resumed in a
later cell: completed there"), and what this cell showed stays.

In the foreground, when the run ends, the display is replaced by its static form alone, so a
saved notebook, nbconvert and a notebook reopened without its kernel still show the whole
timeline. A background run's thread cannot replace a display (what a thread publishes reaches no
cell), so its widget stays, buttons live, until a cell on the main thread freezes it
(``freeze``, which ``%agent_wait`` calls). Nothing replaces the display while the run goes: that
would redraw the widget and close the rows a reader has opened.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from IPython.display import display

from ..agent.display.step_ids import StepId
from ..agent.display.views import RunView, StepView
from ..agent.fleet.decisions import PendingDecision
from ..agent.run.hooks import Observer
from ..agent.run.stopping import StopSignal
from ..core.status import Status
from . import displays
from .budget import row_note
from .child_rows import ChildRow, render_child
from .controls import QuestionBox, RunBar
from .render import (
    STYLE,
    UNFINISHED,
    StaticTimeline,
    detail_size,
    render_answer,
    render_header,
    render_later,
    render_static,
    render_step,
    render_steps,
)
from .row_boxes import LiveDetail, RowBoxes, close_tree

__all__ = ["StaticTimeline", "Timeline"]

RECORDED_STATES = frozenset(("replayed", "recorded", "live", "skipped"))
"""Step states that are in the log for good: a fork can keep every step up to one of these."""


class Timeline(Observer):
    """A run's live timeline in a notebook; give it to the agent loop as its observer.

    ``foreground`` says the cell holds the kernel (buttons off); ``going`` is set while a
    background run drives it (Stop on); ``embedded`` timelines (forks) live inside another.
    """

    def __init__(self, run: RunView, *, throttle: float = 0.1, foreground: bool = True, embedded: bool = False) -> None:
        import ipywidgets as widgets  # here: a StaticTimeline (%agent_show) never loads ipywidgets

        self._widgets = widgets
        self.run = run
        self.foreground = foreground
        self.embedded = embedded
        self.going = False
        self.stopping = False
        self.throttle = throttle
        self._lock = threading.RLock()
        self._handle: Any = None
        self._wanted = False
        self._frozen = False
        self._closed = False  # its widgets are closed (``_close``): it keeps its views, and sends nothing
        self._forks: list[Timeline] = []
        self.display_id = displays.display_id_for(run.run_id)
        self.later = ""  # what a later cell's session of this run did, shown under the header (displays)
        self.later_status: Status | None = None  # where it left the run: the buttons follow that, not this cell's session
        self.bar = RunBar(widgets)
        # The styles have a widget of their own, set once: a <style> redrawn with the header on
        # every step made the browser restyle the whole page each time, and fall behind.
        self._style = widgets.HTML(STYLE)
        self._style.add_class("nbd-style")
        self._header = widgets.HTML(render_header(run))
        self._later = widgets.HTML("")
        self._replayed = widgets.HTML("")
        self._rows = RowBoxes(widgets)
        self._answer = widgets.HTML("")
        self._below = widgets.VBox([])
        self._below.add_class("nbd-forks")
        self.widget = widgets.VBox([self._header, self._later, self.bar.box, self._replayed, self._rows.box, self._answer, self._below, self._style])
        self.widget.add_class("nbd-timeline")
        self._reset()

    def _reset(self) -> None:
        self.steps: dict[str, StepView] = {}
        self._replayed_ids: dict[str, None] = {}  # in order; drawn whole at each flush, within the budget
        self._detail = LiveDetail()
        self._live: dict[str, Any] = {}
        self._questions: dict[str, QuestionBox] = {}
        self._dirty_replayed = False
        self._dirty_live: set[str] = set()
        self._new_rows: list[str] = []
        self._last_flush = 0.0
        self._timer: threading.Timer | None = None
        self._header_at = 0.0
        self._header_status = ""
        self._told = False
        self._children: dict[str, ChildRow] = {}

    # -- display -------------------------------------------------------------------------

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        if self._closed:
            return self.static()._repr_mimebundle_()
        bundle: dict[str, Any] = dict(self.widget._repr_mimebundle_(**kwargs) or {})
        # The fallback is frozen as displayed and seen only where the widget is not: after
        # the kernel died, or without widgets. It cannot know the run goes on, so it says
        # "started" and how to resume, never "running" (finish() replaces it if the run ends).
        views = [v.but(state=UNFINISHED) if v.state in ("in_flight", "waiting") else v for v in self.steps.values()]
        run = self.run.but(status=UNFINISHED) if self.run.status.going else self.run
        return bundle | render_static(run, views, later=self.later, inner=self.inner())._repr_mimebundle_()

    def show(self) -> None:
        """Display the timeline once the run has opened (one that never opens shows its error alone)."""
        self._wanted = True

    def show_now(self) -> None:
        """Display it at once (a background run: its thread could not display it later)."""
        self._wanted = True
        self._display()

    def _display(self) -> None:
        if self._wanted and self._handle is None and not self.embedded:
            self._handle = display(self, display_id=self.display_id)
            displays.started(self)

    def restart(self, run: RunView) -> None:
        """Clear the rows for a new session of the same run (Resume): it replays, then goes on."""
        with self._lock:
            self.run = run
            old_rows = self._rows.box.children
            old_children = list(self._children.values())
            self._reset()
            self._replayed.value = ""
            self._rows.box.children = ()
            for row in [*old_rows, *(c.fold for c in old_children)]:  # their models would live on in the kernel and the page
                close_tree(row, keep=self._rows.shared)
            self._answer.value = ""
            self.later_status = None  # this display's own session is the run's latest again
            self.stopping = False
            self._told = False
            self._flush(force=True)
        displays.started(self)

    def went_on(self, line: str, status: Status) -> None:
        """A later cell's session of this run did something: say it in one line, under the header,
        and turn the buttons on or off for the run as that session left it (``status``)."""
        with self._lock:
            self.later = line
            self.later_status = status
            self._later.value = render_later(line)
            self._flush(force=True)

    def refresh(self) -> None:
        """Send the static form again, with its later line (once frozen; from the main thread)."""
        if self._frozen and self._handle is not None:
            self._handle.update(self.static())

    def add_below(self, child: Timeline) -> None:
        """Show another run's timeline (a fork of this one) under this one."""
        with self._lock:
            self._forks.append(child)
            self._below.children = (*self._below.children, child.widget)

    # -- the observer --------------------------------------------------------------------

    def run_changed(self, run: RunView) -> None:
        self.run = run
        self._display()
        if run.status.ended:
            self.finish()
        else:
            self._flush()

    def step_changed(self, step: StepView) -> None:
        with self._lock:
            previous = self.steps.get(step.step_id)
            self.steps[step.step_id] = step
            if step.state in ("replayed", "recorded") and step.step_id not in self._live:
                # Replayed steps arrive in a burst: one shared widget, redrawn at the throttle's pace.
                self._replayed_ids[step.step_id] = None
                self._dirty_replayed = True
                self._flush()
                return
            if step.step_id not in self._live:
                # Its widget is made at the next flush, in the state it has then: a fast step
                # that goes from in flight to live meanwhile costs the browser one row, not two.
                self._live[step.step_id] = None
                self._new_rows.append(step.step_id)
            self._dirty_live.add(step.step_id)
            # A change of state shows at once (within the throttle); streamed text at its pace.
            self._flush(soon=previous is None or previous.state != step.state)

    def question(self, pending: PendingDecision) -> None:
        """A question the run waits on was posted or answered: show or remove its buttons under its row."""
        if pending.run_id != self.run.run_id:
            for child in list(self._children.values()):  # a child's question: its own timeline shows it
                if child.timeline.shows(pending.run_id):
                    if not pending.decided:
                        child.asked()  # unfolded first: once its buttons exist, they are in view
                    child.timeline.question(pending)
            return
        with self._lock:
            if self._closed:
                return
            self._flush(force=True)  # the row asking must exist to hold the buttons
            row = self._live.get(pending.step_id)
            if row is None:
                return
            asked = self._questions.get(pending.step_id)
            shown = asked.holder if asked is not None else row
            retired = None
            if pending.decided:
                if asked is None or asked.pending is not pending:
                    return
                del self._questions[pending.step_id]
                holder = row
                retired = asked
            elif asked is not None and asked.pending is pending:
                return
            else:
                box = QuestionBox(self._widgets, pending, enabled=not self.foreground)
                holder = box.holder = self._widgets.VBox([row, box.box])
                self._questions[pending.step_id] = box
            self._rows.swap(shown, holder)
            if retired is not None:
                retired.holder.close()  # its row lives on, back in its box
                close_tree(retired.box)

    def shows(self, run_id: str) -> bool:
        """Whether this timeline draws run ``run_id``: its own, or a child's unfolded in it."""
        return run_id == self.run.run_id or any(c.timeline.shows(run_id) for c in list(self._children.values()))

    def child(self, run_id: str, step_id: str, stop: StopSignal | None) -> Observer:
        """Child run ``run_id`` goes on: its own timeline, unfolded from the row of step ``step_id``."""
        with self._lock:
            held = self._children.get(step_id)
            if held is not None:  # the same child again in this session (it waited for another holder)
                held.timeline.restart(held.timeline.run.but(status=Status.RUNNING))
                return held
            self._flush(force=True)  # the row of the step that started the child must exist
            timeline = Timeline(RunView(run_id, Status.RUNNING), throttle=self.throttle, foreground=self.foreground, embedded=True)
            timeline.going = not self.foreground
            held = self._children[step_id] = ChildRow(self._widgets, timeline, step_id, stop)
            row = self._live.get(step_id)
            replayed = row is None  # a resume going on with an unfinished child: its row moves to the live ones
            if replayed:
                self._dirty_replayed |= self._replayed_ids.pop(step_id, False) is None
                row = self._live[step_id] = self._rows.row(self._row(step_id) if step_id in self.steps else "")
            held.holder = self._widgets.VBox([row, held.fold])
            self._rows.append([held.holder]) if replayed else self._rows.swap(row, held.holder)
            self._flush(force=True)
            return held

    def inner(self) -> dict[str, str]:
        """Each unfolded child's timeline as static markup, by the step id of the row it folds into."""
        return {
            step_id: render_child(c.timeline.run, list(c.timeline.steps.values()), c.timeline.inner())
            for step_id, c in list(self._children.items())
        }

    def _on_timer(self) -> None:
        with self._lock:
            self._timer = None
        self._flush(force=True)

    def _recorded(self) -> int:
        return sum(1 for v in self.steps.values() if v.state in RECORDED_STATES)

    def _flush(self, *, force: bool = False, soon: bool = False) -> None:
        """Send what changed: now if ``force``; within the throttle if ``soon``; else at its pace.
        A run from a worker thread can record steps faster than a browser draws them (60-70 a
        second, scripted): a change that must show goes at most a throttle later, with every
        other change made meanwhile, by a timer if nothing else comes."""
        with self._lock:
            if self._closed:
                return
            now = time.monotonic()
            wait = self.throttle - (now - self._last_flush)
            if not force and wait > 0:
                if soon and self._timer is None:
                    self._timer = threading.Timer(wait, self._on_timer)
                    self._timer.daemon = True
                    self._timer.start()
                return
            self._last_flush = now
            if self._dirty_replayed:
                self._replayed.value = render_steps([self.steps[i] for i in self._replayed_ids], run_id=self.run.run_id, run_model=self.run.model)
                self._dirty_replayed = False
            if self._new_rows:
                rows = []
                for step_id in self._new_rows:
                    self._live[step_id] = self._rows.row(self._row(step_id))
                    rows.append(self._live[step_id])
                    self._dirty_live.discard(step_id)
                self._new_rows.clear()
                self._rows.append(rows)
            for step_id in self._dirty_live | set(self._detail.leave_out(self._settled)):
                self._live[step_id].value = self._row(step_id)
            self._dirty_live.clear()
            # A row's change of state shows at once; the header's counts and cost follow at
            # the throttle's pace (each redraw is a message), and its status at once.
            status_changed = self.run.status != self._header_status
            if not force or status_changed or now - self._header_at >= self.throttle:
                self._header.value = render_header(self.run)
                self._header_at, self._header_status = now, self.run.status
            status = self.later_status or self.run.status
            self.bar.update(status, self._recorded(), going=self.going, foreground=self.foreground, stopping=self.stopping)

    def _row(self, step_id: str) -> str:
        """A live row's markup: whole, or without its detail once ``LiveDetail`` left it out."""
        view = self.steps[step_id]
        if step_id in self._detail.left_out:
            return render_step(view, left_out=row_note(self.run.run_id, StepId.parse(step_id).turn), run_model=self.run.model)
        self._detail.drawn(step_id, detail_size(view))
        return render_step(view, run_model=self.run.model)

    def _settled(self, step_id: str) -> bool:
        return self.steps[step_id].state not in ("in_flight", "waiting", "retrying") and step_id not in self._questions

    def finish(self) -> None:
        """Draw the final state; in the foreground, replace the display by its static form."""
        if self._handle is None and not self.embedded and self.foreground:
            self._close()  # never shown (the run never opened): its widgets were made for nothing
            return
        with self._lock:  # the session is over: a row still open was cut off with it (a crash)
            for view in [v for v in self.steps.values() if v.state in ("in_flight", "waiting", "retrying")]:
                self.steps[view.step_id] = view.but(state="cut_off", error=view.error or "the session stopped here: no result was recorded")
                self._dirty_live.add(view.step_id)
        self._flush(force=True)
        self._header.value = render_header(self.run)  # the final counts, whatever the throttle
        self._answer.value = render_answer(self.run)
        if self.foreground and self._handle is not None and not self._frozen:  # once: the session and its cell both end it
            self._frozen = True
            self._handle.update(self.static())
            self._close()
        self._tell_earlier()

    def freeze(self) -> None:
        """Replace the display by its static form (from a cell, on the main thread)."""
        if self._handle is not None:
            self._frozen = True
            self._handle.update(self.static())
            self._close()
        self._tell_earlier()

    def _close(self) -> None:
        """Close the widgets the static form replaced: their models lived on in the kernel and the
        browser, a second copy of every row (3,000 models for 1,000 steps). Each timeline drawn
        inside (a child's, a fork's, which may go on) keeps its steps and sends nothing more."""
        inside = [self]
        for timeline in inside:
            with timeline._lock:
                timeline._closed = True
                if timeline._timer is not None:
                    timeline._timer.cancel()
                inside += [held.timeline for held in timeline._children.values()] + timeline._forks
        close_tree(self.widget)
        for timeline in inside:
            timeline._rows.close_shared()

    def _tell_earlier(self) -> None:
        if self.run.status.ended and not self._told:
            self._told = True
            displays.ended(self)
        else:
            displays.flush()

    def static(self) -> StaticTimeline:
        """The timeline as it stands, as HTML and text only (no widget)."""
        views = list(self.steps.values())
        return render_static(self.run, views, later=self.later, inner=self.inner())

