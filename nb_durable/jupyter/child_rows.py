"""A child run inside its parent's timeline: the row of the step that started it unfolds into
the child's own timeline.

A delegate call's child (``agent.delegation``) is an ordinary run with its own timeline: its
rows, its state overlay, its own buttons (Stop for that child alone; the answer buttons of a
question it asks, routed to it by the question's run id). ``ChildRow`` holds that timeline
under the parent's ``delegate:`` row, in an ``Accordion`` whose title (plain text) says the
child's id, status and steps, folded until it is opened (or until the child asks a person
something). It is the observer the run hands the child (``Observer.child``): display only, as
every observer, so what it shows never changes what is recorded.

The static form nests the same way: a child's header, rows and answer go inside the details
of its start row (``render_child``), from the live timeline (``Timeline.static``) or from the
logs (``inner_from_log``, for ``%agent_show``). Every text is escaped by ``render``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..agent.delegation.tree import with_child_times, with_children
from ..agent.display.step_ids import StepId
from ..agent.display.views import RunView, StepView, many, state_word, views_of
from ..agent.fleet.decisions import who
from ..agent.run.hooks import Observer
from ..agent.run.stopping import StopSignal
from ..core.runs import read_run
from ..core.stores import Store
from ..core.whole_runs.children import child_id
from ..errors import RunNotFoundError
from .render import render_answer, render_header, render_steps

if TYPE_CHECKING:
    from .timeline import Timeline

__all__ = ["ChildActions", "ChildRow", "inner_from_log", "render_child", "title_of"]


def title_of(run: RunView) -> str:
    """The folded row's title: the child's id, its status and its steps (plain text)."""
    return f"child run {run.run_id} · {state_word(run.status)} · {many(run.steps, 'step')}"


class ChildActions:
    """The buttons of a child's own timeline: Stop stops that child alone; it resumes with its parent."""

    def __init__(self, timeline: Timeline, stop: StopSignal | None) -> None:
        self.timeline = timeline
        self.stop_signal = stop

    def stop(self) -> None:
        if self.stop_signal is not None:
            self.timeline.stopping = True
            self.stop_signal.request(f"stopped alone by {who()} with its Stop button")
            self.timeline.bar.say("stopping this child at its next step boundary...")

    def resume(self) -> None:
        self.timeline.bar.say("a child run goes on with its parent: resume the parent")

    def fork(self, at: int) -> None:
        run_id = self.timeline.run.run_id
        self.timeline.bar.say(f"fork it with nb-durable fork {run_id} NEW --at {at}, then %agent_resume NEW")


class ChildRow(Observer):
    """A child run's own timeline, folded under the row of the parent's step that started it."""

    def __init__(self, widgets: Any, timeline: Timeline, step_id: str, stop: StopSignal | None) -> None:
        self.timeline = timeline
        self.step_id = step_id
        timeline.bar.actions = ChildActions(timeline, stop)
        self.fold = widgets.Accordion(children=[timeline.widget], titles=(title_of(timeline.run),))
        self.fold.add_class("nbd-child")
        self.fold.selected_index = None
        self.holder: Any = None
        """The parent's row and this fold together, as the parent's timeline shows them."""

    def run_changed(self, run: RunView) -> None:
        if run.status.ended:
            self.timeline.going = False
        self.timeline.run_changed(run)
        self.fold.set_title(0, title_of(run))

    def step_changed(self, step: StepView) -> None:
        self.timeline.step_changed(step)

    def child(self, run_id: str, step_id: str, stop: StopSignal | None) -> Observer:
        return self.timeline.child(run_id, step_id, stop)

    def asked(self) -> None:
        """The child asks a person something: unfold it, so its buttons are seen."""
        self.fold.selected_index = 0


def render_child(run: RunView, steps: Iterable[StepView], inner: Mapping[str, str] | None = None) -> str:
    """A child run's timeline as markup to fold into its start row (``render_step``'s ``inner``)."""
    return (
        f'<div class="nbd-timeline nbd-child">{render_header(run)}'
        f"<div>{render_steps(steps, inner, run_id=run.run_id, run_model=run.model)}</div>{render_answer(run)}</div>"
    )


def inner_from_log(store: Store, run_id: str, steps: Iterable[StepView], times: Mapping[str, float]) -> dict[str, str]:
    """Each delegate step's child, read from its log and nested the same way, by step id; its own
    delegate rows timed by their children (``times``: ``child_times`` of the run at the top)."""
    out: dict[str, str] = {}
    for step in steps:
        if StepId.parse(step.step_id).kind != "delegate":
            continue
        child = child_id(run_id, step.step_id)
        try:
            run, child_steps = views_of(read_run(child, store))
        except RunNotFoundError:
            continue  # deleted since, or never written (a crash between the two records on JSONL)
        run, _ = with_children(run, store)  # a child with children of its own bills its tree, as its parent does
        child_steps = with_child_times(child, child_steps, times)
        out[step.step_id] = render_child(run, child_steps, inner_from_log(store, child, child_steps, times))
    return out
