"""What the caller of a run hands in: who decides, who watches, what things cost.

``RunHooks`` travels as one value from a front end (a cell, a CLI command, a script) to the
loop. Two kinds of hook, with two rules:

* Deciders (``ask``, ``approve``) are part of the run: their answers are recorded as
  decisions, so replay never asks again.
* Watchers (``observer``) are display only: display never changes what is recorded. Their
  calls go through ``RunHooks.show_step``/``show_run``, which turn an observer's exception
  into a ``DisplayWarning`` instead of letting it fail the step it was drawing. What an
  observer says with a child's start (``child_trace``: a trace context) is recorded beside
  it, for observers alone: nothing that replays, hashes or forks a run reads it.

``before_step`` and ``after_effect`` are the hooks allowed to raise into a run: they are
called as each live step starts (after its intent is recorded) and once its effect has run
(before its result is recorded), for crash switches such as ``--crash-at``.
``stop`` is how another thread stops the run: it is checked before each live step begins
(``agent.run.stopping`` says where else), and, with ``while_waiting``, while a step waits on a
Message Batch.
"""

from __future__ import annotations

import getpass
import os
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ...core.steps import StepRecord
from ..display.views import RunView, StepView
from ..money.cost import Price
from .stopping import StopSignal

if TYPE_CHECKING:
    from .crash import CrashPoint

__all__ = [
    "Approval",
    "Approver",
    "DisplayWarning",
    "InDoubtAsker",
    "Observer",
    "Observers",
    "RunHooks",
    "StepStarting",
    "who",
]


def who() -> str:
    """The person at this process, as every answer records them: the JupyterHub user, else the login.

    The one owner of who answered: buttons add `` (button)``, the input box `` (input box)``."""
    name = os.environ.get("JUPYTERHUB_USER", "")
    if not name:
        try:
            name = getpass.getuser()
        except Exception:  # no login name (a container without a passwd entry)
            name = ""
    return name or "person"


@dataclass(frozen=True, slots=True)
class Approval:
    """A person's answer to "may this tool call run?"."""

    approved: bool
    by: str = field(default_factory=who)
    note: str = ""


Approver = Callable[[str, Any, str], Approval]
"""(tool name, tool input, why approval is needed) -> Approval."""

InDoubtAsker = Callable[[StepRecord, Any], Literal["rerun", "skip", "fail"] | tuple[str, str, str]]
"""(the in-doubt step, the tool input) -> what to do, or (what to do, who decided, why)."""

StepStarting = Callable[[int, StepView], None]
"""(the step's position in the run, 0-based, its view) -> None, or raise to stop the run."""


class Observer:
    """Hears a run's progress; every method is a no-op here, override what you show."""

    def run_changed(self, run: RunView) -> None:
        """The run's header changed (status, counts, cost)."""

    def step_changed(self, step: StepView) -> None:
        """A step appeared or changed state; views with the same ``step_id`` replace each other."""

    def hears_steps(self) -> bool:
        """Whether ``step_changed`` draws anything: if not, a model step's text is not rebuilt into
        a view for every piece streamed (a worker's observer, by default, draws nothing)."""
        return type(self).step_changed is not Observer.step_changed

    def child(self, run_id: str, step_id: str, stop: StopSignal | None) -> Observer:
        """Child run ``run_id``, started by step ``step_id``, goes on now: the observer that draws it
        (``stop`` stops that child alone). None here: a child's steps are not drawn."""
        return Observer()

    def child_trace(self, run_id: str, step_id: str) -> Mapping[str, str]:
        """Child run ``run_id`` is about to be started by step ``step_id``: the trace context to
        record with its start (W3C ``{"traceparent": ...}``), so that an observer of a later
        session, in any process, draws the child where this one would. Nothing here."""
        return {}


class Observers(Observer):
    """Several observers heard as one, in order."""

    def __init__(self, *observers: Observer) -> None:
        self.observers = observers

    def run_changed(self, run: RunView) -> None:
        for observer in self.observers:
            observer.run_changed(run)

    def step_changed(self, step: StepView) -> None:
        for observer in self.observers:
            observer.step_changed(step)

    def hears_steps(self) -> bool:
        return any(observer.hears_steps() for observer in self.observers)

    def child(self, run_id: str, step_id: str, stop: StopSignal | None) -> Observer:
        return Observers(*(observer.child(run_id, step_id, stop) for observer in self.observers))

    def child_trace(self, run_id: str, step_id: str) -> Mapping[str, str]:
        said: dict[str, str] = {}
        for observer in self.observers:
            said.update(observer.child_trace(run_id, step_id))
        return said


