"""Cells whose run goes on in a thread of the kernel: start it, stop it, wait for it, and the buttons.

``%%agent --background`` returns at once: the timeline is displayed from the cell (a thread
cannot display), then the run goes on in a daemon thread holding its own lease, and the
kernel is free for other cells and for the timeline's buttons. Everything the run shows
goes through its own widgets; the worker never prints (ipykernel routes no thread output
to a cell). What a run needs while it goes (its store, its MCP servers) is closed when its
thread ends. When the kernel is shut down or restarted, every run still going is stopped
(``stop_at_shutdown``) before ipykernel terminates the kernel's child processes, so a
running command is cut off by the run itself, recorded in doubt, and every lease released.

The buttons' actions are here: Stop asks the run's handle; Resume starts a background
resume on the same timeline (in-doubt steps are asked by button); Fork copies the first N
steps into a new run (``core.whole_runs.fork``) and resumes it below, with its own timeline.
"""

from __future__ import annotations

import contextlib
import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

from ..agent.display.views import ended_by, starting_view, state_word
from ..agent.fleet.background_runs import (
    BackgroundRun,
    background_run,
    background_runs,
    start_background,
    started_background_runs,
    stop_all,
)
from ..agent.fleet.decisions import PendingDecision, who
from ..agent.run.crash import CrashPoint
from ..agent.run.hooks import RunHooks
from ..agent.run.outcomes import AgentResult
from ..agent.run.stopping import RunStopped
from ..core.holders import describe_holder
from ..core.runs import read_summary
from ..core.status import Status
from ..core.stores import opened
from ..core.whole_runs.fork import fork
from ..errors import RunLockedError, RunNotRunningError
from .timeline import Timeline

if TYPE_CHECKING:
    from ..agent.fleet.batch import RunResult

__all__ = ["CellActions", "launch", "stop_at_shutdown", "stop_run", "wait_run"]

SHUTTING_DOWN = "stopped because its kernel is shutting down"

_TIMELINES: dict[str, Timeline] = {}
"""The latest timeline of each run started here, for ``%agent_wait`` to freeze."""


_WAITED: weakref.WeakSet[BackgroundRun] = weakref.WeakSet()
"""The background sessions whose end a ``%agent_wait`` has reported (and whose timeline it froze)."""


_FORKS: dict[tuple[str | None, str, int], str] = {}
"""(store, run id, steps) -> the run the Fork button made of them in this kernel: one per click target."""


ENDING_SESSION_GRACE = 10.0
"""Seconds a Resume click waits for a session of its run that has ended, or is stopping, to finish."""

GoOn = Callable[[str, "str | None", Timeline], Any]
"""(run id, store, timeline) -> resume that run in the background on that timeline (``cells``)."""


def refuse_if_going(run_id: str, resources: contextlib.ExitStack) -> None:
    """``RunLockedError`` (``resources`` closed) if ``run_id`` goes on in the background here.

    The lease cannot refuse it: in one process a newer writer of a run supersedes the older
    (a cell run twice relies on it), which would take the run from under its thread."""
    if any(h.run_id == run_id for h in background_runs()):
        resources.close()
        raise RunLockedError(
            f"run {run_id!r} already goes on in the background in this kernel: %agent_wait {run_id} "
            f"waits for it, %agent_stop {run_id} stops it",
            run_id=run_id,
            holder=None,
        )


def launch(
    timeline: Timeline,
    go: Callable[[RunHooks], AgentResult],
    *,
    store: str | None,
    resources: contextlib.ExitStack,
    crash_at: CrashPoint | None = None,
    go_on: GoOn | None = None,
) -> BackgroundRun:
    """Show ``timeline`` now and run ``go`` in the background under it; ``resources`` close at its end.

    ``go_on`` resumes a run on a timeline, for the Resume and Fork buttons (the cells hand
    theirs in); without one, those buttons say how to resume by hand."""
    run_id = timeline.run.run_id
    refuse_if_going(run_id, resources)
    actions = CellActions(run_id, store, timeline, go_on)
    timeline.foreground = False
    timeline.going = True
    timeline.bar.actions = actions
    timeline.show_now()
    hooks = RunHooks(observer=timeline, before_step=crash_at.here() if crash_at is not None else None, child_crash=crash_at)
    handle = start_background(go, hooks=hooks, run_id=run_id, store=store)
    actions.handle = handle
    handle.decisions.listen(timeline.question)
    handle.when_done(lambda done: _ended(done, timeline, resources))
    _TIMELINES[run_id] = timeline
    return handle


