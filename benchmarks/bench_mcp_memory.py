"""Peak memory of a run whose MCP server sends a huge result or a huge stderr line.

Each case is a fresh process that starts the raw test server (``tests/agent/mcp/raw_server.py``,
stdio), runs one scripted agent turn that calls one tool, records the run in a JSONL store,
and prints its own peak resident set (``ru_maxrss``; the server is another process and is
not counted). The baseline is the same run with a 1 KB result, measured in the same run of
this script; the ratios say what a huge answer costs on top of it:

* ``result 50 MB``: ``big(size=50_000_000)``, a text result of 50 MB on one JSON-RPC line;
* ``stderr 100 MB``: ``shout(size=100_000_000)``, one 100 MB line on the server's stderr;
* ``HTTP 50 MB``: ``big(size=50_000_000)`` of the ledger test server (``mcp`` SDK) over
  streamable HTTP on loopback, in a process of its own.

What the run records and sends back to the model is capped either way (the tool output
limit); what this measures is how much the process held on the way.

Measured on the 2-core development machine: the baseline peaks at 73 MB; the 50 MB result at
83 MB (1.13x), the 100 MB stderr line at 73 MB (1.00x) and the 50 MB answer over HTTP at 106 MB
(1.45x), since each JSON string is cut at 1 MiB as the server's stdout or HTTP body is read,
and the stderr reader keeps 1,000 characters of a line. Before that, the same cases peaked at
312 MB (4.26x), 328 MB (4.48x) and 556 MB (7.59x).

    python benchmarks/bench_mcp_memory.py            # ~40 s
    python benchmarks/bench_mcp_memory.py --size 20  # a 20 MB result (and a 40 MB stderr line)
"""

from __future__ import annotations

import argparse
import json
import resource
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RAW = REPO / "tests" / "agent" / "mcp" / "raw_server.py"
LEDGER = REPO / "tests" / "agent" / "mcp" / "ledger_server.py"


def child(tool: str, size: int, folder: str, url: str) -> None:
    """One case in this process: the run, then the peak RSS and what was recorded, as JSON."""
    from nb_durable.agent import ToolRegistry, mcp_tools, run_agent
    from nb_durable.core.runs import read_run
    from nb_durable.testing import ScriptedModel, text_message, tool_use_message

    server = {"url": url} if url else {"command": sys.executable, "args": [str(RAW), folder]}
    config = {"mcpServers": {"raw": server}}
    model = ScriptedModel([tool_use_message([(tool, {"size": size})]), text_message("Done.")])
    with mcp_tools(config) as mcp:
        result = run_agent("Call the tool.", run_id="mem", client=model, tools=ToolRegistry(list(mcp)),
                           store=f"{folder}/runs", workspace=folder)  # fmt: skip
    step = next(s for s in read_run("mem", f"{folder}/runs").steps if s.step_id.startswith("tool:"))
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"status": result.status, "peak_mb": peak_kb / 1024, "recorded_chars": len(step.result["content"])}))


def measure(tool: str, size: int, url: str = "") -> dict[str, float]:
    with tempfile.TemporaryDirectory() as folder:
        out = subprocess.run(
            [sys.executable, __file__, "--child", tool, str(size), folder, url],
            capture_output=True, text=True, check=True, cwd=REPO,
        )  # fmt: skip
    data: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return data


def over_http(size: int) -> dict[str, float]:
    """The HTTP case, with the ledger server listening on a free loopback port meanwhile."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as folder:
        server = subprocess.Popen([sys.executable, str(LEDGER), folder, "--http", str(port)], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)  # fmt: skip
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
            return measure("big", size, f"http://127.0.0.1:{port}/mcp")
        finally:
            server.terminate()
            server.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=50, help="the result's size in MB (the stderr line is twice it)")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]), args.child[2], args.child[3])
        return
    mb = 1_000_000
    base = measure("big", 1_000)
    cases = {
        f"result {args.size} MB": measure("big", args.size * mb),
        f"stderr {2 * args.size} MB": measure("shout", 2 * args.size * mb),
        f"HTTP {args.size} MB": over_http(args.size * mb),
    }
    print(f"{'case':<16} {'peak RSS':>10} {'x baseline':>11} {'recorded':>12}")
    print(f"{'result 1 KB':<16} {base['peak_mb']:>8.0f}MB {1:>10.2f}x {base['recorded_chars']:>10.0f}ch")
    for name, data in cases.items():
        print(f"{name:<16} {data['peak_mb']:>8.0f}MB {data['peak_mb'] / base['peak_mb']:>10.2f}x {data['recorded_chars']:>10.0f}ch")


if __name__ == "__main__":
    main()
