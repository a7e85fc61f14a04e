"""The notebook side of a run: choose the model, show the timeline, ask the person, and turn
failures into one clear paragraph.

The magics parse arguments and call one function here; these call the agent loop. A run
failure (a 401, a model that kept failing, a decision nobody could make) fails the cell, so
Run All stops, but shows a short paragraph instead of a traceback: the message already says
what happened and what to do, and the run stays resumable.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import Any

from IPython import get_ipython
from IPython.core.error import UsageError

from ..agent.delegation.tree import child_times, with_child_times, with_children
from ..agent.display.step_ids import StepId
from ..agent.display.views import ended_by, starting_view, views_of
from ..agent.fleet.background_runs import BackgroundRun
from ..agent.run.crash import CrashPoint
from ..agent.run.hooks import RunHooks
from ..agent.run.kept import kept_note, settings_now
from ..agent.run.loop import AgentResult, continue_agent, resume_agent, run_prepared
from ..agent.run.prepare import prepare_run
from ..agent.settings import AgentSettings, Change, FrontEndOptions, SessionOptions
from ..agent.settings.rows import Command, sort_values
from ..agent.tools.mcp.run_tools import RunTools, recorded_settings, tools_for_run
from ..core.runs import RunRecord, latest_run, latest_unfinished, list_runs, read_run, read_summary
from ..core.status import Status
from ..core.stores import Store, opened
from ..errors import (
    McpServerError,
    NbDurableError,
    NoUnfinishedRunError,
    SimulatedCrash,
)
from .background import launch, refuse_if_going
from .budget import turns_text
from .child_rows import inner_from_log
from .flags import button_resume, shell_settings, short_paragraph
from .namespace import KERNEL_SOURCE, RUN_PYTHON, recorded_python, rerun_recorded_python
from .namespace import kernel_tools as make_kernel_tools
from .prompts import foreground_hooks
from .render import render_static
from .timeline import RECORDED_STATES, StaticTimeline, Timeline

__all__ = ["RunInterrupted", "StaticTimeline", "agent_cell", "continue_cell", "resume_cell", "show_run"]

Go = Callable[[RunHooks], AgentResult]
"""A run to make: given its hooks (foreground or background ones), run it and return its result."""


class RunInterrupted(KeyboardInterrupt):
    """The interrupt button stopped a cell's run. Still a KeyboardInterrupt, so Run All stops
    there; shown as one line, since stopping a run is what the button is for, not a bug to trace."""

    def _render_traceback_(self) -> list[str]:
        return [f"KeyboardInterrupt: {self}"]


def _interrupted(timeline: Timeline) -> RunInterrupted:
    """Where the interrupt stopped the timeline's run, and how it goes on."""
    run_id = timeline.run.run_id
    steps = list(timeline.steps.values())
    cut = next((n for n in range(len(steps), 0, -1) if steps[n - 1].state not in RECORDED_STATES), None)
    where = f"at step {cut} ({steps[cut - 1].title})" if cut else f"after step {len(steps)}" if steps else "before its first step"
    if timeline.run.status is Status.IN_DOUBT:
        return RunInterrupted(
            f"run {run_id} interrupted {where} while it ran, so whether it took effect is unknown; %agent_resume "
            f"{run_id} goes on, telling the model so (--in-doubt rerun runs it again)"
        )
    return RunInterrupted(f"run {run_id} interrupted {where}; %agent_resume {run_id} goes on")


def _in_cell(timeline: Timeline, go: Callable[[], AgentResult]) -> AgentResult:
    """Run ``go`` under the timeline; an nb_durable error or an interrupt is shown as its message alone."""
    try:
        return go()
    except KeyboardInterrupt:
        raise _interrupted(timeline) from None
    except (Exception, SimulatedCrash) as e:
        if not timeline.run.status.ended:
            # The session never showed how it ended (the run never opened: locked, unknown, a bad setting): say so.
            timeline.run = ended_by(e, timeline.run)
        if isinstance(e, SimulatedCrash) or (isinstance(e, NbDurableError) and not e.user_mistake):
            raise short_paragraph(e) from None
        raise  # a user's mistake becomes a UsageError in the magic; anything else is a bug
    finally:
        timeline.finish()


def _launch(
    timeline: Timeline,
    go: Go,
    resources: contextlib.ExitStack,
    *,
    background: bool,
    store: str | None,
    crash_at: CrashPoint | None,
    shown: bool = False,
) -> AgentResult | BackgroundRun:
    """Run ``go`` in this cell (the kernel held, input() asks), or in the background (buttons ask).

    ``resources`` (the store, MCP servers) close when the run ends, in either case.
    """
    if background:
        return launch(timeline, go, store=store, resources=resources, go_on=_resume_on, crash_at=crash_at)
    refuse_if_going(timeline.run.run_id, resources)
    with resources:
        if not shown:
            timeline.show()
        return _in_cell(timeline, lambda: go(foreground_hooks(timeline, crash_at)))