def _ended(handle: BackgroundRun, timeline: Timeline, resources: contextlib.ExitStack) -> None:
    """The run's thread ended: close what it held and show how it ended (the error too, if it raised one)."""
    with contextlib.suppress(Exception):  # a server that will not stop must not hide how the run ended
        resources.close()
    timeline.going = False
    error = handle.error
    if error is not None and not timeline.run.status.ended:
        # The loop did not get to show it: the run never opened (locked, unknown), or a bug.
        timeline.run = ended_by(error, timeline.run)
    timeline.finish()
    timeline.bar.say("")


class CellActions:
    """What the timeline's buttons do for one run shown in this kernel.

    ``go_on`` is how the cells resume a run (Resume, and a fork's new run), handed in so that
    this module needs nothing of theirs.
    """

    def __init__(self, run_id: str, store: str | None, timeline: Timeline, go_on: GoOn | None = None) -> None:
        self.run_id = run_id
        self.store = store
        self.timeline = timeline
        self.go_on = go_on
        self.handle: BackgroundRun | None = None

    def stop(self) -> None:
        if self.handle is not None and not self.handle.done:
            self.timeline.stopping = True
            self.handle.stop(f"stopped by {who()} with the Stop button")
            self.timeline.bar.say("stopping at the next step boundary...")

    def resume(self) -> None:
        if self.go_on is None:
            self.timeline.bar.say(f"resume it with %agent_resume {self.run_id} --background")
            return
        self._let_an_ended_session_finish()
        # Refuse before touching anything: a second click (sent before the front end heard the
        # button go off) must not close the rows, and the question buttons, of the session going on.
        refusal = self._cannot_resume()
        if refusal:
            self.timeline.bar.say(refusal)
            return
        summary = read_summary(self.run_id, self.store)
        self.timeline.restart(self.timeline.run.but(status=Status.RUNNING, error="", detail="", steps=summary.steps))
        self.go_on(self.run_id, self.store, self.timeline)

    def _let_an_ended_session_finish(self) -> None:
        """A session whose run has ended (stopped, or on its own) still closes what it held and
        draws its last state, which is what turns Resume on; a Resume clicked in that moment
        waits for it (bounded) rather than being refused as if the run went on. So does one
        asked to stop: it records its end and lets the lease go before the stop has travelled
        up its thread, and a Resume clicked then (the run reads as stopped) waits for it too."""
        for handle in background_runs():
            if handle.run_id == self.run_id and (handle.ending or handle.stopping):
                handle.join(ENDING_SESSION_GRACE)  # how it ended is on its timeline; a slow end is refused below

    def _cannot_resume(self) -> str:
        """Why Resume cannot go on with the run as it stands now (the state, not the button's look), or ''."""
        going = [h for h in background_runs() if h.run_id == self.run_id]
        if going or self.timeline.going:
            state = going[0].status if going else "running"
            return f"run {self.run_id} is {state} here already: nothing to resume (Stop stops it)"
        summary = read_summary(self.run_id, self.store)
        if summary.holder is not None:
            return f"run {self.run_id} is being written by {describe_holder(summary.holder)}: resume it once that ends"
        if not Status(summary.status).resumable:
            return f"run {self.run_id} is {state_word(summary.status)}: nothing to resume"
        return ""

    def fork(self, at: int) -> None:
        if self.go_on is None:
            self.timeline.bar.say(f"fork it with nb-durable fork {self.run_id} NEW --at {at}, then %agent_resume NEW")
            return
        # One fork per (run, step) however often the click arrives: a second message sent before
        # the front end heard the first would otherwise make a second fork, redoing every effect.
        key = (self.store, self.run_id, at)
        made = _FORKS.get(key)
        if made is not None:
            self.timeline.bar.say(f"the first {at} steps are forked into {made} already, below")
            return
        new_id = _fork_id(self.run_id, at, self.store)
        fork(self.run_id, new_id, at=at, root=self.store).close()
        _FORKS[key] = new_id
        child = Timeline(starting_view(new_id, read_summary(new_id, self.store).settings), foreground=False, embedded=True)
        self.timeline.add_below(child)
        self.go_on(new_id, self.store, child)
        self.timeline.bar.say(f"forked the first {at} steps into {new_id}, below")


