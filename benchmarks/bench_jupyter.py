"""The notebook side, measured in real kernels: what ``%load_ext nb_durable`` costs against a
bare kernel start, and how long a 1,000-step replayed run takes to render its timeline.

    python benchmarks/bench_jupyter.py

Both are measured as wall time seen by a client (jupyter_client) in the same script run:
kernel start to ready; ``%load_ext nb_durable`` to idle; ``%agent_resume RUN`` of a finished
1,000-step run (replay plus the timeline, widget and static HTML) to idle, against the same
kernel running an empty cell. Target for the render: under 1 s.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nb_durable.agent.models.messages import text_message, tool_use_message
from nb_durable.agent.models.scripted import ScriptedModel
from nb_durable.agent.run.loop import run_agent
from tests.jupyter.kernels import Kernel

STEPS = 1000


def make_run(folder: Path) -> str:
    """A finished run of 1,000 steps: 500 model turns, each with one tool call (the last ends)."""
    turns = STEPS // 2
    replies = [tool_use_message([("list_dir", {"path": "."}, f"toolu_{i:04d}")], text=f"Turn {i}: looking again.") for i in range(turns - 1)]
    replies.append(text_message("Looked 499 times; nothing changed."))
    result = run_agent(
        "Look at the folder, many times.",
        run_id="thousand",
        client=ScriptedModel(replies),
        model="claude-test-1",
        store=str(folder / "runs"),
        workspace=folder,
        max_turns=turns + 1,
    )
    assert result.live_steps == STEPS - 1, result
    return "thousand"


def timed(kernel: Kernel, code: str) -> float:
    started = time.perf_counter()
    run = kernel.run(code, timeout=120)
    elapsed = time.perf_counter() - started
    if run.status != "ok":
        raise RuntimeError(f"{code!r} failed: {run.text()[-2000:]}")
    return elapsed


def main() -> int:
    folder = Path(tempfile.mkdtemp(prefix="nb-durable-bench-jupyter-"))
    run_id = make_run(folder)
    starts, loads, empties, renders = [], [], [], []
    for _ in range(3):
        started = time.perf_counter()
        kernel = Kernel(folder, NB_DURABLE_DEMO_LATENCY="0")
        starts.append(time.perf_counter() - started)
        try:
            empties.append(timed(kernel, "pass"))
            loads.append(timed(kernel, "%load_ext nb_durable"))
            renders.append(timed(kernel, f"%agent_resume {run_id}"))
            empties.append(timed(kernel, "pass"))
        finally:
            kernel.close()
    start, load, empty, render = (statistics.median(x) for x in (starts, loads, empties, renders))
    print(f"nb_durable in real kernels (median of 3; {os.cpu_count()} cores)\n")
    print(f"{'bare kernel start (to ready)':<48} {start * 1000:8.0f} ms")
    print(f"{'%load_ext nb_durable':<48} {load * 1000:8.0f} ms   ({load / start:.1%} of a kernel start)")
    print(f"{'an empty cell (round trip)':<48} {empty * 1000:8.0f} ms")
    print(f"{'%agent_resume of a finished 1,000-step run':<48} {render * 1000:8.0f} ms   (first use: imports the agent and ipywidgets)")
    ok = render < 1.0
    print(f"\n[{'ok' if ok else 'MISSED'}] 1,000-step replayed timeline renders in under 1 s ({render:.2f} s)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
