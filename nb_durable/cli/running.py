"""The commands that run an agent: ``run``, ``resume`` and ``continue``, with their progress lines.

Each builds the run's hooks (progress lines, and the demo's crash switch), opens the store
once, builds the run's tools (MCP servers as the run recorded them, or from ``--mcp``), makes
one call into ``agent.run.loop`` and turns how the run ended into an exit code
(``errors.EXIT_CODES``). What the run cost is said once, by the progress summary. Each
command imports the agent when it runs, so the CLI starts without loading it.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from typing import TYPE_CHECKING, Any

from ..core.runs import latest_unfinished
from ..core.stores import opened
from ..errors import EXIT_CODES
from .hints import in_cli_words

if TYPE_CHECKING:
    from ..agent.settings.rows import Command

__all__ = ["cmd_continue", "cmd_resume", "cmd_run"]

EXIT_INTERRUPTED = EXIT_CODES["interrupted"]


def _hooks(args: argparse.Namespace, progress: Any) -> Any:
    from ..agent.run.hooks import Observers, RunHooks

    kill_at = getattr(args, "kill_at", None)
    if not kill_at:
        return RunHooks(observer=progress)
    from ..agent.run.crash import KillAt

    killer = KillAt(kill_at)
    return RunHooks(observer=Observers(progress, killer), before_step=killer, after_effect=killer.effect_ran)


def _progress(args: argparse.Namespace) -> Any:
    """Progress lines for this command; Ctrl-C marks the step it cuts off as interrupted."""
    from ..agent.display.progress import TextProgress, terminal_width

    # A run the demo kills from inside prints its last words itself: no live line to cut into.
    live = False if getattr(args, "kill_at", None) else None
    progress = TextProgress(width=terminal_width(), live=live)

    def interrupted(signum: int, frame: Any) -> None:
        progress.interrupting()
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, interrupted)
    return progress


def _report(result: Any, progress: Any, store: str | None) -> int:
    from ..agent.display.inert_text import terminal_text
    from ..agent.display.views import state_word

    # What it cost is in the progress summary above (TextProgress), said once.
    # Steps settled in doubt are neither replayed nor live; counted apart, the parts add up.
    settled = sum(n for state, n in progress.counts().items() if state in ("skipped", "in_doubt"))
    doubt = f", {settled} settled in doubt" if settled else ""
    print(
        f"\n{terminal_text(result.text)}\n\nrun {result.run_id} {state_word(result.status)} after {result.turns} turns: "
        f"{result.replayed_steps} steps replayed{doubt}, {result.live_steps} live.\nlog: {result.location}"
    )
    if result.detail:
        print(f"nb-durable: run {result.run_id} {state_word(result.status)}: {terminal_text(in_cli_words(result.detail, store))}", file=sys.stderr)
    return EXIT_CODES.get(result.status, EXIT_INTERRUPTED)


def cmd_run(args: argparse.Namespace) -> int:
    from ..agent.run.loop import run_prepared
    from ..agent.run.prepare import prepare_run
    from ..agent.settings.flags import given

    if args.batch_file is not None:
        from .batch_commands import cmd_run_batch

        return cmd_run_batch(args)
    if args.task is None:
        raise ValueError('run needs a task: nb-durable run "what to do" (- reads it from stdin), or --batch FILE to queue a file of tasks')
    values = given(args, "run", "cli")
    if "priority" in values:
        raise ValueError("--priority orders queued runs: give it with --batch FILE (a run started here is taken by nobody else)")
    task = _text(args.task, "task")  # an empty one is refused with the settings (table.task)
    workspace = values.get("workspace")
    if workspace is not None and not os.path.isdir(workspace):
        raise ValueError(
            f"--workspace {workspace} is not a folder ({os.path.abspath(workspace)}): name the "
            "folder of the project the agent should work in, or leave --workspace out"
        )
    prepared = prepare_run(task, run_id=args.run, new=args.new, values=values)
    args.going = prepared.run_id  # what Ctrl-C names (``commands._after_ctrl_c``)
    if prepared.note:
        print(f"nb-durable: {prepared.note}", file=sys.stderr)
    progress = _progress(args)
    with opened(args.store) as store, _run_tools(prepared.run_id, store, args) as tools:
        result = run_prepared(prepared, tools=tools.registry, store=store, hooks=_hooks(args, progress))
    return _report(result, progress, args.store)


def _run_tools(run_id: str, store: Any, args: argparse.Namespace) -> Any:
    """The run's MCP tools (from --mcp, or as the run recorded them); servers stop after it."""
    from ..agent.tools.mcp.run_tools import tools_for_run

    return tools_for_run(
        run_id,
        store,
        mcp=getattr(args, "mcp_config", None),
        accept_changes=getattr(args, "mcp_accept_changes", False),
        approve_bash=getattr(args, "approve_bash", None),
    )


def _going_on(args: argparse.Namespace, command: Command) -> tuple[Any, Any]:
    """The change of settings and the session's options a resume or a continue was given."""
    from ..agent.settings import AgentSettings, Change, FrontEndOptions, SessionOptions
    from ..agent.settings.flags import given
    from ..agent.settings.rows import sort_values

    given_ = given(args, command, "cli")
    changed, session, _ = sort_values(f"nb-durable {command}", given_, AgentSettings, SessionOptions, FrontEndOptions)
    return Change(changed), SessionOptions(**session)


def cmd_resume(args: argparse.Namespace) -> int:
    from ..agent.run.loop import resume_agent

    change, options = _going_on(args, "resume")
    run_id = args.run
    if run_id is None:  # a store that is not there has no run to resume, said as such
        run_id = latest_unfinished(args.store, agents=True)
        print(f"resuming {run_id}, the latest unfinished run")
    args.going = run_id
    with opened(args.store, existing=True) as store:
        progress = _progress(args)
        with _run_tools(run_id, store, args) as tools:
            result = resume_agent(
                run_id, change=change, options=options, store=store, tools=tools.registry, hooks=_hooks(args, progress)
            )
    return _report(result, progress, args.store)


def _text(given: str, what: str) -> str:
    """The text of a task or message as given ('-': read from stdin), refused unless it is UTF-8:
    Python hands bytes that are not as lone surrogates, which no log can hold."""
    source = "read from stdin" if given == "-" else "given"
    if given != "-":
        raw = os.fsencode(given)
    elif (stdin := getattr(sys.stdin, "buffer", None)) is not None:
        raw = stdin.read().replace(b"\r\n", b"\n")  # as text mode reads it
    else:  # a stdin that is text already (an embedding's)
        raw = os.fsencode(sys.stdin.read())
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(
            f"the {what} {source} is not UTF-8 text (byte 0x{raw[e.start]:02x} at offset {e.start}); "
            "save or type it as UTF-8"
        ) from None


def cmd_continue(args: argparse.Namespace) -> int:
    from ..agent.run.loop import continue_agent

    change, options = _going_on(args, "continue")
    message = _text(args.message, "message")
    args.going = args.run
    progress = _progress(args)
    with opened(args.store, existing=True) as store, _run_tools(args.run, store, args) as tools:
        result = continue_agent(
            args.run,
            message,
            change=change,
            options=options,
            store=store,
            tools=tools.registry,
            hooks=_hooks(args, progress),
        )
    return _report(result, progress, args.store)
