"""The commands that read runs: ``runs``, ``check-index``, ``show``, ``export``, ``fork`` and ``copy``.

Each reads the store without a run's lease (``fork`` and ``copy`` write new runs, never an
existing one); ``runs`` reads the run index, the others a run's log.
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from typing import TextIO

from ..agent.display.inert_text import terminal_text
from ..agent.display.views import many, state_word
from ..agent.display.words import (
    claim_order_words,
    in_words_of,
    listed_name,
    listed_task,
    next_page_flags,
    page_start,
    priority_cell,
    priority_column,
    store_flag,
)
from ..agent.fleet.listing import awaited, list_page
from ..core.events import RunStarted
from ..core.runs import RunSummary, latest_run, read_run
from ..core.status import Status
from ..core.stores import Store, default_store, opened, shown_store
from ..core.whole_runs.fork import fork
from ..errors import EXIT_CODES, LogCorruptedError, NbDurableError, RunLockedError, SettingError
from .hints import command_store, in_cli_words, password_left_out

__all__ = ["EXIT_OK", "cmd_check_index", "cmd_copy", "cmd_export", "cmd_fork", "cmd_runs", "cmd_show", "show_warning"]

EXIT_OK = EXIT_CODES["completed"]
"""The exit code of a command that did what was asked (the CLI's one spelling of it)."""


def show_warning(
    message: Warning | str, category: type[Warning], filename: str, lineno: int, file: TextIO | None = None, line: str | None = None
) -> None:
    """A warning (a damaged log passed over, a display that failed) in the CLI's words: no
    Python source line (``warnings.showwarning`` while ``nb-durable`` runs)."""
    print(f"nb-durable: warning: {terminal_text(in_words_of('cli', str(message)))}", file=sys.stderr)


def _when(ts: float | None) -> str:
    return datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S") if ts else "-"


def _store_name(store: str | None) -> str:
    return shown_store(store or default_store())


def cmd_runs(args: argparse.Namespace) -> int:
    from .tree_commands import runs_in_tree_order

    with opened(args.store, existing=True) as store:
        page = list_page(
            store, status=args.status or (), tags=args.tag or (), batch=args.batch, limit=args.limit, offset=args.offset, after=args.after
        )
        rows = runs_in_tree_order(page.runs)
    for warning in page.caught:  # a damaged log: said, and counted below, never silently left out
        show_warning(warning.message, warning.category, warning.filename, warning.lineno)
    if not page.runs:
        filtered = " match those filters" if args.status or args.tag or args.batch else ""
        past = page_start(args.offset, args.after.run_id if args.after else "")
        print(f"no {'readable runs' if page.caught else 'runs'} in {_store_name(args.store)}{filtered}{past}")
        return EXIT_OK
    names = [listed_name(summary.run_id, depth, summary.child_of) for summary, depth in rows]
    # Columns as wide as what they hold this page: a child run's id, budget_exhausted; a priority
    # only while a run waits for a worker, where it decides when one takes it.
    wide, status = max([40, *map(len, names)]), max([12, *(len(s.status) for s, _ in rows)])
    waiting = priority_column(page.runs)
    print(f"{'run':<{wide}} {'status':<{status}} " + ("priority " if waiting else "") + f"{'steps':>5}  {'updated':<19}  {'resumed by':<20}  task")
    for (summary, depth), name in zip(rows, names, strict=True):
        task = listed_task(str(summary.settings.get("task", "")))
        by = summary.resumed_by or "-"
        priority = f"{priority_cell(summary):>8} " if waiting else ""
        print(f"{name:<{wide}} {summary.status:<{status}} {priority}{summary.steps:>5}  {_when(summary.updated_at):<19}  {by:<20}  {task}")
        for what in (summary.asking, awaited(summary)):  # what it waits on, under it: the row keeps its columns
            if what is not None:
                print(f"{'  ' * depth}  {terminal_text(what.in_words())}")
    order = claim_order_words(page.runs, page.more) if args.status else ""
    if order:  # the listing is by update, the newest first: the order workers take them in is another
        print(terminal_text(order))
    if page.more:
        # The cursor of the page's last run in listing order (the rows are in tree order).
        print(f"... more runs: {_next_page(args, page.next_cursor)} (or --limit 0 for all){password_left_out(args.store)}")
    return EXIT_OK


def _next_page(args: argparse.Namespace, after: str) -> str:
    """The command that lists the next page: the store and filters given, or it would list others."""
    flags = next_page_flags(args.status or (), args.tag or (), args.batch, args.limit, after)
    return f"nb-durable runs{command_store(args.store)}{flags}"


def cmd_check_index(args: argparse.Namespace) -> int:
    from ..core.index.check import check_index, repair_index
    from ..core.stores import opened

    empty: list[str] = []
    unreadable: dict[str, str] = {}
    repaired: list[str] = []
    left: list[str] = []
    with opened(args.store, existing=True) as store:
        problems = check_index(store, empty, unreadable)
        held = len(store.run_ids()) - len(empty)
        url = store.url
        if problems and args.repair:
            repaired, left = repair_index(store)
    for line in problems:
        print(terminal_text(in_cli_words(line, args.store)))
    for run_id in empty:  # not the index's fault, and no run: said, but no failure
        said = f"{run_id}: an empty log, no run (created with nothing recorded); delete_run({run_id!r}, {url!r}) removes it"
        print(terminal_text(in_words_of("cli", said)))
    name = _store_name(args.store)
    if not problems and not held:  # "equals its logs" of a store with none (a mistyped --store) says nothing
        print(f"{name} holds no runs, so its run index has nothing to check")
        return EXIT_OK
    print(f"the run index of {name} " + (f"equals its logs ({held} run(s))" if not problems else f"differs from its logs for {len(problems)} run(s)"))
    if not problems:
        return EXIT_OK
    if not args.repair:
        if len(problems) > len(unreadable):  # a log that cannot be read is a person's to restore, not a row to write
            print("nb-durable check-index --repair" + store_flag(args.store) + " rewrites those rows from the logs")
        return EXIT_CODES["failed"]
    if repaired:
        print(f"repaired the rows of {len(repaired)} run(s) from their logs: {', '.join(repaired)}")
    for line in left:
        print(terminal_text(in_cli_words(line, args.store)))
    return EXIT_OK if not left else EXIT_CODES["failed"]


def _header(summary: RunSummary) -> str:
    status = summary.asking.in_words() if summary.asking is not None else state_word(summary.status)
    return (
        f"run {summary.run_id}: {status}, {many(summary.steps, 'step')}, at {summary.location}\n"
        f"started {_when(summary.started_at)}, last event {_when(summary.updated_at)}"
    )


def cmd_show(args: argparse.Namespace) -> int:
    with opened(args.store, existing=True) as store:
        args.run = args.run or latest_run("show", store)
        return _show(args, store)


def _show(args: argparse.Namespace, store: Store) -> int:
    from ..agent.delegation.tree import with_children
    from ..agent.display.progress import TextProgress, run_cost_line, terminal_width
    from ..agent.display.views import views_of
    from .tree_commands import print_tree

    record = read_run(args.run, store)
    print(terminal_text(_header(record.summary)))
    started = record.events[0] if record.events else None
    if isinstance(started, RunStarted) and started.copied:
        source = (started.forked_from or {}).get("run_id")
        print(terminal_text(f"forked from run {source} at step {started.copied}: those steps were paid by {source}, not counted here"))
    explained = False
    error = record.summary.error
    if "task" in record.summary.settings:
        run, steps = views_of(record)
        run, _ = with_children(run, store)
        print(f"task: {' '.join(terminal_text(run.task).split())}")
        if run.model:  # the run's own: a turn another model answered says so on its row
            print(f"model: {terminal_text(run.model)}")
        # Every title whole, in one column as wide as the widest: the titles tell the steps apart.
        widest = max((len(terminal_text(v.title)) for v in steps), default=18)
        progress = TextProgress(width=terminal_width(), title_width=max(widest, 18), listing=True, model=run.model)
        for view in steps:
            progress.step_changed(view)
        progress.run_changed(run)  # an ended run's summary: cost, and what to do if it stopped short
        explained, error = bool(run.detail), run.error
        if not run.status.ended:
            print(run_cost_line(run))
        if run.text:
            print(f"\n{terminal_text(run.text)}")
    else:
        for s in record.steps:
            shown = terminal_text(str(s.result))[:60] if s.state == "completed" else ""
            print(f"  {s.position:>4}  {s.state:<11} {terminal_text(s.step_id)}  {shown}")
    if args.tree:
        print_tree(store, args.run)
    if error and not explained:
        print(f"error: {terminal_text(in_cli_words(error, args.store))}")
    # A run still queued or going has not ended; one that has exits as run and resume did when it
    # stopped, so a script can tell which remedy the table names (resume --max-tokens, --model...).
    status = Status(record.summary.status)
    return EXIT_CODES.get(status.value, EXIT_CODES["failed"]) if status.ended else EXIT_OK


def cmd_export(args: argparse.Namespace) -> int:
    from .tree_commands import export_tree

    with opened(args.store, existing=True) as store:
        args.run = args.run or latest_run("export", store)
        path, children = export_tree(store, args.run, args.output or f"{args.run}.ipynb", runnable=args.runnable, force=args.force)
    with_children = f" with its {children} child run(s)" if children else ""
    print(f"wrote {path}{with_children}" + ("; its code cells re-run the recorded effects if you run them" if args.runnable else ""))
    return EXIT_OK


def cmd_fork(args: argparse.Namespace) -> int:
    # No summary read first: a damaged run's summary cannot be read, and forking its intact
    # prefix is what its error advises. fork() checks --at against the steps it can read.
    with opened(args.store, existing=True) as store:
        try:
            log = fork(args.run, args.new, at=args.at, root=store, to=args.to)
        except SettingError as e:  # said with the flag the person typed
            raise SettingError(setting=e.setting, value=e.value, reason=e.reason, spelled="--at") from None
        with log:
            target = args.to or args.store
            print(f"forked {args.run} at step {args.at} into {log.run_id} ({log.location}); resume it to go on: "
                  f"nb-durable resume {log.run_id}{command_store(target)}{password_left_out(target)}")  # fmt: skip
    return EXIT_OK


def cmd_copy(args: argparse.Namespace) -> int:
    from ..core.whole_runs.transfer import copy_runs

    copied: list[str] = []
    kept: list[str] = []

    def heard(run_id: str) -> None:
        copied.append(run_id)
        print(f"copied {run_id}", flush=True)  # as it happens: an error later leaves these copied

    def there(run_id: str) -> None:
        kept.append(run_id)
        print(f"already there, the same: {run_id}", flush=True)

    try:
        with opened(args.source, existing=True) as source:  # before the destination is made
            copy_runs(source, args.destination, args.runs or None, report=heard, same=there)
    except NbDurableError as e:
        if copied:
            print(
                f"nb-durable copy: {len(copied)} run(s) above were copied whole before the error below, and no other; "
                "once it is fixed, copy again: the runs already copied are passed over, and the rest copied",
                file=sys.stderr,
            )
        elif isinstance(e, (LogCorruptedError, RunLockedError)) and not args.runs:
            # Every run is checked before any is written: one damaged log, or one run a worker
            # is writing, stops the whole copy of a store.
            why = "cannot be read" if isinstance(e, LogCorruptedError) else "is being written"
            print(
                f"nb-durable copy: nothing was copied, because run {e.run_id!r} {why} (below); "
                "name the runs to copy to leave it out (nb-durable copy SRC DST RUN...)",
                file=sys.stderr,
            )
        raise
    also = f" ({len(kept)} more already there, the same)" if kept else ""
    print(f"{len(copied)} run(s) copied from {shown_store(args.source)} to {shown_store(args.destination)}{also}")
    return EXIT_OK
