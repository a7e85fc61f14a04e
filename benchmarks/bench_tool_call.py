"""What a built-in tool call costs the process, with its environment unchanged since the last call and changed before each.

Each tool call gives the tool a copy of the process's environment and masks the secrets found
in it, which means decoding every variable of ``os.environ``. That is done again only when the
environment changed (``agent.secrets.environment``), as it was before every call until
2026-12-07. The baseline, measured in the same process, is the same call with one variable set
anew before each (so every call decodes, as each did before). Each figure is the least of 7
timings of ``--calls`` ``list_dir`` calls through the tool registry, in µs of CPU a call, with
the process's environment padded to ``--variables`` variables.

    python benchmarks/bench_tool_call.py [--variables 40,200] [--calls 500]

Measured 2026-12-07 on the 2-core machine (load ~2: others' tests beside it), this version
and the one before it (which decoded the environment three times a call, whether or not it
changed) alternated twice:

    variables   before: changed / unchanged µs   after: changed / unchanged µs   unchanged, before / after
           41         208-218 / 205-214                 186-196 / 144-147              1.4-1.5x
          198         431-449 / 430-446                 336-350 / 151-157              2.8-2.9x

A resumed run of ``bench_worker.py`` makes 8 such calls (its worker's CPU a run is ~36-41 ms):
about 0.5 ms of it is saved with 41 variables. A notebook's kernel often has a hundred or more.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nb_durable.agent.tools import ToolContext, ToolRegistry
from nb_durable.agent.tools.builtin import builtin_tools


def per_call(folder: Path, calls: int, change: bool) -> float:
    """Least µs of CPU a ``list_dir`` call over 7 timings; ``change``: a variable set anew before each."""
    registry = ToolRegistry(builtin_tools())
    best = float("inf")
    for _ in range(7):
        start = time.thread_time()
        for i in range(calls):
            if change:
                os.environ["BENCH_TOOL_CALL_COUNTER"] = str(i)
            registry.run("list_dir", {"path": "."}, ToolContext.for_step(folder, "r", "s"))
        best = min(best, (time.thread_time() - start) / calls * 1e6)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variables", default="40,200", help="the environment's size (comma separated)")
    parser.add_argument("--calls", type=int, default=500)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for i in range(20):
            (folder / f"file{i}.txt").write_text("x")
        print(f"{'variables':>9}   {'changed µs':>10}   {'unchanged µs':>12}   changed / unchanged")
        for size in (int(v) for v in args.variables.split(",")):
            for i in range(max(0, size - len(os.environ))):
                os.environ[f"BENCH_PADDING_{i}"] = f"value-{i}-" + "x" * 20
            changed, unchanged = per_call(folder, args.calls, True), per_call(folder, args.calls, False)
            print(f"{len(os.environ):>9}   {changed:>10.1f}   {unchanged:>12.1f}   {changed / unchanged:>18.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
