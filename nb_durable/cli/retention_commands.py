"""``nb-durable delete`` and ``nb-durable prune``: retention from a terminal (``core.whole_runs.retention``).

Each command is registered by one call from ``commands.build_parser`` and exits through the
same table as every command: a run being written is refused with exit code 3 (locked).
"""

from __future__ import annotations

import argparse
import sys
from typing import get_args

from ..agent.settings.flags import duration, status_among
from ..core.status import Status
from ..core.steps import RunStatus
from ..core.stores import opened
from ..core.whole_runs.children import parents
from ..core.whole_runs.retention import delete_run, prune_runs

__all__ = ["DELETE_HELP", "PRUNE_HELP", "add_delete", "add_prune"]

DELETE_HELP = "delete a run and everything it recorded (refused while the run is being written)"
PRUNABLE = tuple(s for s in get_args(RunStatus) if not Status(s).going)
"""The statuses ``prune --status`` takes: a run going on (running, waiting) is never pruned."""
PRUNE_HELP = "delete the runs not updated for a while (runs being written are left alone)"


def cmd_delete(args: argparse.Namespace) -> int:
    with opened(args.store, existing=True) as store:  # a mistyped store is said, never made
        above = parents(store, [args.run])[args.run]  # from the index: its log left unread
        gone = delete_run(args.run, store)
        left = above is not None and above in store.run_ids()
    # The children go too, and a parent's views bill the tree that is left: both said here, as
    # nothing after the delete can say what was there.
    _, *below = gone
    runs = "the run" if len(below) == 1 else f"the {len(below)} runs"
    print(f"deleted run {args.run}" + (f" and {runs} below it: {', '.join(below)}" if below else ""))
    if left:
        print(f"run {above} started it, and now bills its tree without {'them' if below else 'it'}")
    return 0


def cmd_prune(args: argparse.Namespace) -> int:
    with opened(args.store, existing=True) as store:
        report = prune_runs(args.older_than, store, statuses=args.status or None, dry_run=args.dry_run)
    verb = "would delete" if report.dry_run else "deleted"
    for run_id in report.deleted:
        print(f"{verb} {run_id}" + (f" ({report.status[run_id]})" if run_id in report.status else ""))
    for run_id, holder in report.refused:
        print(f"nb-durable: kept {run_id}: it is being written by {holder}", file=sys.stderr)
    done = "would be deleted (a dry run: nothing was)" if report.dry_run else "deleted"
    kept = f", {len(report.refused)} being written kept" if report.refused else ""
    queued = sum(report.status.get(r) == "queued" for r in report.deleted)
    # A queued run is work a worker never started, not a record: said apart, so a sweep that
    # took a backlog with it is noticed (--status narrows the prune).
    never = f", {queued} of them queued and never run," if queued else ""
    print(f"{len(report.deleted)} run(s){never} {done}{kept}")
    return 0


def add_delete(p: argparse.ArgumentParser) -> None:
    """The arguments of ``nb-durable delete``."""
    p.add_argument("run", help="the run id")
    p.set_defaults(func=cmd_delete)


def add_prune(p: argparse.ArgumentParser) -> None:
    """The arguments of ``nb-durable prune``."""
    p.add_argument(
        "--older-than",
        type=duration,
        required=True,
        metavar="AGE",
        help="delete runs whose last event is older than this: 30d, 12h, 90m, 45s, 2w",
    )
    p.add_argument(
        "--status",
        action="append",
        type=status_among(PRUNABLE),
        metavar="STATUS",
        help=f"only runs with this status: {', '.join(PRUNABLE)} (repeat for several; default: any status)",
    )
    p.add_argument("--dry-run", action="store_true", help="list what would be deleted, delete nothing")
    p.set_defaults(func=cmd_prune)