def agent_cell(
    task: str,
    *,
    run_id: str | None,
    new: bool,
    values: Mapping[str, Any],
    crash_at: CrashPoint | None = None,
) -> AgentResult | BackgroundRun:
    """Run (or replay, or resume) the agent of a ``%%agent`` cell under a live timeline.

    ``values`` are the cell's settings by name (``%config`` and its flags): the run's, its
    session's and the cell's own (the store, MCP servers in ``mcp_config``, ``kernel_tools``
    over this notebook's namespace, ``background`` to return the run's handle at once).
    """
    prepared = prepare_run(task, run_id=run_id, new=new, values=values)
    if prepared.note:
        print(f"nb_durable: {prepared.note}")
    front = prepared.front
    timeline = Timeline(starting_view(prepared.run_id, prepared.settings.to_json()), foreground=not front.background)
    resources = contextlib.ExitStack()
    with _closing_on_error(resources):
        runs = resources.enter_context(opened(front.store))
        tools = resources.enter_context(
            _extra_tools(
                prepared.run_id,
                runs,
                front.mcp_config,
                False,
                prepared.settings.approve_bash,
                kernel_tools=front.kernel_tools,
                background=front.background,
            )
        )

    def go(hooks: RunHooks) -> AgentResult:
        return run_prepared(prepared, tools=tools.registry, store=runs, hooks=hooks)

    return _launch(timeline, go, resources, background=front.background, store=front.store, crash_at=crash_at)


@contextlib.contextmanager
def _closing_on_error(resources: contextlib.ExitStack) -> Any:
    """Close what was opened so far if opening the rest fails; else leave it to the run's end."""
    try:
        yield
    except BaseException:
        resources.close()
        raise


def _extra_tools(
    run_id: str,
    runs: Store,
    mcp: str | None,
    accept: bool,
    approve_bash: str | None,
    *,
    kernel_tools: bool,
    background: bool = False,
) -> RunTools:
    """The run's tools beyond the built-ins: MCP servers (as recorded, or from ``mcp``), and the
    kernel's own (asked for, or recorded). A mistake in them is shown in the cell, like any.

    The kernel's tools never run in the background: run_python would execute in the
    notebook's namespace from another thread while the person's cells run there too.
    """
    recorded = recorded_settings(run_id, runs)
    sources = (recorded[0].get("sources") or {}) if recorded is not None else {}
    extra = []
    if kernel_tools or any(s.get("kind") == KERNEL_SOURCE for s in sources.values()):
        if background:
            raise UsageError(
                f"run {run_id!r} uses the kernel's tools (--kernel-tools), which cannot run in the background: "
                "run_python would execute in this notebook's namespace while your cells do. Run it in the "
                "foreground (without --background)."
            )

        approve_run = bool(sources.get(RUN_PYTHON, {}).get("approve", True))
        extra = make_kernel_tools(get_ipython(), approve_run=approve_run)
    try:
        return tools_for_run(run_id, runs, mcp=mcp or None, accept_changes=accept, approve_bash=approve_bash, extra=extra)
    except McpServerError as e:
        raise short_paragraph(e) from None


def _say_kept(record: RunRecord, configured: Mapping[str, Any] | None, command: Command, timeline: Timeline | None = None) -> None:
    """Say once which ``%config`` values the run keeps its recorded ones over, if any differ: in
    the cell, or beside the buttons of ``timeline`` for a click (what a click prints reaches no
    cell), where it stands for the session, replacing what an earlier session's said."""
    note = None
    if configured:
        try:
            now = settings_now(record)
        except ValueError:  # not an agent's run: going on refuses it, in its own words
            return
        note = kept_note(record.run_id, configured, now, source="%config", command=command, front="notebook")
    if timeline is not None:
        timeline.bar.keep_saying(note or "")
    elif note:
        print(f"nb_durable: {note}")


def _warn_kernel_state(record: RunRecord, rerun_python: bool) -> None:
    """Say that replay does not rebuild what run_python did; re-run its code only if asked."""
    calls = recorded_python(record)
    if not calls:
        return
    if rerun_python:
        said = rerun_recorded_python(get_ipython(), calls)
        print(f"nb_durable: ran the {len(calls)} recorded run_python call(s) again first: " + "; ".join(said))
        return
    print(
        f"nb_durable: this run called run_python {len(calls)} time(s). Replay hands back what those calls "
        "printed but does not run them again, so after a kernel restart the variables they defined are "
        "gone. Resume with --rerun-python to execute the recorded code again first, in order."
    )


def _going_on(values: Mapping[str, Any]) -> tuple[Change, SessionOptions, FrontEndOptions]:
    """A resume's or a follow-up's settings: the change asked for, the session's, the cell's own."""
    changed, session, front = sort_values("%agent_resume", values, AgentSettings, SessionOptions, FrontEndOptions)
    return Change(changed), SessionOptions(**session), FrontEndOptions(**front)


