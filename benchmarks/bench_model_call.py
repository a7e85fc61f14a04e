"""What one model call costs the process that makes it: the real SDK against DBOS's bare step.

The loopback Messages API (``tests.fakes``, with ``bench_worker.py``'s turns) runs in a child
process, so only the caller's CPU is counted. Each way of asking the same request, the one a
``bench_worker.py`` run sends last (its task, nine replies and eight listings, the system prompt
and the tool schemas: 19 messages, ~5.6 KB, taken from an uninterrupted run), is timed over
``--calls`` calls, after a warm-up, and reported as wall p50 and CPU per call, with its ratio to
the baseline measured in the same run: DBOS's model step in ``bench_worker.py``
(``dbos_workflows.ask``: a ``urllib`` POST, the streamed reply read whole and its events folded).

* ``DBOS's step``: the baseline (no SDK);
* ``SDK create``: ``client.messages.create`` (the SDK, unstreamed);
* ``SDK stream``: ``client.messages.stream``, every event read, the final message dumped;
* ``AnthropicModel``: what a run sends (``nb_durable.agent.models.anthropic``): the SDK's
  ``create(stream=True)`` with the stall timeout and the error mapping, its raw events read and
  accumulated by ``agent.models.stream``, the reply as JSON.

Until 2026-12-07 the request was a first turn's (one message, one tool) and the baseline an
unstreamed ``urllib`` POST of it: that understated what the SDK adds to the calls DBOS's side
actually makes (1.14 ms of wall a call, where a run's last request streamed both ways shows 1.2-2).

Then one worker (``ResumeWorker.run(once=True)``) resumes ``--runs`` of ``bench_worker.py``'s
crashed runs on a fresh PostgreSQL schema, three ways: one run at a time with immediate replies
(the CPU a run, and the share of it its 9 model calls take at ``AnthropicModel``'s cost), then
with replies after ``--latency`` (bench_worker.py's default), one and two at a time. A run alone
at that latency bounds ``bench_worker.py``'s K=1 row (one worker, two runs at a time): two
threads of one process can at best overlap whole, so K=1 cannot pass 2 / (a run alone) runs/s.

    python benchmarks/bench_model_call.py [--calls 300] [--runs 60] [--latency 0.01]

Measured 2026-12-05 on the 2-core machine, quiet (load under 2), anthropic 2.17.0, two runs
(the machine's speed drifts by 10-15% between them):

    way              wall p50 ms   CPU ms/call   CPU x urllib
    urllib             0.72          0.26-0.27           1.00
    SDK create         1.16-1.28     0.85-0.91      3.2-3.4
    SDK stream         1.73-1.78     1.42-1.50      5.4-5.7
    AnthropicModel     1.40-1.55     1.10-1.29      4.2-4.9

    reply after   at a time   runs/s      ms a run      CPU ms a run   model step p50 ms
    0 ms          1           21.4-23.2   43.2-46.6     25.6-27.9      3.0
    10 ms         1           6.7-7.0     143.1-149.3   30.4-34.2      13.5-14.0
    10 ms         2           11.8-12.6   158.8-168.8   31.1-33.8      14.0-15.0

A resumed run's 9 model calls take 39-42% of its CPU (9.9-11.6 ms, where urllib would spend
2.4). With 10 ms replies a run alone takes 143-149 ms, so K=1 of ``bench_worker.py`` cannot pass
13.4-14.0 runs/s; 1.5x of DBOS's K=1 there (9.0-9.5 runs/s) is 13.5-14.3, which two runs at a
time would reach only if they slowed each other by nothing (they made 11.8-12.6). Of a model
step's 13.5-14 ms, 10 are the reply's latency and ~1.1 the SDK's CPU.

Measured 2026-12-06, not quiet (load 2-10: other engineers' test suites), four runs of this
version alternated with four of the one before it (a reply shaped by ``construct``, index rows
rewriting their settings with every append):

    figure                                 before              after
    AnthropicModel CPU x urllib            4.5-5.3             3.2-5.3
    0 ms, 1 at a time: runs/s, CPU ms      6.6-11.5, 49-60     11.3-14.0, 46-62
    10 ms, 1 at a time: ms a run           181-313             176-197
    10 ms, 2 at a time: runs/s             6.0-10.2            8.9-9.4

At that noise a whole run's figures cannot tell the two apart; measured where they could
(interleaved in one process, or on the same server): ``AnthropicModel`` 1.34 -> 1.21 ms of CPU a
call (min of 12 batches), an append with its index row 281-338 -> 187-207 us (p50), and the
PostgreSQL server's CPU a resumed run 14-19 -> 9-11 ms, which ``bench_worker.py``'s K=4 row
(CPU-bound on 2 cores) pays beside the workers'.

The tables above and the next one are of the first turn's request against an unstreamed
``urllib`` POST (see above). The same calls with replies after ``--latency`` (urllib and
``AnthropicModel`` only) say what the SDK adds to a model step where a run waits for each reply.
Measured 2026-12-07, evening, quiet:

    way              wall p50 ms   CPU ms/call   CPU x urllib
    urllib            11.40          0.51           1.00
    AnthropicModel    12.54          1.76           3.48

Both ways spend about twice the CPU of a call answered at once (0.27 and 1.01 ms there): after
each wait the process runs on cold caches. ``AnthropicModel`` adds 1.14 ms to each model step's
wall time and 1.26 ms of CPU beyond a bare POST, 10.3 and 11.3 ms over a resumed run's 9 calls,
which bound K=1 of ``bench_worker.py`` (a run alone 142 ms here, two at a time 164 ms each); DBOS's
steps there are bare POSTs. Not printed by this script, measured once that evening with
``cProfile`` over 500 calls answered at once, by package: h11, httpcore2 and httpx2 took about
43% of the SDK call's CPU, the SDK itself 14%; copying the request (``prepare_request_data``) of
the last turn's 19 messages, 60-90 us.

Before reading the raw events (2026-12-04, the SDK's stream helper with every event typed and
the final message dumped) ``AnthropicModel`` cost 1.57-1.74 ms of CPU a call and a resumed
run 35-40 ms. Where the CPU is the limit (``bench_worker.py`` with 4 workers on 2 cores), the
SDK's ~7 ms a run beyond a bare POST is paid before any of nb_durable's own work, which is the
other ~16-21 ms.

Measured 2026-12-07, night, with a run's last request and DBOS's step as the baseline (as
described at the top), three runs, the machine slower than the evening's (a run alone 167-182
ms where it had taken 142-149):

    way              wall p50 ms   CPU ms/call   CPU x DBOS
    DBOS's step        1.41-1.77     0.51-0.69      1.00
    SDK create         1.94-2.48     1.26-1.57      2.25-2.54
    SDK stream         2.71-3.03     1.97-2.21      2.86-3.94
    AnthropicModel     2.14-3.05     1.51-2.02      2.46-2.98
    with replies after 10 ms:
    DBOS's step       12.45-13.00    0.85-1.09      1.00
    AnthropicModel    13.69-14.96    2.24-3.00      2.54-2.75

So the SDK adds 1.2-2.0 ms of wall and 1.4-1.9 ms of CPU to every model step beyond what DBOS's
step does with the same request, 11-18 ms over a resumed run's 9 calls: about the distance
between the ~1.4x of DBOS that ``bench_worker.py`` measures at K=1 and the 1.5x issue 25 asks
for (a run two at a time takes ~165-185 ms there; 1.5x needs it ~7% shorter). A one-off trace
of one worker (spans around each append, the SDK's request, its send and the read of the
reply; not kept) put a model step at 14.4-15.0 ms from the SDK's call to the recorded reply,
12.3-12.5 of them in ``httpx2``'s send (the reply's 10 ms, the loopback API's parsing and the
wire), 0.4 in building the request and 0.9-1.1 in reading the streamed reply; an append took
0.5 ms alone and 1.0 two at a time, the two runs' threads sharing the process's GIL.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_worker import LATENCY, TURNS
from benchmarks.dbos_workflows import ask


def last_request() -> dict[str, Any]:
    """The body of a run's last model request (``bench_worker.py``'s run, uninterrupted): the
    task, every reply and listing so far, the system prompt and the tool schemas, streamed."""
    import tempfile

    from benchmarks.bench_worker import Turns
    from nb_durable.agent.models.anthropic import AnthropicModel
    from nb_durable.agent.run.loop import run_agent
    from tests.fakes import MessagesAPIServer

    with tempfile.TemporaryDirectory() as tmp, MessagesAPIServer(Turns(0.0)) as api:
        run_agent(
            "bench run: look around", client=AnthropicModel(api_key="sk-bench", base_url=api.url), model="claude-test-1",
            store=f"sqlite:///{tmp}/runs.db", workspace=tmp, max_turns=TURNS + 2, max_tokens=256,
        )
        body = api.requests_to("messages")[-1].body
    assert len(body["messages"]) == 2 * TURNS - 1, "the run did not make its turns"
    return dict(body)


def serve(latency: float) -> None:
    """The loopback API in this process (``bench_worker.py``'s turns, each reply after
    ``latency`` seconds), its URL on stdout, until stdin closes."""
    from benchmarks.bench_worker import Turns
    from tests.fakes import MessagesAPIServer

    with MessagesAPIServer(Turns(latency)) as api:
        print(api.url, flush=True)
        sys.stdin.read()


@contextlib.contextmanager
def loopback(latency: float) -> Iterator[str]:
    """The URL of the loopback API served by a child process, so only the caller's CPU is counted."""
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(latency)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        yield server.stdout.readline().strip()
    finally:
        if server.stdin is not None:
            server.stdin.close()
        server.wait(30)