def _fork_id(run_id: str, at: int, store: str | None) -> str:
    """A new run id for a fork of ``run_id`` at ``at``: ``<run>-fork<at>``, numbered if taken."""
    base = f"{run_id}-fork{at}"
    with opened(store) as runs:
        taken = set(runs.run_ids())
    candidate, n = base, 1
    while candidate in taken:
        n += 1
        candidate = f"{base}-{n}"
    return candidate


def _background_run(run_id: str | None, store: str | None) -> BackgroundRun:
    """This process's background run ``run_id`` (``background_run``); one named that another
    process writes (another kernel, a worker) is refused saying so, and where it runs."""
    try:
        return background_run(run_id)
    except RunNotRunningError as e:
        if run_id is None:
            raise
        try:
            with opened(store, existing=True) as runs:
                holder = runs.holder(run_id)
        except Exception:  # no store, a bad id: the refusal as it stands says enough
            holder = None
        if holder is None:
            raise
        raise RunNotRunningError(run_id=run_id, going=e.going, elsewhere=describe_holder(holder)) from None


def stop_run(run_id: str | None, store: str | None = None) -> BackgroundRun:
    """``%agent_stop``: ask the named (or the only) background run to stop; returns at once."""
    handle = _background_run(run_id, store)
    if handle.done:
        raise RunNotRunningError(run_id=handle.run_id, going=[h.run_id for h in background_runs()], ended=handle.status)
    timeline = _TIMELINES.get(handle.run_id)
    if timeline is not None:
        timeline.stopping = True
    handle.stop(f"stopped by {who()} with %agent_stop")
    return handle


def wait_run(run_id: str | None, timeout: float | None, store: str | None = None) -> AgentResult | RunResult | None:
    """``%agent_wait``: block until the run (or every background run) ends; freeze its timeline. A run
    another process runs, or one queued for a worker, is waited for through the store (``wait_elsewhere``).

    Returns the one run's result; raises the error it ended with, as a foreground cell would
    (a stopped run: ``RunStopped``, saying how to go on). A person interrupting the wait, or
    the timeout, leaves the run going. So does a question the run asks: while this cell holds
    the kernel no click can reach it, so the wait ends (``UsageError``) and gives the kernel back.
    """
    if run_id:
        try:
            handles = [_background_run(run_id, store)]
        except RunNotRunningError:
            # Here: it loads the agent loop, which loading the extension must not.
            from ..agent.display.inert_text import terminal_text
            from ..agent.display.words import in_words_of
            from ..agent.fleet.waiting import wait_elsewhere

            ran = wait_elsewhere(run_id, store, timeout, lambda line: print(f"nb_durable: {terminal_text(in_words_of('notebook', line))}"))
            if ran is None:
                raise
            return ran
    else:
        unseen = _ended_unseen()
        handles = [h for h in started_background_runs() if not h.done or h in unseen]
    if not handles:
        ended = started_background_runs()
        if not ended:  # nothing was ever started here: a mistake, said as %agent_stop says it
            raise RunNotRunningError(run_id=None, going=[])
        listed = ", ".join(f"{h.run_id} ({h.status})" for h in ended[-5:])
        print(f"nb_durable: no run goes on in the background, so there is nothing to wait for; ended here: {listed}")
    deadline = None if timeout is None else time.monotonic() + timeout
    result: AgentResult | None = None
    failures: list[BaseException] = []
    for handle in handles:
        try:
            result = _until_ended(handle, handles, deadline, timeout)
        except BaseException as e:
            if not handle.done:
                raise  # the wait was interrupted or timed out; the run goes on
            if isinstance(e, KeyboardInterrupt):
                said = state_word(str(handle.status))
                e = RunStopped(f"run {handle.run_id} was {said} ({e}); %agent_resume {handle.run_id} goes on from there")
            failures.append(e)
        finally:
            timeline = _TIMELINES.get(handle.run_id)
            if handle.done:
                _WAITED.add(handle)
                if timeline is not None:
                    timeline.freeze()
    if failures:
        raise failures[0]
    return result if len(handles) == 1 else None


