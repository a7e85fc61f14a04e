"""``nb-durable``: run, resume, list, show, export, fork and copy durable agent runs from a terminal.

Its exit codes are ``EXIT_MEANINGS``, derived from ``nb_durable.errors.EXIT_CODES`` (each
error knows its outcome); ``--help`` prints them and docs/cli.md's table is tested against them.
A command imports what only it needs (the agent's views, exports, demos) when it runs, so
``--help`` and ``runs`` start without them.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Sequence

from ..agent.display.inert_text import terminal_text
from ..agent.settings.flags import (
    add_flags,
    add_listing_flags,
    number_from_zero,
    positive_whole_number,
    whole_number,
)
from ..core.holders import name_this_process
from ..errors import EXIT_CODES, NbDurableError
from .hints import in_cli_words, written_store
from .inspecting import (
    EXIT_OK,
    cmd_check_index,
    cmd_copy,
    cmd_export,
    cmd_fork,
    cmd_runs,
    cmd_show,
    show_warning,
)
from .running import cmd_continue, cmd_resume, cmd_run
from .streams import ReaderGoneProof

__all__ = ["EXIT_MEANINGS", "build_parser", "exit_code_table", "main"]

EXIT_INTERRUPTED = 130
EXIT_USAGE = EXIT_CODES["usage"]

_MEANINGS: dict[str, str] = {
    "completed": "completed (or the command succeeded)",
    "failed": "the run failed: fix the cause, then resume",
    "usage": "bad usage: an unknown run, bad flags or arguments (a --workspace that is not a folder, "
    "--at past the end), a run id --new cannot take, settings that differ from the log",
    "locked": "the run is locked by another process",
    "in_doubt": "a step is in doubt and needs a decision (resume with --in-doubt)",
    "truncated": "truncated: the reply was cut off at max_tokens; resume (the model continues) or "
    "resume --max-tokens N (the turn is asked again)",
    "refused": "refused: the model declined (the message gives its stop_details); resume --model M, "
    "or start a narrower task",
    "context_full": "context full: the conversation filled the model's context window; fork at an "
    "earlier step, or resume --model M",
    "budget_exhausted": "budget exhausted: the next model call could cross --max-usd or "
    "--max-run-tokens; resume --max-usd X",
    "timed_out": "nb-durable wait --timeout gave up with runs still queued or running (they go on): "
    "wait again, or start a worker",
    "bad_tool_input": "bad tool input: the model kept calling one tool with input its schema refuses "
    "(--max-invalid-tool-calls); resume (the count starts again), or resume --model M",
    "unknown_stop": "unknown stop: the model stopped for a reason this version of nb_durable does not know; "
    "resume to ask the turn again, or upgrade nb_durable and resume",
    "interrupted": "interrupted: by Ctrl-C or a killed process (resume to go on), or at the turn limit (resume --max-turns N, N above "
    "the limit: a plain resume stops there again)",
}
EXIT_MEANINGS: dict[int, str] = {EXIT_CODES[name]: meaning for name, meaning in _MEANINGS.items()}
"""Every exit code of ``nb-durable`` and what it means: the one source of docs/cli.md's table."""


def exit_code_table() -> str:
    """The exit codes as the Markdown table of docs/cli.md."""
    rows = "".join(f"| {code} | {meaning} |\n" for code, meaning in sorted(EXIT_MEANINGS.items()))
    return f"| Exit code | Meaning |\n|---|---|\n{rows}"


def cmd_demo(args: argparse.Namespace) -> int:
    from . import demos

    if args.plain_child:
        demos.plain_child(args.store, args.outbox, args.crash_at)
        return EXIT_OK
    if args.store is not None:
        raise ValueError(
            f"the demo keeps its runs in its own folder, {demos.demo_folder()}, emptied as each demo starts, so it "
            "takes no --store; to keep its run in a store of yours, copy it afterwards: nb-durable copy "
            f"{demos.demo_folder() / 'agent' / 'runs'} STORE"
        )
    if args.clean:
        return demos.clean()
    if args.plain:
        return demos.plain_demo(args.crash_at or demos.PLAIN_CRASH_AT)
    return demos.agent_demo(args.crash_at or demos.AGENT_CRASH_AT, args.latency, checked=args.crash_at is None)


