"""What one model call costs the process that makes it: the real SDK against a bare HTTP POST.

The loopback Messages API (``tests.fakes``, with ``bench_worker.py``'s turns) runs in a child
process, so only the caller's CPU is counted. Each way of asking the same request (a tool-use
reply of about 400 bytes) is timed over ``--calls`` calls, after a warm-up, and reported as
wall p50 and CPU per call, with its ratio to the baseline measured in the same run: a bare
``urllib`` POST, which is what ``bench_worker.py``'s DBOS workflows send.

* ``urllib``: the baseline (no SDK);
* ``SDK create``: ``client.messages.create`` (the SDK, unstreamed);
* ``SDK stream``: ``client.messages.stream``, every event read, the final message dumped;
* ``AnthropicModel``: what a run sends (``nb_durable.agent.models.anthropic``): the SDK's
  ``create(stream=True)`` with the stall timeout and the error mapping, its raw events read and
  accumulated by ``agent.models.stream``, the reply as JSON.

Then one worker (``ResumeWorker.run(once=True)``, one run at a time) resumes ``--runs`` of
``bench_worker.py``'s crashed runs on a fresh PostgreSQL schema: wall and CPU a run, and the
share of that CPU its 9 model calls take at ``AnthropicModel``'s cost.

    python benchmarks/bench_model_call.py [--calls 300] [--runs 60]

Measured 2026-12-05 on the 2-core machine, quiet (load under 2), anthropic 2.17.0, three runs
(the third's worker figure, 35 ms, came with every way of calling 15-20% slower: the machine's
speed drifts):

    way              wall p50 ms   CPU ms/call   CPU x urllib
    urllib             0.71-0.72     0.26-0.27           1.00
    SDK create         1.14-1.29     0.83-0.98      3.2-3.6
    SDK stream         1.71-2.12     1.40-1.73      5.3-6.4
    AnthropicModel     1.37-1.60     1.07-1.28      4.1-4.7

    a resumed run (17 steps, 9 model calls): 43-51 ms, 25.6-30.6 ms of CPU, of which the model
    calls 9.7 ms (32-38%), where urllib would spend 2.4

Before reading the raw events (2026-12-04, the SDK's stream helper with every event typed and
the final message dumped) ``AnthropicModel`` cost 1.57-1.74 ms of CPU a call and a resumed
run 35-40 ms. Where the CPU is the limit (``bench_worker.py`` with 4 workers on 2 cores), the
SDK's ~7 ms a run beyond a bare POST is paid before any of nb_durable's own work, which is the
other ~16-21 ms.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_worker import TURNS

REQUEST: dict[str, Any] = {
    "model": "claude-test-1",
    "max_tokens": 256,
    "messages": [{"role": "user", "content": "look around"}],
    "tools": [
        {
            "name": "list_dir",
            "description": "List a folder of the workspace.",
            "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
        }
    ],
}


def serve() -> None:
    """The loopback API in this process (``bench_worker.py``'s turns, no latency), its URL on
    stdout, until stdin closes."""
    from benchmarks.bench_worker import Turns
    from tests.fakes import MessagesAPIServer

    with MessagesAPIServer(Turns(0.0)) as api:
        print(api.url, flush=True)
        sys.stdin.read()


def resumed_runs(url: str, n: int) -> tuple[float, float]:
    """Wall and CPU per run, in ms, of one worker (``run(once=True)``, one run at a time)
    resuming ``n`` of ``bench_worker.py``'s crashed runs on a fresh PostgreSQL schema."""
    import os
    import tempfile

    from benchmarks.bench_worker import crashed_runs
    from nb_durable.agent.fleet.worker import ResumeWorker
    from nb_durable.agent.models.anthropic import preload
    from tests.pg import postgres_url

    os.environ["ANTHROPIC_BASE_URL"], os.environ["ANTHROPIC_API_KEY"] = url, "sk-bench"
    preload()  # the SDK's import, once, as a worker does before it starts
    store = postgres_url()
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp) / "workspace"
        workspace.mkdir()
        crashed_runs(store, workspace, n)
        start, cpu = time.perf_counter(), time.process_time()
        done = ResumeWorker(store, concurrency=1).run(once=True)
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    assert [t.outcome for t in done] == ["completed"] * n, done
    return 1000 * wall / n, 1000 * cpu / n


def timed(call: Callable[[], Any], n: int) -> tuple[float, float]:
    """Wall p50 and CPU per call, in ms, after a warm-up."""
    for _ in range(10):
        call()
    walls = []
    cpu = time.process_time()
    for _ in range(n):
        start = time.perf_counter()
        call()
        walls.append(time.perf_counter() - start)
    return 1000 * statistics.median(walls), 1000 * (time.process_time() - cpu) / n


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--runs", type=int, default=60, help="crashed runs a worker resumes (0: none)")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve()
        return 0
    import anthropic

    from nb_durable.agent.models.anthropic import AnthropicModel

    server = subprocess.Popen(
        [sys.executable, __file__, "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        client = anthropic.Anthropic(base_url=url, api_key="sk-bench", max_retries=0)
        model = AnthropicModel(api_key="sk-bench", base_url=url)
        body = json.dumps(REQUEST).encode()
        headers = {"content-type": "application/json", "x-api-key": "sk-bench", "anthropic-version": "2023-06-01"}

        def bare() -> None:
            request = urllib.request.Request(url + "/v1/messages", data=body, headers=headers)
            with urllib.request.urlopen(request) as response:
                json.loads(response.read())

        def created() -> None:
            client.messages.create(**REQUEST).model_dump(mode="json")

        def streamed() -> None:
            with client.messages.stream(**REQUEST) as stream:
                for _ in stream:
                    pass
                stream.get_final_message().model_dump(mode="json")

        ways = [("urllib", bare), ("SDK create", created), ("SDK stream", streamed), ("AnthropicModel", lambda: model.create(REQUEST))]
        results = [(name, *timed(call, args.calls)) for name, call in ways]
        run_wall, run_cpu = resumed_runs(url, args.runs) if args.runs else (0.0, 0.0)
    finally:
        if server.stdin is not None:
            server.stdin.close()
        server.wait(30)
    base = results[0][2]
    print(f"{args.calls} calls each, the loopback API in another process; anthropic {anthropic.__version__}")
    print(f"{'way':<16} {'wall p50 ms':>11} {'CPU ms/call':>12} {'CPU x urllib':>13}")
    for name, wall, cpu in results:
        print(f"{name:<16} {wall:>11.2f} {cpu:>12.2f} {cpu / base:>13.2f}")
    if args.runs:
        calls = TURNS - 1  # a resumed run's model calls: its first was recorded before the crash
        sdk = calls * results[3][2]
        print(
            f"\na worker resuming {args.runs} crashed runs one at a time on PostgreSQL: {run_wall:.1f} ms and "
            f"{run_cpu:.1f} ms of CPU a run; its {calls} model calls, at AnthropicModel's CPU, {sdk:.1f} ms "
            f"({sdk / run_cpu:.0%}), where urllib would spend {calls * base:.1f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
