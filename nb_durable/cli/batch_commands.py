"""``nb-durable run --batch FILE`` queues runs for workers; ``nb-durable wait`` gathers them (logic: ``agent.fleet.batch``).

Only argument handling and printing live here; the agent's batches load when a command runs. ``wait`` exits 0 when every run completed, 1
when one ended otherwise (failed, truncated, ...) or was deleted while waited for, and ``EXIT_CODES["timed_out"]`` when the
timeout passed with runs still queued or running.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from typing import Any

from ..agent.display.inert_text import terminal_text
from ..agent.settings.flags import number_from_zero, positive_number
from ..agent.workspace.names import shell_word
from ..core.stores import Store, opened
from ..errors import EXIT_CODES
from .hints import command_store, in_cli_words, password_left_out

__all__ = ["WAIT_HELP", "add_wait", "cmd_run_batch"]

WAIT_HELP = "wait for runs (or a batch) that workers run, printing how each ended as it ends"

WAIT_EPILOG = (
    "It exits 0 when every run completed, and 1 when one ended any other way (failed, truncated, ...) or was "
    "deleted while it was waited for (nb-durable prune, or its log removed: the wait goes on for the others, "
    f"and lists it so); --timeout exits {EXIT_CODES['timed_out']}, and Ctrl-C {EXIT_CODES['interrupted']}, leaving the runs as they were."
)

LISTED_LEFT = 10
"""How many of the runs a timed-out wait left unfinished it names (all are counted by status)."""


def cmd_run_batch(args: argparse.Namespace) -> int:
    from ..agent.fleet.batch import submit_batch
    from ..agent.fleet.batch_file import scan_batch
    from ..agent.models.anthropic import credentials_in_environment
    from ..agent.settings import AgentSettings, rows_of
    from ..agent.settings.flags import given

    if args.task is not None or args.run is not None:
        raise ValueError("--batch FILE queues the file's tasks: give no task or --run with it (a line's \"run\" names its run)")
    _refuse_unqueued(args)
    scan = scan_batch(args.batch_file)
    tasks, batch = scan.tasks, scan.batch_id
    # What the flags give every task a line leaves unset: the recorded settings (the others
    # were refused above).
    defaults = given(args, "run", "cli", rows=rows_of(AgentSettings))
    handle = submit_batch(
        tasks, store=args.store, batch=batch, source=args.batch_file, demo=bool(args.demo), bad_lines=scan.problems, **defaults
    )
    if not args.demo and not credentials_in_environment():
        print("nb-durable: no ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN or ANTHROPIC_BASE_URL is set, so these runs "
              "were queued for the offline demo model", file=sys.stderr)
    for task, run_id in zip(tasks, handle.run_ids, strict=True):
        if run_id in handle.already:
            print(f"not added {run_id} (line {task.line}): it was queued before")
        else:
            print(f"queued {run_id} (line {task.line}, priority {defaults.get('priority', 0) if task.priority is None else task.priority})")
    added = len(handle.run_ids) - len(handle.already)
    store = command_store(args.store)
    print(
        f"batch {batch}: {added} run(s) queued" + (f", {len(handle.already)} queued before and not added" if handle.already else "")
        + f"; run them with: nb-durable worker{store}, and gather them with: "
        f"nb-durable wait --batch {shell_word(args.batch_file)}{store}{password_left_out(args.store)}"
    )
    return 0


def _refuse_unqueued(args: argparse.Namespace) -> None:
    """Refuse the flags of ``run`` a queued run cannot carry: taken, they were dropped unsaid."""
    from ..agent.settings.flags import rows_for

    why = {
        "session": "a session's options are the worker's that runs it (nb-durable worker --in-doubt; the shared "
        "limits from NB_DURABLE_* variables in its environment)",
        "mcp_config": "a queued run has the built-in tools only",
        "new": "a line's run id is its \"run\", else derived from what the line says",
    }
    unused: dict[str, list[str]] = {}
    for row in rows_for("run", "cli"):
        if not row.recorded and row.name not in ("store", "demo") and getattr(args, row.name, None) is not None:
            unused.setdefault("session" if row.section == "session" else row.name, []).append(str(row.flag))
    if args.new:
        unused["new"] = ["--new"]
    if unused:
        flags = ", ".join(flag for said in unused.values() for flag in said)
        reasons = "; ".join(why[key] for key in unused)
        raise ValueError(f"--batch FILE queues runs for workers, so it takes no {flags}: {reasons}")


def _handle(args: argparse.Namespace, store: Store) -> Any:
    from ..agent.fleet.batch import BatchHandle, batch_handle
    from ..agent.fleet.batch_file import runs_of_batch_file

    if args.batch is not None and args.runs:  # --batch "" too: else dropped, or taken for no --batch
        raise ValueError("give run ids or --batch, not both")
    if args.batch is not None:
        of_file = runs_of_batch_file(args.batch)
        if of_file is not None:
            handle = BatchHandle(tuple(r for _, r in of_file), store)
            held = set(store.run_ids())
            missing = [line for line, r in of_file if r not in held]
            if missing:
                raise ValueError(
                    f"line(s) {', '.join(map(str, missing))} of {args.batch} are not queued in {store.url}: queue them with "
                    f"nb-durable run --batch {shell_word(args.batch)}{command_store(args.store)}{password_left_out(args.store)}"
                )
            return handle
        return batch_handle(args.batch, store)
    if not args.runs:
        raise ValueError("name the runs to wait for (nb-durable wait RUN ...) or a batch (--batch FILE or ID)")
    handle = BatchHandle(tuple(args.runs), store)
    handle.summaries()  # an unknown run id is an error now, not a wait that never ends
    return handle


def cmd_wait(args: argparse.Namespace) -> int:
    with opened(args.store, existing=True) as store:  # a mistyped store is said, never made
        return _wait(args, store)


def _wait(args: argparse.Namespace, store: Store) -> int:
    from ..agent.fleet.batch import RunResult, settled
    from ..core.status import Status

    handle = _handle(args, store)
    unsettled = [s for s in handle.summaries(deleted_ok=True).values() if not settled(s)]
    if unsettled:
        # Said before a wait that may never end on its own (a queued run and no worker running):
        # what it waits for, and on whom.
        going = sum(Status(s.status).going for s in unsettled)
        on_workers = len(unsettled) - going  # queued, or their writer died: a worker takes them
        waiting = f"nb-durable wait: waiting for {len(unsettled)} run(s), {going} going on where they run"
        if on_workers:
            waiting += f", {on_workers} for a worker to take (if none is running, {_start_a_worker(args.store)})"
        print(f"{waiting}. Ctrl-C stops waiting, not the runs.", file=sys.stderr, flush=True)
    results: dict[str, RunResult] = {}
    deleted: list[str] = []

    def say(run_id: str, result: RunResult | None) -> None:
        # Said as each run ends, not all at the end: a wait for a night's batch shows its progress.
        if result is None:
            deleted.append(run_id)
            print(f"{run_id}: deleted while it was waited for (pruned, or its log removed), so it did not complete", flush=True)
            return
        results[run_id] = result
        # The agent's text is its own; an error is the package's, worded for Python until here.
        said = terminal_text(result.text or in_cli_words(result.error or "", args.store)).strip().splitlines()
        print(f"{run_id}: {result.status}" + (f": {said[0][:200]}" if said else ""), flush=True)

    done = handle.wait(args.timeout, poll=args.poll, on_settled=say)
    if not done:
        left = {r: s for r, s in handle.summaries(deleted_ok=True).items() if r not in results}
        tally = ", ".join(f"{n} {status}" for status, n in Counter(s.status for s in left.values()).most_common())
        listed = ", ".join(f"{r} ({s.asking.in_words() if s.asking else s.status})" for r, s in list(left.items())[:LISTED_LEFT])
        # A queue of hundreds made one line of thousands of characters: the tally says the rest.
        more = f", and {len(left) - LISTED_LEFT} more" if len(left) > LISTED_LEFT else ""
        asking = any(s.asking for s in left.values())
        print(
            f"nb-durable wait: timed out with {len(left)} run(s) not finished ({tally}): {listed}{more}. They go on once a worker "
            "runs them (a worker that cannot run one, its workspace gone or its tools missing, says why in its "
            f"own output); {_start_a_worker(args.store)}"
            + (". A waiting run goes on once someone answers it where it runs (its buttons in the notebook)" if asking else "")
        )
        return EXIT_CODES["timed_out"]
    ok = all(r.status == "completed" for r in results.values()) and not deleted
    print(f"{sum(r.status == 'completed' for r in results.values())} of {len(handle.run_ids)} run(s) completed")
    return 0 if ok else EXIT_CODES["failed"]


def _start_a_worker(store: str | None) -> str:
    return f"start one with: nb-durable worker{command_store(store)}{password_left_out(store)}"


def add_wait(p: argparse.ArgumentParser) -> None:
    """The arguments of ``nb-durable wait``."""
    p.epilog = WAIT_EPILOG
    p.add_argument("runs", nargs="*", metavar="RUN", help="the runs to wait for")
    p.add_argument("--batch", metavar="FILE_OR_ID", help="every run of a batch: its file (as given to run --batch) or its id")
    p.add_argument("--timeout", type=number_from_zero, help=f"give up after this many seconds (exit {EXIT_CODES['timed_out']}); default: wait for ever")
    p.add_argument("--poll", type=positive_number, default=0.5, help="seconds between looks at the runs (default 0.5)")
    p.set_defaults(func=cmd_wait)