class DisplayWarning(UserWarning):
    """An observer raised while drawing a run; the run went on, its record unchanged."""


@dataclass(frozen=True)
class RunHooks:
    """The caller's hooks into a run (every one optional)."""

    ask: InDoubtAsker | None = None
    """Decides an in-doubt step when the run's in-doubt choice is "ask"."""
    approve: Approver | None = None
    """Answers tool calls that need a person's approval."""
    observer: Observer = field(default_factory=Observer)
    """Draws the run (display only)."""
    prices: Mapping[str, Price] | None = None
    """Prices per model, over the bundled table."""
    sleep: Callable[[float], None] = time.sleep
    """Waits between retries (tests pass one that does not wait)."""
    before_step: StepStarting | None = None
    """Called as each live step starts; may raise (crash switches)."""
    after_effect: StepStarting | None = None
    """Called as each live step's effect has run, before its result is recorded; may raise."""
    stop: StopSignal | None = None
    """Set from another thread to stop the run at its next step boundary."""
    child_before_step: StepStarting | None = None
    """Called as each live step of the run's child runs starts (``agent.delegation``): a
    worker's graceful stop reaches the whole tree; a crash switch, counted per run, does not."""
    while_waiting: Callable[[], None] | None = None
    """Called now and then while a live model step waits on its Message Batch, which may take
    hours (``batch_step``); may raise to stop the run there (a worker's graceful stop): the
    batch is recorded, so the resume polls it."""
    child_crash: CrashPoint | None = None
    """A crash switch aimed inside one of the run's children (``--crash-at K.N``)."""
    deciders_for: Callable[[str, StopSignal | None], tuple[InDoubtAsker, Approver]] | None = None
    """The deciders of a child run, by its id and its stop signal, so the question a child asks
    names the child (a timeline shows its buttons under the child's row) and a stop of that child
    drops it; None: the run's own decide for it."""

    def check_stop(self) -> None:
        """A live step is about to begin: raise ``RunStopped`` if the run was asked to stop."""
        if self.stop is not None:
            self.stop.check()

    def show_step(self, view: StepView) -> None:
        """Tell the observer a step changed; its failure is a warning, never the step's."""
        try:
            self.observer.step_changed(view)
        except Exception as e:
            _warn(self.observer, e, f"step {view.step_id}")

    def show_run(self, view: RunView) -> None:
        """Tell the observer the run changed; its failure is a warning, never the run's."""
        try:
            self.observer.run_changed(view)
        except Exception as e:
            _warn(self.observer, e, f"run {view.run_id}")

    def child_observer(self, run_id: str, step_id: str, stop: StopSignal | None) -> Observer:
        """The observer of child run ``run_id``; its failure is a warning, and the child is not drawn."""
        try:
            return self.observer.child(run_id, step_id, stop)
        except Exception as e:
            _warn(self.observer, e, f"child run {run_id}")
            return Observer()

    def child_trace(self, run_id: str, step_id: str) -> dict[str, str]:
        """What the observer records with child run ``run_id``'s start (``Observer.child_trace``):
        text only, as it must cross the log; its failure is a warning, and nothing is recorded."""
        try:
            said = dict(self.observer.child_trace(run_id, step_id))
            if not all(type(k) is str and type(v) is str for k, v in said.items()):
                raise TypeError(f"a trace context is text names and values, not {said!r}")
        except Exception as e:
            _warn(self.observer, e, f"the start of child run {run_id}")
            return {}
        return said

    def starting(self, position: int, view: StepView) -> None:
        """A live step starts: call ``before_step``, letting what it raises through."""
        if self.before_step is not None:
            self.before_step(position, view)

    def effect_ran(self, position: int, view: StepView) -> None:
        """A live step's effect has run, its result not yet recorded: call ``after_effect``."""
        if self.after_effect is not None:
            self.after_effect(position, view)


def _warn(observer: Observer, error: Exception, what: str) -> None:
    warnings.warn(
        f"{type(observer).__name__} failed drawing {what} ({type(error).__name__}: {error}); "
        "the run goes on and its record is unchanged.",
        DisplayWarning,
        stacklevel=3,
    )