def _ended_unseen() -> list[BackgroundRun]:
    """The background sessions that ended before any ``%agent_wait`` saw them (a fast failure
    under Run All ends before the next cell begins), leaving out one a later session of its run
    in this kernel went on from: its end is old news."""
    started = started_background_runs()
    latest = {h.run_id: h for h in started}
    unseen = []
    for handle in started:
        timeline = _TIMELINES.get(handle.run_id)
        later = timeline is not None and timeline.later_status is not None
        if handle.done and handle not in _WAITED and latest[handle.run_id] is handle and not later:
            unseen.append(handle)
    return unseen


def stop_at_shutdown(ipython: Any) -> None:
    """Stop this kernel's background runs as soon as a shutdown (or restart) is asked.

    ipykernel sets ``shell.exit_now`` in its shutdown handler, before it terminates the
    kernel's child processes (a running run_bash among them) and well before atexit: a run
    stopped then records its stop; one whose command was killed under it would record the
    killed command as a result and go on. Registering twice is harmless.
    """
    if not getattr(ipython, "has_trait", lambda name: False)("exit_now"):
        return
    with contextlib.suppress(ValueError):  # not registered yet
        ipython.unobserve(_on_exit_now, names="exit_now")
    ipython.observe(_on_exit_now, names="exit_now")


def _on_exit_now(change: Any) -> None:
    if change.get("new"):
        stop_all(SHUTTING_DOWN)


_POLL = 0.1
"""Seconds between looks, while ``%agent_wait`` waits, at whether a run asks a question."""


def _until_ended(handle: BackgroundRun, watched: list[BackgroundRun], deadline: float | None, timeout: float | None) -> AgentResult:
    """``handle.wait()`` until ``deadline``, unless one of ``watched`` waits for a person first."""
    while not handle.done:
        for asking in watched:
            if asking.pending:
                raise UsageError(_asked(asking, asking.pending[0]))
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            raise TimeoutError(
                f"run {handle.run_id} is still {handle.status} after {timeout:g} s; it goes on in the background "
                f"(%agent_wait {handle.run_id} waits again, %agent_stop {handle.run_id} stops it)"
            )
        if handle.thread is not None:
            handle.thread.join(_POLL if left is None else min(_POLL, left))
    return handle.wait(0)


def _asked(handle: BackgroundRun, pending: PendingDecision) -> str:
    """Why ``%agent_wait`` stopped waiting: the question, and how to answer it."""
    buttons = " / ".join(choice.capitalize() for choice in pending.choices)
    call = pending.input.get("command", pending.input) if isinstance(pending.input, dict) else pending.input
    what = (
        f"may it run {pending.tool} {str(call)[:200]!r}?"
        if pending.kind == "approval"
        else f"what becomes of step {pending.step_id}, in doubt?"
    )
    return (
        f"run {handle.run_id} waits for an answer ({what}), and no click can reach the kernel while "
        f"%agent_wait holds it, so it stopped waiting. Answer with the {buttons} buttons under the step's "
        f"row (or the run's handle: .pending[0].{pending.choices[0]}(note=...)), then %agent_wait {handle.run_id} again."
    )