def resume_cell(
    run_id: str | None,
    *,
    values: Mapping[str, Any],
    crash_at: CrashPoint | None = None,
    mcp_accept_changes: bool = False,
    rerun_python: bool = False,
    timeline: Timeline | None = None,
    configured: Mapping[str, Any] | None = None,
) -> AgentResult | BackgroundRun:
    """Resume the named run, or the latest unfinished one, with the settings from its log.

    ``values`` are as for ``agent_cell``; the run's own settings may only change as a resume
    may change them, so the recorded ones ``%config`` set (``configured``) are kept over, which
    is said first where they differ. A run with MCP tools restarts their servers (from ``mcp_config`` or the
    recorded config) and checks its tools; ``rerun_python`` executes the run's recorded
    run_python code first. ``timeline`` is an existing timeline to draw on (the Resume and
    Fork buttons), whose bar says what is kept.
    """
    change, options, front = _going_on(values)
    resources = contextlib.ExitStack()
    with _closing_on_error(resources):
        # Read as a reader reads it: a configured store that is not there yet was made (an empty
        # SQLite file, folder or schema's tables) only to find no run in it.
        chosen = run_id or latest_unfinished(front.store, agents=True)
        runs = resources.enter_context(opened(front.store, existing=True))
        record = read_run(chosen, runs)
        _say_kept(record, configured, "resume", timeline)
        _warn_kernel_state(record, rerun_python)
        tools = resources.enter_context(
            _extra_tools(chosen, runs, front.mcp_config, mcp_accept_changes, None, kernel_tools=False, background=front.background)
        )

    def go(hooks: RunHooks) -> AgentResult:
        return resume_agent(chosen, change=change, options=options, store=runs, tools=tools.registry, hooks=hooks)

    shown = timeline is not None
    timeline = timeline or _timeline_of(chosen, runs, background=front.background)
    return _launch(timeline, go, resources, background=front.background, store=front.store, crash_at=crash_at, shown=shown)


def continue_cell(
    run_id: str | None, message: str, *, values: Mapping[str, Any], configured: Mapping[str, Any] | None = None
) -> AgentResult | BackgroundRun:
    """``%%agent --continue [RUN]``: the cell's text as a follow-up to a finished run
    (``configured``: as for ``resume_cell``)."""
    change, options, front = _going_on(values)
    resources = contextlib.ExitStack()
    with _closing_on_error(resources):
        runs = resources.enter_context(opened(front.store, existing=True))  # a run to go on with is there
        chosen = run_id or _latest_finished(runs)
        _say_kept(read_run(chosen, runs), configured, "continue")
        tools = resources.enter_context(_extra_tools(chosen, runs, None, False, None, kernel_tools=False, background=front.background))

    def go(hooks: RunHooks) -> AgentResult:
        return continue_agent(chosen, message, change=change, options=options, store=runs, tools=tools.registry, hooks=hooks)

    timeline = _timeline_of(chosen, runs, background=front.background)
    return _launch(timeline, go, resources, background=front.background, store=front.store, crash_at=None)


def _resume_on(run_id: str, store: str | None, timeline: Timeline) -> None:
    """The Resume and Fork buttons: go on with ``run_id`` in the background on ``timeline``, with
    the values ``%agent_resume`` would take (``button_resume``)."""
    values, kept = button_resume(shell_settings(), store)
    resume_cell(run_id, values=values, timeline=timeline, configured=kept)


def _latest_finished(store: Store) -> str:
    for summary in list_runs(store):
        if Status(summary.status).finished:
            return summary.run_id
    raise NoUnfinishedRunError(store=store.url, finished=True)


def _timeline_of(run_id: str, store: Store, *, background: bool) -> Timeline:
    return Timeline(starting_view(run_id, read_summary(run_id, store).settings), foreground=not background)


def show_run(run_id: str | None, store: str | Store | None, *, turns: tuple[int, int] | None = None) -> StaticTimeline:
    """``%agent_show``: a run's timeline from its log (no run: the one updated last), from a store
    that is there (a reader makes no SQLite file or table: ``open_store``'s ``existing``). ``turns``
    (first, last) shows only their steps, each whole: what a long run's timeline left out, asked for."""
    with opened(store, existing=True) as runs:
        run_id = run_id or latest_run("show", runs)
        run, steps = views_of(read_run(run_id, runs))
        run, _ = with_children(run, runs)  # billed as ``show`` and ``%agent_runs`` bill it
        if turns is not None:
            steps = [v for v in steps if turns[0] <= StepId.parse(v.step_id).turn <= turns[1]]
        # One listing for the page: each delegate row, at any depth, says how long its child ran.
        times = child_times(runs, run_id)
        steps = with_child_times(run_id, steps, times)
        inner = inner_from_log(runs, run_id, steps, times)
    if turns is None:
        return render_static(run, steps, inner=inner)
    only = f"turns {turns_text(*turns)} only ({len(steps)} of {run.steps} steps), each step whole"
    return render_static(run, steps, later=only, inner=inner, budget=None)