# -- the parser ---------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    add_flags(common, "run", "cli", only={"store"})
    from .. import __version__

    codes = "\n".join(f"  {code:>3}  {meaning}" for code, meaning in sorted(EXIT_MEANINGS.items()))
    parser = argparse.ArgumentParser(
        prog="nb-durable",
        description="Durable agent runs from a terminal.",
        epilog=f"exit codes:\n{codes}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"nb-durable {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, help: str, *, store: bool = True) -> argparse.ArgumentParser:
        command = sub.add_parser(name, help=help, description=help, parents=[common] if store else [])
        command.set_defaults(command_parser=command)  # an unknown flag is told with this command's usage
        return command

    # A demo's switch: a SIGKILL of this process as step N starts (nb-durable demo).
    kill_at = (("--kill-at",), {"type": positive_whole_number, "help": argparse.SUPPRESS})

    p = add("run", "run an agent on a task (replaying what a run with the same id already recorded)")
    p.add_argument("task", nargs="?", help="what the agent should do ('-' reads it from stdin)")
    p.add_argument(
        "--batch",
        dest="batch_file",  # the run's own setting "batch" is the batch id, derived from the file
        metavar="FILE",
        help='queue the tasks of a JSON-lines file for workers instead of running one here; each line '
        '{"task": ..., "run": ..., "priority": N} and any setting by name ("model": ..., "tags": [...], ...)',
    )
    add_flags(
        p,
        "run",
        "cli",
        own={
            "first": [
                (("--run",), {"help": "the run id (default: derived from the task's text)"}),
                (
                    ("--new",),
                    {
                        "action": "store_true",
                        "help": "start a fresh run even if this task ran before (with --run NAME: run NAME, "
                        "refused if it exists)",
                    },
                ),
                kill_at,
            ]
        },
        leave_out={"store"},
    )
    p.set_defaults(func=cmd_run)

    p = add(
        "resume",
        "resume a run with the settings it was started with (a truncated, refused, full or over-budget "
        "run goes on from the turn that stopped it)",
    )
    p.add_argument("run", nargs="?", help="the run id (default: the latest unfinished agent run)")
    add_flags(
        p,
        "resume",
        "cli",
        own={
            "tools": [
                (
                    ("--mcp-accept-changes",),
                    {
                        "action": "store_true",
                        "help": "go on although an MCP tool the run used changed its schema (recorded as a decision)",
                    },
                )
            ],
            "first": [kill_at],
        },
        leave_out={"store"},
    )
    p.set_defaults(func=cmd_resume)

    p = add("continue", "give a finished run a follow-up message (recorded as a step) and go on")
    p.add_argument("run", help="the run id")
    p.add_argument("message", help="what the agent should do next ('-' reads it from stdin)")
    add_flags(p, "continue", "cli", own={"first": [kill_at]}, leave_out={"store"})
    p.set_defaults(func=cmd_continue)

    p = add("runs", "list runs with their status, newest first, a page at a time (from the run index)")
    add_listing_flags(p)
    p.set_defaults(func=cmd_runs)

    p = add("check-index", "rebuild the run index from the logs and say where the stored one differs, or a log cannot be read (exit 1 if so)")
    p.add_argument("--repair", action="store_true", help="rewrite each differing row from its run's log, under the run's lease (a run being written is left to its writer; exit 1 if any is left)")
    p.set_defaults(func=cmd_check_index)

    p = add("show", "a run's timeline as text (exit 0 for a run completed, queued or going on; else the exit code of how it ended, as run and resume give)")
    p.add_argument("run", nargs="?", help="the run id (default: the run updated last)")
    p.add_argument("--tree", action="store_true", help="also list the run's child runs (delegated work), indented")
    p.set_defaults(func=cmd_show)

    p = add("export", "write a run as a readable notebook (.ipynb)")
    p.add_argument("run", nargs="?", help="the run id (default: the run updated last)")
    p.add_argument("-o", "--output", help="the notebook's path (default: RUN.ipynb; a folder: RUN.ipynb in it); a file there is written over only if it is an export of this run")
    p.add_argument("--force", action="store_true", help="write over the file at the notebook's path, whatever it is")
    p.add_argument(
        "--runnable",
        action="store_true",
        help="write the tool calls as cells that run (%%%%bash, %%%%writefile): running them repeats their effects",
    )
    p.set_defaults(func=cmd_export)

    p = add("fork", "start a new run from the first N steps of another (with its own copy of each child run they started)")
    p.add_argument("run", help="the run to fork")
    p.add_argument("new", help="the new run's id")
    p.add_argument("--at", type=whole_number, required=True, help="how many recorded steps to keep")
    p.add_argument(
        "--to", metavar="URL",
        help="the store to write the new run in (default: the run's own; another keeps the fork from the "
        "workers of the run's store, which take a fork as they take any run nobody is writing)",
    )  # fmt: skip
    p.set_defaults(func=cmd_fork)

    p = sub.add_parser(
        "copy",
        help="copy runs between stores (JSONL, SQLite, PostgreSQL), event for event",
        description="Copy runs between stores, event for event; existing runs are never overwritten.",
    )
    p.set_defaults(command_parser=p)
    p.add_argument("source", help="the store to copy from: a folder, sqlite:///runs.db, postgresql://...")
    p.add_argument("destination", help="the store to copy into")
    p.add_argument("runs", nargs="*", help="the runs to copy, each with its child runs (default: every run of the source)")
    p.set_defaults(func=cmd_copy)

    from . import retention_commands, worker_command

    retention_commands.add_delete(add("delete", retention_commands.DELETE_HELP))
    retention_commands.add_prune(add("prune", retention_commands.PRUNE_HELP))
    worker_command.add_worker(add("worker", worker_command.WORKER_HELP))
    from .batch_commands import WAIT_HELP, add_wait

    add_wait(add("wait", WAIT_HELP))

    from .demos import AGENT_CRASH_AT, PLAIN_CRASH_AT, PLAIN_STEPS, demo_folder

    p = add("demo", f"watch a run killed in the middle resume without repeating work (offline, in {demo_folder()})", store=False)
    # Not offered: the demo keeps its runs in its own folder (cmd_demo says so to one who gives
    # it); its own child process is handed that folder with it.
    p.add_argument("--store", help=argparse.SUPPRESS)
    p.add_argument(
        "--crash-at",
        type=positive_whole_number,
        metavar="N",
        help=f"the step during which the first process dies (default: {AGENT_CRASH_AT}; "
        f"with --plain, 1 to {PLAIN_STEPS}, default {PLAIN_CRASH_AT})",
    )
    p.add_argument("--plain", action="store_true", help="plain Python steps instead of an agent")
    p.add_argument("--clean", action="store_true", help="remove the demo folder and stop (each demo also clears it first)")
    p.add_argument(
        "--latency", type=number_from_zero, default=0.5, metavar="X",
        help="the demo model's pace, as a multiple of its notebook pace (about a second a call): default 0.5, "
        "0 for no waiting; the agent demo only (--plain's steps keep their own pace)",
    )  # fmt: skip
    p.add_argument("--plain-child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--outbox", help=argparse.SUPPRESS)
    p.set_defaults(func=cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    if not (sys.argv[1:] if argv is None else argv):  # a first try: say the commands, not "COMMAND is required"
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    args, unknown = parser.parse_known_args(_ages_kept(sys.argv[1:] if argv is None else argv))
    if unknown:  # argparse would tell it with the top-level usage, not the command's
        getattr(args, "command_parser", parser).error(f"unrecognized arguments: {' '.join(unknown)}")
    streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = ReaderGoneProof(sys.stdout), ReaderGoneProof(sys.stderr)
    try:
        with warnings.catch_warnings():
            warnings.showwarning = show_warning
            return _run(args)
    finally:
        sys.stdout.flush()  # here, where a gone reader is dropped, not at exit (which would exit 120)
        sys.stderr.flush()
        sys.stdout, sys.stderr = streams


def _ages_kept(argv: Sequence[str]) -> list[str]:
    """``argv`` with an age that starts with '-' (``--older-than -1d``) joined to its flag:
    argparse takes such a value for a flag and says only "expected one argument", where
    ``parse_duration`` says what is wrong with it (a negative age)."""
    said: list[str] = []
    for arg in argv:
        if said and said[-1] == "--older-than" and arg[:1] == "-" and arg[1:2].isdigit():
            said[-1] = f"--older-than={arg}"
        else:
            said.append(arg)
    return said


# What Ctrl-C leaves, by command. Only a command that was running a run leaves one to resume;
# 'wait' only stops looking (its runs are the workers'), and the others leave nothing to go on with.
_AFTER_CTRL_C = {
    **dict.fromkeys(("run", "resume", "continue"), "interrupted; resume the run to go on"),
    "wait": "stopped waiting; the runs are left as they were, for their workers",
}


def _after_ctrl_c(args: argparse.Namespace) -> str:
    """What Ctrl-C leaves: of a run the command was running (``args.going``, set once it is known),
    the command that goes on with it, naming the store it was given."""
    going = getattr(args, "going", None)
    if going and args.command in ("run", "resume", "continue"):
        return in_cli_words(f"interrupted; resume_agent('{going}') goes on from where it stopped", getattr(args, "store", None))
    return _AFTER_CTRL_C.get(args.command, "interrupted")


def _run(args: argparse.Namespace) -> int:
    try:
        with name_this_process(f"nb-durable {args.command}"):  # a second writer is told how to stop it
            return int(args.func(args))
    except NbDurableError as e:  # a message may quote a model, a server or a file name: terminal text
        print(f"nb-durable: {terminal_text(in_cli_words(str(e), getattr(args, 'store', None), written_store(args)))}", file=sys.stderr)
        return e.exit_code
    except ValueError as e:
        print(f"nb-durable: {terminal_text(in_cli_words(str(e), getattr(args, 'store', None)))}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"nb-durable: {terminal_text(_after_ctrl_c(args))}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except OSError as e:  # a file to read or write (an export's folder, a permission): said, no traceback
        said = f"{e.strerror}: {e.filename}" if e.strerror and e.filename else str(e)
        print(f"nb-durable: {terminal_text(said)}", file=sys.stderr)
        return EXIT_CODES["failed"]


if __name__ == "__main__":
    sys.exit(main())
