"""``nb-durable``: list, show, fork runs and watch a crash being replayed, from a terminal.

Exit codes: 0 success, 1 the run failed or is in doubt, 2 bad usage (unknown run, bad
flags), 3 the run is locked by another process, 130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from .core.durable import durable_run, step
from .core.events import Event, StepCompleted
from .core.log import current_step, fork
from .core.runs import RunSummary, list_runs, read_run
from .errors import NbDurableError, RunError, RunLockedError, RunNotFoundError, StoreError

__all__ = ["main"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_LOCKED, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


def _when(ts: float | None) -> str:
    return datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S") if ts else "-"


def _short(value: Any, width: int = 60) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def cmd_runs(args: argparse.Namespace) -> int:
    runs = list_runs(args.store)
    if not runs:
        print(f"no runs in {args.store or os.environ.get('NB_DURABLE_STORE') or 'runs'}")
        return EXIT_OK
    print(f"{'run':<32} {'status':<12} {'steps':>5}  {'updated':<19}")
    for summary in runs:
        print(f"{summary.run_id:<32} {summary.status:<12} {summary.steps:>5}  {_when(summary.updated_at):<19}")
    return EXIT_OK


def _describe(summary: RunSummary) -> str:
    return (
        f"run {summary.run_id} ({summary.status}, {summary.steps} steps) at {summary.location}\n"
        f"started {_when(summary.started_at)}, last event {_when(summary.updated_at)}"
    )


def cmd_show(args: argparse.Namespace) -> int:
    record = read_run(args.run, args.store)
    print(_describe(record.summary))
    for s in record.steps:
        extra = f" after {len(s.attempts)} failed attempt(s)" if s.attempts else ""
        decided = "".join(f" [{d.decision} by {d.by}]" for d in s.decisions)
        result = "" if s.state != "completed" else "  " + _short(s.result)
        print(f"  {s.position:>4}  {s.state:<11} {s.step_id}{extra}{decided}{result}")
    if record.summary.error:
        print(f"error: {record.summary.error}")
    return EXIT_OK if record.summary.status in ("completed", "running") else EXIT_FAILED


def cmd_fork(args: argparse.Namespace) -> int:
    with fork(args.run, args.new, at=args.at, root=args.store) as log:
        print(f"forked {args.run} at step {args.at} into {log.run_id} ({log.location})")
    return EXIT_OK


# -- the plain-Python crash-and-replay demonstration --------------------------------------

DEMO_STEPS = 6
DEMO_RUN = "demo-pipeline"


def _demo_pipeline(store: str, outbox: Path, crash_at: int) -> None:
    """Six steps that take a moment each; the last sends a report (an external effect)."""

    def work(seconds: float) -> None:
        context = current_step()
        if context is not None and context.position + 1 == crash_at:
            time.sleep(seconds / 2)
            print(f"  ✗ the process is killed (SIGKILL) in the middle of step {crash_at}", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(seconds)

    @step
    def download(i: int) -> str:
        work(0.3)
        return f"chunk {i}: {1000 + 37 * i} rows"

    @step
    def summarize(chunks: list[str]) -> str:
        work(0.3)
        return f"{sum(int(c.split(': ')[1].split()[0]) for c in chunks)} rows in {len(chunks)} chunks"

    def already_sent(text: str) -> str | None:
        """Check-then-act: if the outbox has the report, the send happened before a crash."""
        sent = outbox.exists() and text + "\n" in outbox.read_text()
        return f"sent: {text}" if sent else None

    @step(effect="external", check=already_sent)
    def send_report(text: str) -> str:
        work(0.0)
        with open(outbox, "a") as f:
            f.write(text + "\n")
        return f"sent: {text}"

    def show(event: Event, replayed: bool) -> None:
        if isinstance(event, StepCompleted):
            how = "replayed" if replayed else "live    "
            took = "" if replayed else f"{event.ms / 1000:5.2f}s"
            print(f"  {how}  {event.step.split('.')[-1]:<14} {took:>6}  {_short(event.result, 44)}", flush=True)

    started = time.perf_counter()
    with durable_run(DEMO_RUN, store) as log:
        log.listeners.append(show)
        chunks = [download(i) for i in range(1, 5)]
        summary = summarize(chunks)
        sent = send_report(summary)
        log.finish_run("completed", output=sent)
    print(f"  finished in {time.perf_counter() - started:.2f}s")


def cmd_demo(args: argparse.Namespace) -> int:
    if args.child:
        _demo_pipeline(args.store, Path(args.outbox), args.crash_at)
        return EXIT_OK
    if not 1 <= args.crash_at <= DEMO_STEPS:
        raise ValueError(f"--crash-at must be a step number from 1 to {DEMO_STEPS}, not {args.crash_at}")
    workdir = Path(tempfile.mkdtemp(prefix="nb-durable-demo-"))
    store, outbox = str(workdir / "runs"), workdir / "outbox.txt"
    print(
        f"nb_durable demo: a {DEMO_STEPS}-step pipeline (4 downloads, a summary, a report that is "
        f"sent),\nwhose process is killed in step {args.crash_at}, then started again with the same code.\n"
    )
    child = [sys.executable, "-m", "nb_durable.cli", "demo", "--child", "--store", store, "--outbox", str(outbox)]
    print("first process:")
    first = subprocess.run([*child, "--crash-at", str(args.crash_at)], check=False)
    print(f"  (exit status {first.returncode})\n\nsecond process:")
    second = subprocess.run([*child, "--crash-at", "0"], check=False)
    sends = outbox.read_text().count("\n") if outbox.exists() else 0
    record = read_run(DEMO_RUN, store)
    print(
        "\nThe second process replayed what the first had recorded, executing nothing, and went on "
        f"live.\nThe report was sent {sends} time(s); the run is {record.summary.status}. Its log "
        f"({len(record.events)} events): {record.summary.location}\n"
        f"See it with: nb-durable show {DEMO_RUN} --store {store}"
    )
    return EXIT_OK if second.returncode == 0 and sends == 1 else EXIT_FAILED


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--store",
        default=None,
        help="where runs live: a folder (JSONL), sqlite:///runs.db, ... (default: $NB_DURABLE_STORE or runs)",
    )
    parser = argparse.ArgumentParser(
        prog="nb-durable", description="Durable agent runs: list, inspect, fork, demonstrate."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, help: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help, parents=[common])

    p = add("runs", "list runs with their status")
    p.set_defaults(func=cmd_runs)

    p = add("show", "a run's steps as text")
    p.add_argument("run", help="the run id")
    p.set_defaults(func=cmd_show)

    p = add("fork", "start a new run from the first N steps of another")
    p.add_argument("run", help="the run to fork")
    p.add_argument("new", help="the new run's id")
    p.add_argument("--at", type=int, required=True, help="how many recorded steps to keep")
    p.set_defaults(func=cmd_fork)

    p = add("demo", "watch a process killed mid-run resume without repeating work")
    p.add_argument("--crash-at", type=int, default=4, help="the step during which the first process dies")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--outbox", help=argparse.SUPPRESS)
    p.set_defaults(func=cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except RunLockedError as e:
        print(f"nb-durable: {e}", file=sys.stderr)
        return EXIT_LOCKED
    except (RunNotFoundError, StoreError, ValueError) as e:
        print(f"nb-durable: {e}", file=sys.stderr)
        return EXIT_USAGE
    except (RunError, NbDurableError) as e:
        print(f"nb-durable: {e}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print("nb-durable: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
