"""Resume workers on one PostgreSQL server: runs completed per second with 1, 2 and 4 worker processes.

    python benchmarks/bench_worker.py              # 100 runs of 20 steps
    python benchmarks/bench_worker.py --runs 24    # a smoke test

Every run is an agent run of 20 steps (10 model calls through the real SDK to this script's
loopback Messages API, each reply after ``--latency`` seconds, and 10 ``list_dir`` calls). The
runs are started in this process and stopped as a killed process would leave them (a
``SimulatedCrash`` as their third step starts), so each needs 18 steps resumed. Then K
``nb-durable worker --concurrency 2`` processes resume all of them on a fresh schema of one
private PostgreSQL server (``tests/pg.py``). Figures, per K:

* *runs/s*: runs completed per second over the resume window, from the first event a worker
  wrote to the last (read from the runs' own timestamps, so the workers' start-up, about 3 s
  of importing the SDK, is left out; the wall time with it is printed beside);
* *step p50/p99*: the time between a run's consecutive recorded step results during the
  resume: the model's latency plus what the agent and the store add;
* the same with K=2 and one worker SIGKILLed once half the runs are done (its runs go to the
  other worker when their lease drops).

Measured 2026-12-01 on this 2-core machine (100 runs; the loopback server in this process):
1 worker 1.6 runs/s (step p50 17 ms, p99 127 ms), 2 workers 2.3 (19 / 87), 4 workers 2.0
(31 / 127), 2 with one SIGKILLed halfway 2.1 (15 / 75). Two cores are the limit: each step
costs CPU in the worker (the SDK, JSON) and in the server, and every idle worker's poll reads
every run's log (``list_runs``), so past two workers processes only compete.

DBOS recovering the same number of workflows is not measured here (it would need its own
venv; see bench_postgres.py for DBOS against the store step by step).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import contextlib
import itertools

from nb_durable.agent.crash import CrashAt
from nb_durable.agent.hooks import RunHooks
from nb_durable.agent.loop import run_agent
from nb_durable.agent.models.anthropic import AnthropicModel
from nb_durable.core.events import StepCompleted
from nb_durable.core.runs import list_runs, read_runs
from nb_durable.errors import SimulatedCrash
from tests.conftest import subprocess_env
from tests.fakes import Action, Delay, MessagesAPIServer, RecordedRequest, Scenario, reply, tool_use
from tests.pg import postgres_url

TURNS = 10  # model calls per run; each but the last asks for one list_dir: 20 steps


class Turns(Scenario):
    def __init__(self, latency: float) -> None:
        self.latency = latency

    def action(self, request: RecordedRequest) -> Action:
        turn = request.turn or 0
        if turn + 1 < TURNS:
            answer = reply(f"Looking, turn {turn}.", tool_use("list_dir", {"path": "."}, id=f"toolu_{turn}"))
        else:
            answer = reply("Done.")
        return Delay(self.latency, answer)


def crashed_runs(store: str, workspace: Path, n: int) -> None:
    """``n`` runs, each stopped as a killed process would leave it as its third step starts."""

    def one(i: int) -> None:
        with contextlib.suppress(SimulatedCrash):
            run_agent(
                f"bench run {i}: look around", run_id=f"b{i:03d}", client=AnthropicModel(timeout=30), model="claude-test-1",
                store=store, workspace=workspace, max_turns=TURNS + 2, max_tokens=256, hooks=RunHooks(before_step=CrashAt(3)),
            )

    for start in range(0, n, 8):
        threads = [threading.Thread(target=one, args=(i,)) for i in range(start, min(n, start + 8))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()


def resume(store: str, env: dict[str, str], workers: int, n: int, kill_one: bool) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "nb_durable.cli", "worker", "--store", store, "--concurrency", "2", "--poll", "0.2"]
    started, mark = time.monotonic(), time.time()
    procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(workers)]
    killed = False
    try:
        while True:
            done = sum(s.status == "completed" for s in list_runs(store))
            if kill_one and not killed and done >= n // 2:
                procs[0].send_signal(signal.SIGKILL)
                procs[0].wait()
                killed = True
            if done == n:
                break
            time.sleep(0.1)
        wall = time.monotonic() - started
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait(60)
    first, last, gaps = float("inf"), 0.0, []
    for record in read_runs(store):
        resumed = [e for e in record.events if e.ts >= mark]
        first = min(first, resumed[0].ts)
        last = max(last, resumed[-1].ts)
        stamps = [e.ts for e in resumed if isinstance(e, StepCompleted)]
        gaps += [b - a for a, b in itertools.pairwise(stamps)]
    gaps.sort()
    window = last - first
    return {
        "workers": workers,
        "killed": killed,
        "runs_per_s": n / window,
        "window": window,
        "wall": wall,
        "p50_ms": 1000 * statistics.median(gaps),
        "p99_ms": 1000 * gaps[int(0.99 * (len(gaps) - 1))],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--latency", type=float, default=0.01, help="seconds before each model reply")
    args = parser.parse_args()
    import tempfile

    with tempfile.TemporaryDirectory() as tmp, MessagesAPIServer(Turns(args.latency)) as server:
        workspace = Path(tmp)
        os.environ["ANTHROPIC_BASE_URL"] = server.url
        os.environ["ANTHROPIC_API_KEY"] = "sk-bench"
        env = subprocess_env(ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="sk-bench")
        results = []
        for workers, kill_one in ((1, False), (2, False), (4, False), (2, True)):
            store = postgres_url()
            crashed_runs(store, workspace, args.runs)
            assert all(s.status == "interrupted" for s in list_runs(store))
            results.append(resume(store, env, workers, args.runs, kill_one))
    print(f"{args.runs} runs of {2 * TURNS} steps, {args.latency * 1000:.0f} ms per model reply, "
          f"PostgreSQL, {os.cpu_count()} cores; each worker: --concurrency 2 (threads)")
    print(f"{'workers':<22} {'runs/s':>8} {'window s':>9} {'wall s':>7} {'step p50 ms':>12} {'step p99 ms':>12}")
    for r in results:
        name = f"{r['workers']}" + (" (one SIGKILLed)" if r["killed"] else "")
        print(f"{name:<22} {r['runs_per_s']:>8.1f} {r['window']:>9.2f} {r['wall']:>7.2f} {r['p50_ms']:>12.1f} {r['p99_ms']:>12.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
