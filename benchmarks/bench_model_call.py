"""What one model call costs the process that makes it: the real SDK against a bare HTTP POST.

The loopback Messages API (``tests.fakes``) runs in a child process, so only the caller's CPU
is counted. Each way of asking the same request (a tool-use reply of about 400 bytes) is timed
over ``--calls`` calls, after a warm-up, and reported as wall p50 and CPU per call, with its
ratio to the baseline measured in the same run: a bare ``urllib`` POST, which is what
``bench_worker.py``'s DBOS workflows send.

* ``urllib``: the baseline (no SDK);
* ``SDK create``: ``client.messages.create`` (the SDK, unstreamed);
* ``SDK stream``: ``client.messages.stream``, every event read, the final message dumped;
* ``AnthropicModel``: what a run sends (``nb_durable.agent.models.anthropic``): the SDK
  stream with the stall timeout and the error mapping, the reply as JSON.

    python benchmarks/bench_model_call.py [--calls 300]

Measured 2026-12-04 on the 2-core machine, quiet (load under 1), anthropic 2.17.0:

    way              wall p50 ms   CPU ms/call   CPU x urllib
    urllib                  0.71          0.26           1.00
    SDK create              1.14          0.83           3.15
    SDK stream              1.68          1.37           5.18
    AnthropicModel          1.70          1.38           5.23

Our own wrapping adds nothing measurable to the SDK's stream. A run resumed in
``bench_worker.py`` makes 9 calls: about 12 ms of CPU in the SDK where DBOS's workflow spends
2.3 in ``urllib``, out of 40 to 55 ms of worker CPU a run on PostgreSQL (runs resumed one
after another in one process, the loopback API in another). Where the CPU is the limit (4
workers on 2 cores), that 10 ms a run is paid before any of nb_durable's own work.
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
    """The loopback API in this process, its URL on stdout, until stdin closes."""
    from tests.fakes import MessagesAPIServer, Scenario, reply, tool_use

    class Looks(Scenario):
        def action(self, request: Any) -> Any:
            return reply("Looking around.", tool_use("list_dir", {"path": "."}, id="toolu_1"))

    with MessagesAPIServer(Looks()) as api:
        print(api.url, flush=True)
        sys.stdin.read()


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
    finally:
        if server.stdin is not None:
            server.stdin.close()
        server.wait(30)
    base = results[0][2]
    print(f"{args.calls} calls each, the loopback API in another process; anthropic {anthropic.__version__}")
    print(f"{'way':<16} {'wall p50 ms':>11} {'CPU ms/call':>12} {'CPU x urllib':>13}")
    for name, wall, cpu in results:
        print(f"{name:<16} {wall:>11.2f} {cpu:>12.2f} {cpu / base:>13.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
