"""Copying a store: its time and peak memory, against reading every run of it once.

A JSONL folder of ``--runs`` runs, each of ``--steps`` steps whose results are ``--kb`` KB, is
copied into a new SQLite database (``copy_runs``, what ``nb-durable copy`` calls). The baseline,
measured in the same run of this script, is reading and checking every source run once
(``History.load`` of each log, as a copy must at least do). Each side runs in a fresh child
process, so its peak memory (``ru_maxrss``) is its own; the figures are medians of ``--repeat``.

* time: copy / read, the price of writing each run, reading it back to compare, and (since
  runs are let go once checked) reading every source run a second time;
* peak memory above the interpreter's (the same child with nothing done): the copy's, the
  read's, and the source's size beside them. A copy that held every run at once grew with
  the store; one run at a time, with its largest run.

    python benchmarks/bench_copy.py [--runs 200] [--steps 10] [--kb 50] [--repeat 3]

Measured 2026-12-06 on the 2-core machine (quiet), the defaults (200 runs, 97.9 MB of logs,
0.49 MB a run), medians of 3; before: ``copy_runs`` holding every checked run until the last
was checked (the same script run on the commit before, ``8b0384e``):

                      copy      read every run once   copy / read   copy's peak   peak / the store
    before            1.76 s    0.12 s                14.85x        +100.8 MB     1.03x
    one at a time     1.95 s    0.12 s                15.72x        +2.8 MB       0.03x

Reading each run a second time costs a tenth more time; the memory no longer grows with the store.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import json, resource, sys, time
way, source, target = sys.argv[1:4]
from nb_durable.core.history import History
from nb_durable.core.stores import open_store
from nb_durable.core.whole_runs.transfer import copy_runs
start = time.perf_counter()
if way == "copy":
    copy_runs(source, target)
elif way == "read":
    store = open_store(source)
    for run_id in store.run_ids():
        History.load(run_id, store.load(run_id))
print(json.dumps({"seconds": time.perf_counter() - start, "kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def fill(source: Path, runs: int, steps: int, kb: int) -> int:
    """The source's runs; its size in bytes."""
    from nb_durable import EventLog, run_step

    for i in range(runs):
        with EventLog(f"run-{i:05d}", source, durability="none") as log:
            log.start_run({"task": f"task {i}"})
            for n in range(steps):
                run_step(log, f"s{n}", lambda n=n: f"{n}:" + "x" * (kb * 1024))  # type: ignore[misc]
            log.finish_run("completed")
    return sum(p.stat().st_size for p in source.glob("*.jsonl"))


def measure(way: str, source: Path, target: str) -> dict[str, float]:
    done = subprocess.run([sys.executable, "-c", CHILD, way, str(source), target], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--kb", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "runs"
        size = fill(source, args.runs, args.steps, args.kb)
        figures: dict[str, list[dict[str, float]]] = {"idle": [], "read": [], "copy": []}
        for i in range(args.repeat):
            for way in figures:
                figures[way].append(measure(way, source, f"sqlite:///{tmp}/copy-{way}-{i}.db"))
    idle = statistics.median(f["kb"] for f in figures["idle"])
    read_s, copy_s = (statistics.median(f["seconds"] for f in figures[w]) for w in ("read", "copy"))
    read_mb, copy_mb = ((statistics.median(f["kb"] for f in figures[w]) - idle) / 1024 for w in ("read", "copy"))
    print(f"{args.runs} runs of {args.steps} steps of {args.kb} KB: {size / 2**20:.1f} MB of logs, "
          f"{size / args.runs / 2**20:.2f} MB a run; medians of {args.repeat}")  # fmt: skip
    print(f"  read every run once   {read_s:7.2f} s   peak +{read_mb:6.1f} MB")
    print(f"  copy into SQLite      {copy_s:7.2f} s   peak +{copy_mb:6.1f} MB")
    print(f"  copy / read           {copy_s / read_s:7.2f}x    peak / the store {copy_mb * 2**20 / size:.2f}x")


if __name__ == "__main__":
    main()
