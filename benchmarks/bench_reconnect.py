"""What a PostgreSQL writer pays to ride out a dropped connection, against an ordinary append.

One run on the private server of ``tests/pg.py`` (fsync off, as ``bench_worker.py``'s: the
figure is the reconnect, not the disk) records ``--steps`` steps at ``durability="full"``; every ``--every``-th step's writer session is
terminated (``pg_terminate_backend``, what a DBA, a server restart or a network cut does) just
before its result is recorded, so that append finds its connection gone, reconnects, takes the
lease back (``core.stores.postgres.reconnect``) and is made once. Printed: the wall time of an
ordinary step's record and of a recovering one (p50, p99), and their ratio, both measured in
this run; then that every step was recorded once.

    python benchmarks/bench_reconnect.py [--steps 400] [--every 20]

Measured 2026-12-06 on the 2-core machine, quiet, three runs of 400 steps (20 terminated):
an ordinary step took 0.26-0.34 ms (p50), one whose session was terminated 6.6-8.7 ms (p99
9.3-11.2): a new connection, the lease taken back and the log's end checked, 24-27 times an
ordinary step. Every step was recorded once in each run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nb_durable import EventLog, read_run, run_step
from tests.core.test_postgres import backend_holding, terminate
from tests.pg import postgres_url


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--every", type=int, default=20, help="terminate the writer's session before every Nth record")
    args = parser.parse_args()
    url = postgres_url()
    ordinary: list[float] = []
    recovering: list[float] = []
    with EventLog("blips", url, durability="full") as log:
        for i in range(args.steps):
            blip = i % args.every == args.every - 1

            spent = [0.0]

            def work(blip: bool = blip, i: int = i, spent: list[float] = spent) -> int:
                if blip:  # the termination itself is not the writer's cost: timed apart
                    started = time.perf_counter()
                    terminate(backend_holding(url, "blips"))
                    spent[0] = time.perf_counter() - started
                return i

            started = time.perf_counter()
            run_step(log, f"s{i}", work)
            (recovering if blip else ordinary).append(1000 * (time.perf_counter() - started - spent[0]))
        log.finish_run("completed")
    steps = read_run("blips", url).steps
    assert [s.result for s in steps] == list(range(args.steps)), "a step recorded twice or lost"

    def p(values: list[float], q: float) -> float:
        return sorted(values)[min(len(values) - 1, int(q * len(values)))]

    print(f"{args.steps} steps, durability full; the writer's session terminated before every {args.every}th record")
    print(f"{'':36}{'p50 ms':>10}{'p99 ms':>10}{'steps':>8}")
    for name, values in (("a step, ordinary", ordinary), ("a step whose session was terminated", recovering)):
        print(f"{name:<36}{statistics.median(values):>10.2f}{p(values, 0.99):>10.2f}{len(values):>8}")
    print(f"recovering / ordinary (p50): x{statistics.median(recovering) / statistics.median(ordinary):.1f}")
    print(f"every step recorded once: {len(steps)} steps, results 0..{args.steps - 1} in order")
    return 0


if __name__ == "__main__":
    sys.exit(main())