def resumed_runs(url: str, n: int, concurrency: int) -> dict[str, float]:
    """One worker (``run(once=True)``, ``concurrency`` runs at a time) resuming ``n`` of
    ``bench_worker.py``'s crashed runs on a fresh PostgreSQL schema: wall and CPU a run (ms),
    runs/s, and a model step's time from intent to result (p50, ms, from the runs' own events)."""
    import os
    import tempfile

    from benchmarks.bench_worker import crashed_runs
    from nb_durable.agent.fleet.worker import ResumeWorker
    from nb_durable.agent.models.anthropic import preload
    from nb_durable.core.events import StepCompleted, StepStarted
    from nb_durable.core.runs import read_runs
    from tests.pg import postgres_url

    os.environ["ANTHROPIC_BASE_URL"], os.environ["ANTHROPIC_API_KEY"] = url, "sk-bench"
    preload()  # the SDK's import, once, as a worker does before it starts
    store = postgres_url()
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp) / "workspace"
        workspace.mkdir()
        crashed_runs(store, workspace, n)
        start, cpu, mark = time.perf_counter(), time.process_time(), time.time()
        done = ResumeWorker(store, concurrency=concurrency).run(once=True)
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    assert [t.outcome for t in done] == ["completed"] * n, done
    calls = []
    for record in read_runs(store):
        resumed = [e for e in record.events if e.ts >= mark]
        asked = {e.step: e.ts for e in resumed if isinstance(e, StepStarted) and e.step.startswith("model:")}
        calls += [e.ts - asked[e.step] for e in resumed if isinstance(e, StepCompleted) and e.step in asked]
    return {
        "wall_ms": 1000 * wall / n, "cpu_ms": 1000 * cpu / n, "runs_per_s": n / wall,
        "model_step_ms": 1000 * statistics.median(calls),
    }


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
    parser.add_argument("--runs", type=int, default=60, help="crashed runs a worker resumes, each way (0: none)")
    parser.add_argument(
        "--latency", type=float, default=LATENCY, help=f"seconds before each reply, for the runs resumed beside none (default {LATENCY})"
    )
    parser.add_argument("--serve", type=float, metavar="LATENCY", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve is not None:
        serve(args.serve)
        return 0
    import anthropic

    from nb_durable.agent.models.anthropic import AnthropicModel

    request = last_request()
    params = {k: v for k, v in request.items() if k != "stream"}  # what a caller of the SDK passes
    fixed = {k: v for k, v in request.items() if k != "messages"}

    def ways(url: str) -> list[tuple[str, Callable[[], Any]]]:
        """Each way of asking the run's last request of the loopback API at ``url``."""
        client = anthropic.Anthropic(base_url=url, api_key="sk-bench", max_retries=0)
        model = AnthropicModel(api_key="sk-bench", base_url=url)

        def created() -> None:
            client.messages.create(**params).model_dump(mode="json")

        def streamed() -> None:
            with client.messages.stream(**params) as stream:
                for _ in stream:
                    pass
                stream.get_final_message().model_dump(mode="json")

        return [
            ("DBOS's step", lambda: ask(url, fixed, request["messages"])),
            ("SDK create", created),
            ("SDK stream", streamed),
            ("AnthropicModel", lambda: model.create(params)),
        ]

    with loopback(0.0) as url:
        results = [(name, *timed(call, args.calls)) for name, call in ways(url)]
        runs = [(0.0, 1, resumed_runs(url, args.runs, 1))] if args.runs else []
    with loopback(args.latency) as url:
        # A process that waits for each reply runs its code on cold caches: the same calls cost more CPU.
        waited = [(name, *timed(call, max(args.calls // 5, 20))) for name, call in ways(url) if name in ("DBOS's step", "AnthropicModel")]
        if args.runs:
            runs += [(args.latency, k, resumed_runs(url, args.runs, k)) for k in (1, 2)]
    base = results[0][2]
    size = len(json.dumps(request))
    print(
        f"{args.calls} calls each of a run's last request ({len(request['messages'])} messages, {size} bytes), "
        f"the loopback API in another process; anthropic {anthropic.__version__}"
    )
    print(f"{'way':<16} {'wall p50 ms':>11} {'CPU ms/call':>12} {'CPU x DBOS':>11}")
    for name, wall, cpu in results:
        print(f"{name:<16} {wall:>11.2f} {cpu:>12.2f} {cpu / base:>11.2f}")
    (_, bare_wall, bare_cpu), (_, ours_wall, ours_cpu) = waited
    print(f"with replies after {args.latency * 1000:.0f} ms:")
    for name, wall, cpu in waited:
        print(f"{name:<16} {wall:>11.2f} {cpu:>12.2f} {cpu / bare_cpu:>11.2f}")
    print(
        f"so AnthropicModel adds {ours_wall - bare_wall:.2f} ms to a model step's wall time and {ours_cpu - bare_cpu:.2f} ms "
        f"of CPU beyond DBOS's step: at {TURNS - 1} calls a resumed run, {(TURNS - 1) * (ours_wall - bare_wall):.1f} ms "
        f"and {(TURNS - 1) * (ours_cpu - bare_cpu):.1f} ms a run"
    )
    if not runs:
        return 0
    calls = TURNS - 1  # a resumed run's model calls: its first was recorded before the crash
    sdk = calls * results[3][2]
    print(f"\none worker resuming {args.runs} crashed runs on PostgreSQL ({calls} model calls and {calls - 1} list_dir a run):")
    print(f"{'reply after ms':>14} {'at a time':>9} {'runs/s':>7} {'ms a run':>9} {'CPU ms a run':>13} {'model step p50 ms':>18}")
    for latency, k, r in runs:
        print(
            f"{latency * 1000:>14.0f} {k:>9} {r['runs_per_s']:>7.1f} {r['wall_ms'] * k:>9.1f} {r['cpu_ms']:>13.1f} "
            f"{r['model_step_ms']:>18.1f}"
        )
    print(
        f"\nIts {calls} model calls, at AnthropicModel's CPU, take {sdk:.1f} ms of a run's {runs[0][2]['cpu_ms']:.1f} "
        f"({sdk / runs[0][2]['cpu_ms']:.0%}), where DBOS's steps spend {calls * base:.1f}."
    )
    alone, paired = runs[1][2], runs[2][2]
    print(
        f"A run alone with {args.latency * 1000:.0f} ms replies takes {alone['wall_ms']:.1f} ms, so one worker taking 2 at a time "
        f"(bench_worker.py's K=1) stays under 2 / {alone['wall_ms']:.1f} ms = {2000 / alone['wall_ms']:.1f} runs/s, "
        f"however little the two threads slow each other; here it made {paired['runs_per_s']:.1f}."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
