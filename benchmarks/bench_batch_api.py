"""Message Batches (``--batch-api``) against normal calls: dollars, requests, batches, wall time,
and a worker SIGKILLed mid-batch that pays nothing twice.

    python benchmarks/bench_batch_api.py                 # 1,000 two-turn runs
    python benchmarks/bench_batch_api.py --runs 40       # a smoke test

N runs of two turns each (a ``list_dir`` call, then the answer) are queued with
``submit_batch`` and run by one ``nb-durable worker --once --concurrency C`` process (the real
SDK against this script's loopback Messages API), three times, each on a store and an API of
its own:

* *normal*: every model call a streamed ``POST /v1/messages``;
* *batch*: the same runs with ``batch_api=True``: the worker gathers its runs' calls into
  Message Batches (the fake ends a batch as soon as it is polled);
* *batch, killed*: as *batch*, but the fake holds the first batch until every run in it has
  recorded it, a worker is SIGKILLed there, and a second worker finishes all N runs.

Figures: wall time, model calls answered (each run's two), HTTP requests the API received,
batches created, and dollars (the run index's, as ``nb-durable runs`` shows them), with the
ratios of *batch* to *normal*. For *batch, killed*: how many custom ids went out in more than
one batch (0: nothing paid twice), turns asked again after they were answered (0), and its
dollars against *batch*'s.

Measured 2026-12-04 on this 2-core machine shared with four other agents (load average 10 to
14), 1,000 runs, ``--concurrency 50``, the default model's list prices (the final code; an
earlier run without the ``gathering`` decision gave 0.500x, 0.102x and 1.04x):

                     wall s  completed  model calls  HTTP requests  batches    dollars
    normal             86.4       1000         2000           2000        0     1.9859
    batch             103.4       1000         2000            192       48     0.9930
    batch, killed     114.8       1000         2000            302       52     0.9930

Batch mode paid 0.500x the dollars with 0.096x the HTTP requests (a batch gathered 42 calls on
average: runs a worker starts one after another drift apart, so not every round is one batch
of 50), in 1.20x the wall time here, where the fake ends a batch at its first poll (the real
API takes minutes to hours: batch mode is for work that can wait). Killed with 49 runs' calls
in the held batch: no custom id went out twice, no turn was asked again, no plain call was
made, and the dollars were 1.0000x the uninterrupted batch pass's.

Measured again 2026-12-06, same machine (one other engineer's tests beside it), same flags:

                     wall s  completed  model calls  HTTP requests  batches    dollars
    normal             20.6       1000         2000           2000        0     1.9859
    batch              69.5       1000         2000            168       42     0.9930
    batch, killed      72.1       1000         2000            270       42     0.9930

Dollars 0.500x, HTTP requests 0.084x; killed with 50 runs' calls in the held batch, again no
custom id sent twice, no turn asked again, no plain call, dollars 1.0000x. The normal pass took
a quarter of its time of 2026-12-04 (the machine was then under a load of 10 to 14, and the
worker's per-call costs have been cut since: ``bench_worker.py``), the batch passes two thirds:
a batch round waits out its gathering window and its polls (``message_batches.Gatherer``), so
wall time is 3.4x the normal pass's here.
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
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nb_durable.agent.fleet.batch import submit_batch
from nb_durable.agent.fleet.batch_file import BatchTask
from nb_durable.agent.models.message_batches import custom_id_of
from nb_durable.core.runs import list_runs, read_run
from tests.conftest import subprocess_env
from tests.fakes import Action, MessagesAPIServer, RecordedRequest, Scenario, reply, tool_use

KEY = "sk-bench-batch"


class TwoTurns(Scenario):
    """Turn 0: a ``list_dir`` call; turn 1: the answer."""

    def action(self, request: RecordedRequest) -> Action:
        task = str(request.messages[0]["content"]) if request.messages else ""
        if (request.turn or 0) == 0:
            return reply("Looking.", tool_use("list_dir", {"path": "."}, id=f"toolu_{abs(hash(task)) % 10**9}"))
        return reply(f"Done: {task}. The folder holds one file.")


def queue(store: str, workspace: Path, n: int, url: str, batch_api: bool) -> list[str]:
    tasks = [BatchTask(f"bench task {i}: look around") for i in range(n)]
    # The endpoint a run records is this process's: the worker's is the same, so no warning.
    os.environ.update({"ANTHROPIC_BASE_URL": url, "ANTHROPIC_API_KEY": KEY})
    handle = submit_batch(tasks, store=store, workspace=str(workspace), environ=dict(os.environ), batch_api=batch_api, max_turns=4)
    return list(handle.run_ids)


def worker(store: str, url: str, concurrency: int, *, once: bool) -> list[str]:
    return [
        sys.executable, "-m", "nb_durable.cli", "worker", "--store", store, "--concurrency", str(concurrency),
        "--poll", "0.2", *(["--once"] if once else []),
    ]  # fmt: skip


def tally(api: MessagesAPIServer, store: str, wall: float) -> dict[str, Any]:
    requests = api.requests
    runs = list_runs(store)
    answered = [r for r in requests if r.endpoint in ("messages", "batch_request") and r.outcome == "reply"]
    sent: Counter[str] = Counter()
    for batch in api.batches.created:
        sent.update(c for c, _ in batch.requests)
    # Each run's task and turn is asked for once (the fake's own turn counters span every run).
    asked = Counter((str(r.messages[0]["content"]), r.turn) for r in requests if r.endpoint in ("messages", "batch_request"))
    return {
        "wall": wall,
        "completed": sum(s.status == "completed" for s in runs),
        "runs": len(runs),
        "model_calls": len(answered),
        "http": sum(1 for r in requests if r.endpoint not in ("batch_request",)),
        "batches": len(api.batches.created),
        "dollars": sum(float(s.figures.get("dollars", 0.0)) for s in runs),
        "twice": sum(1 for c, k in sent.items() if k > 1),
        "repeats": sum(k - 1 for k in asked.values()),
        "direct": len(api.requests_to("messages")),
    }


def one_pass(tmp: Path, name: str, n: int, concurrency: int, batch_api: bool) -> dict[str, Any]:
    workspace = tmp / name / "ws"
    workspace.mkdir(parents=True)
    (workspace / "notes.txt").write_text("notes\n")
    store = f"sqlite:///{tmp / name / 'runs.db'}"
    with MessagesAPIServer(TwoTurns()) as api:
        queue(store, workspace, n, api.url, batch_api)
        env = subprocess_env(ANTHROPIC_BASE_URL=api.url, ANTHROPIC_API_KEY=KEY)
        started = time.monotonic()
        subprocess.run(worker(store, api.url, concurrency, once=True), env=env, check=True, stdout=subprocess.DEVNULL)
        return tally(api, store, time.monotonic() - started)


def killed_pass(tmp: Path, n: int, concurrency: int) -> dict[str, Any]:
    workspace = tmp / "killed" / "ws"
    workspace.mkdir(parents=True)
    (workspace / "notes.txt").write_text("notes\n")
    store = f"sqlite:///{tmp / 'killed' / 'runs.db'}"
    with MessagesAPIServer(TwoTurns(), batch_delay=float("inf")) as api:
        run_ids = queue(store, workspace, n, api.url, True)
        run_of = {custom_id_of(r, "model:0"): r for r in run_ids}
        env = subprocess_env(ANTHROPIC_BASE_URL=api.url, ANTHROPIC_API_KEY=KEY)
        started = time.monotonic()
        first = subprocess.Popen(worker(store, api.url, concurrency, once=False), env=env, stdout=subprocess.DEVNULL)
        try:
            while True:  # until the first batch exists and every run in it has recorded it
                created = api.batches.created
                if created:
                    held = [run_of[c] for c, _ in created[0].requests if c in run_of]
                    if held and all(_recorded(store, r, created[0].id) for r in held):
                        break
                if first.poll() is not None:
                    raise SystemExit("the first worker exited before its batch was recorded")
                time.sleep(0.1)
        finally:
            first.send_signal(signal.SIGKILL)
            first.wait()
        in_flight = len(api.batches.created[0].requests)
        api.batches.delay = 0.0
        subprocess.run(worker(store, api.url, concurrency, once=True), env=env, check=True, stdout=subprocess.DEVNULL)
        return {**tally(api, store, time.monotonic() - started), "in_flight": in_flight}


def _recorded(store: str, run_id: str, batch_id: str) -> bool:
    try:
        return any(getattr(e, "decision", "") == f"in batch {batch_id}" for e in read_run(run_id, store).events)
    except Exception:
        return False


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=50, help="runs a worker runs at once (threads)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        normal = one_pass(tmp, "normal", args.runs, args.concurrency, False)
        batch = one_pass(tmp, "batch", args.runs, args.concurrency, True)
        killed = killed_pass(tmp, args.runs, args.concurrency)
    print(f"{args.runs} two-turn runs, one worker, --concurrency {args.concurrency}, loopback Messages API\n")
    print(f"{'':<16} {'wall s':>8} {'completed':>10} {'model calls':>12} {'HTTP requests':>14} {'batches':>8} {'dollars':>10}")
    for name, r in (("normal", normal), ("batch", batch), ("batch, killed", killed)):
        print(
            f"{name:<16} {r['wall']:>8.1f} {r['completed']:>10} {r['model_calls']:>12} {r['http']:>14} "
            f"{r['batches']:>8} {r['dollars']:>10.4f}"
        )
    print(
        f"\nbatch / normal: dollars {batch['dollars'] / normal['dollars']:.3f}x, HTTP requests "
        f"{batch['http'] / normal['http']:.3f}x, wall time {batch['wall'] / normal['wall']:.2f}x"
    )
    print(
        f"killed mid-batch ({killed['in_flight']} runs' calls in the held batch): custom ids sent in two batches: "
        f"{killed['twice']}; turns asked again: {killed['repeats']}; plain calls: {killed['direct']}; dollars against "
        f"batch: {killed['dollars'] / batch['dollars']:.4f}x"
    )
    print(json.dumps({"normal": normal, "batch": batch, "killed": killed}))
    ok = all(r["completed"] == args.runs for r in (normal, batch, killed)) and killed["twice"] == 0 and killed["repeats"] == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
