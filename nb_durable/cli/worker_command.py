"""``nb-durable worker``: run queued runs and resume those whose writer died, until SIGTERM or SIGINT (logic: ``agent.fleet.worker``).

Only argument parsing and signals live here; the worker loads when the command runs. The first SIGTERM or SIGINT stops the worker
gracefully: no new run is taken, runs in flight are recorded as interrupted at their next step
boundary and their leases released, so another worker continues them; a second signal ends the
process at once (the leases go with it, as with any killed writer).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections import Counter
from collections.abc import Sequence
from types import FrameType
from typing import TYPE_CHECKING

from ..agent.display.inert_text import terminal_text
from ..agent.fleet.deaths import DEFAULT_MAX_DEATHS
from ..agent.settings import DEFAULT_IN_DOUBT, TERMINAL_IN_DOUBT
from ..agent.settings.flags import duration, positive_number, positive_whole_number
from ..core.stores import default_store, open_store, shown_store
from ..errors import EXIT_CODES, StoreError, StoreNotFoundError, StoreShortError
from .hints import in_cli_words

if TYPE_CHECKING:
    from ..agent.fleet.taken import Taken

__all__ = ["WORKER_HELP", "add_worker"]

WORKER_HELP = (
    "run, one after another or N at a time, the queued runs (run --batch, or submit() in Python) and the runs whose "
    "writer died, highest priority first (until SIGTERM or Ctrl-C)"
)


MADE = " (no store was there: made empty, it waits for runs queued into it; is the name right?)"
"""What the banner adds when the worker made its store: a SQLite file or folder missing, a
PostgreSQL schema without nb_durable's tables (a worker may start before the first submit, so it
makes the store; a mistyped name would otherwise leave it idle on a store nobody queues into,
without a word)."""


def _not_there(store: str) -> bool:
    """Whether the store is not there (a store it cannot reach now is: the worker says so itself, and waits)."""
    try:
        open_store(store, existing=True).close()
    except StoreNotFoundError:
        return True
    except StoreError:
        pass
    return False


def cmd_worker(args: argparse.Namespace) -> int:
    from ..agent.fleet.worker import ResumeWorker

    lock = threading.Lock()

    def report(taken: Taken) -> None:
        result = taken.result
        counts = f" ({result.replayed_steps} steps replayed, {result.live_steps} live)" if result else ""
        detail = f": {terminal_text(in_cli_words(taken.detail, args.store))}" if taken.detail and taken.outcome != "completed" else ""
        with lock:
            print(f"{taken.run_id}: {taken.outcome}{counts}{detail}", flush=True)

    store = args.store or default_store()
    missing = _not_there(store)
    worker = ResumeWorker(
        store=store,
        in_doubt=args.in_doubt,
        concurrency=args.concurrency,
        tags=tuple(args.tag or ()),
        older_than=args.older_than or 0.0,
        poll=args.poll,
        max_deaths=args.max_deaths,
        report=report,
        warn=lambda message: print(f"nb-durable worker: {terminal_text(message)}", file=sys.stderr, flush=True),
        # Made only if it is there now: one it could not make (a SQLite file in a folder that is
        # not there) was said "made empty" before the worker said it could not open it.
        ready=lambda: banner(
            f"nb-durable worker {worker.name} on {shown_store(worker.store)}: {args.concurrency} at a time"
            + (MADE if missing and not _not_there(store) else "")
        ),
    )
    if args.trace:
        from ..agent.display.tracing import TraceObserver

        worker.observer = TraceObserver()

    # The banner is said once the worker can take runs (the SDK's import is over a second): the
    # line means ready. A signal may come at any point of saying it (its handler runs between
    # any two statements here), so "stopping" is said after the banner or not at all, and a
    # signal before it leaves it unsaid: the worker never was ready.
    state = "starting"
    stopping_said = f"nb-durable worker {worker.name}: stopping; runs in flight stop at their next step"
    deferred = False

    def banner(line: str) -> None:
        nonlocal state
        state = "saying"
        if worker.stopping:
            state = "starting"
            return
        print(line, flush=True)
        state = "ready"
        if deferred:
            print(stopping_said, file=sys.stderr, flush=True)

    def on_signal(signum: int, frame: FrameType | None) -> None:
        nonlocal deferred
        signal.signal(signum, signal.SIG_DFL)  # a second signal ends the process at once
        if state == "ready":
            print(stopping_said, file=sys.stderr, flush=True)
        elif state == "saying":
            deferred = True
        worker.stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        taken = worker.run(once=args.once)
    except StoreShortError as e:
        # Only --once raises it: a pass its store cut short (a full disk) exits 2, as a store it cannot
        # reach does: a person must free space before the next pass; no run failed (1: a refused key's).
        raise StoreError(str(e)) from e
    if state != "ready":
        print(f"nb-durable worker {worker.name}: stopped while starting, before taking any run", flush=True)
        return 0
    print(f"nb-durable worker {worker.name}: {tally(taken)}", flush=True)
    if worker.refused is not None:
        print(f"nb-durable worker {worker.name}: {terminal_text(in_cli_words(worker.refused, args.store))}", file=sys.stderr, flush=True)
        return EXIT_CODES["failed"]
    return 0


WORKER_EPILOG = (
    "A run it cannot run on this machine (its workspace folder missing, an MCP server that does not "
    "start, its store failing as it ran, no API key set for a run that calls the Messages API) is passed over with the reason and tried again a minute later, never marked failed. "
    "So, for up to a minute, is a PostgreSQL run whose writer lost its database session mid-step and lives on (on this "
    "host), or lost it as the server restarted: that writer takes the lease back at its next write, so its step in flight "
    "is not done twice. "
    "A store it cannot reach, or that cannot take its writes for now (its disk full), is said once (again each minute, "
    "and when it is back) and tried at every poll; with --once it is said and it exits 2. "
    "A --store no store can have (a mistyped scheme, a folder named as a .db file, a PostgreSQL database or schema "
    "the server does not have), a PostgreSQL user the server refuses (no such role, a wrong or missing password, no "
    "right to use the schema or create the tables in it: the GRANT to run is said), or one that can only be read "
    "(read-only media), is said and it exits 2. "
    "A worker whose API key the Messages API refuses (401) stops after the run that met it (that run is recorded "
    "failed), and exits 1 saying so. "
    "A run taken --max-deaths times in a row by processes that died in one step before recording another is "
    "recorded failed, saying so, and no worker takes it again: resume it by hand once the cause is fixed. "
    "Two workers never run the same run: the run's lease decides. SIGTERM or SIGINT (Ctrl-C) stops it gracefully: "
    "each run in flight stops at its next step that is not an external effect, recorded, for any worker to continue, "
    "and it exits 0; a second signal ends it at once. As a service, signal the worker alone (systemd: KillMode=mixed): "
    "a signal to its whole process group also ends the run_bash commands in flight."
)


def add_worker(p: argparse.ArgumentParser) -> None:
    """The arguments of ``nb-durable worker``."""
    p.epilog = WORKER_EPILOG
    p.add_argument(
        "--in-doubt",
        choices=TERMINAL_IN_DOUBT,
        default=DEFAULT_IN_DOUBT,
        help="a run whose writer died inside an external tool: tell the model the outcome is unknown "
        f"(skip), run the tool again (rerun), or leave the run for a person (fail); default: {DEFAULT_IN_DOUBT}",
    )
    p.add_argument("--concurrency", type=positive_whole_number, default=1, help="runs taken at a time, each on a thread (default 1)")
    p.add_argument("--tag", action="append", help="only runs started with this tag (repeat: runs with every one)")
    p.add_argument("--older-than", type=duration, metavar="AGE", help="only runs idle at least this long: 90s, 5m, 1h")
    p.add_argument("--poll", type=positive_number, default=5.0, help="seconds between looks for runs to resume (default 5)")
    p.add_argument(
        "--max-deaths",
        type=positive_whole_number,
        default=DEFAULT_MAX_DEATHS,
        metavar="N",
        help="a run taken N times in a row by processes that died in a step before recording another (a tool or a "
        "reply that crashes or exhausts memory) is recorded failed, not taken again: resume it by hand once the cause is "
        f"fixed (default {DEFAULT_MAX_DEATHS}: a machine preempted in a long step also kills its worker)",
    )
    p.add_argument(
        "--once",
        action="store_true",
        help="one pass over the store, then exit (for cron and tests): 0, or 2 if the store could not be reached "
        "or written (a full disk)",
    )
    p.add_argument(
        "--trace",
        action="store_true",
        help="OpenTelemetry spans per run and step, to the tracer provider OpenTelemetry is configured with "
        "(pip install 'nb-durable[otel]')",
    )
    p.set_defaults(func=cmd_worker)


def tally(taken: Sequence[Taken]) -> str:
    """A worker's last words on the runs it tried: those it ran, those it left and why (a run
    another writer took in between is not one it passed over)."""
    ran = [t for t in taken if t.ran]
    finished = sum(1 for t in ran if t.outcome == "completed")
    from ..agent.fleet.taken import PASSED_OVER

    left = Counter("taken by another writer" if t.outcome == "locked" else PASSED_OVER for t in taken if not t.ran)
    said = "".join(f", {n} {why}" for why, n in sorted(left.items())) + (" (said above)" if left else "")
    return f"{len(ran)} run(s) taken, {finished} completed{said}"

