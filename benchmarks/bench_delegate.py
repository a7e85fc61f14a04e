"""What a child run costs, and how fast a tree comes back after a SIGKILL.

1. Overhead: the same work (``--work`` turns, each a model call and a ``read_file``) done
   inline by one run, against a parent that delegates it to one child run. Both on a JSONL
   store with full durability; the model answers at once, so what is measured is the log's
   and the loop's work. Printed per step (time, bytes) and as the delegated/inline ratio.
2. Resume: a parent with 8 children (fan-out 8), each child ``--work`` turns whose model
   answers after ``--latency`` s, is SIGKILLed when the children are about halfway. From
   copies of that store: (a) resuming the parent (which resumes its 8 children at once,
   each under its own lease), against (b) resuming the 8 children one by one, then the
   parent. Both to the end; and the same two on the finished tree, replay only.

    python benchmarks/bench_delegate.py                  # ~20 s
    python benchmarks/bench_delegate.py --work 10 --latency 0.05
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from nb_durable.agent.models.messages import text_message, tool_use_message  # noqa: E402
from nb_durable.agent.run.loop import resume_agent, run_agent  # noqa: E402
from nb_durable.agent.tools import ToolRegistry, builtin_tools  # noqa: E402
from nb_durable.core.stores import open_store  # noqa: E402
from nb_durable.core.whole_runs.children import descendants  # noqa: E402

INLINE, PARENT, WORK = "Do the work inline.", "Delegate the work.", "Do the work, child {n}."


class WorkModel:
    """Answers by the conversation: a work task reads a file ``work`` times, a parent delegates."""

    name = "bench"

    def __init__(self, work: int, latency: float = 0.0, children: int = 1) -> None:
        self.work, self.latency, self.children = work, latency, children

    def create(self, request: Mapping[str, Any], on_text: Any = None, on_thinking: Any = None) -> dict[str, Any]:
        messages = request["messages"]
        task = messages[0]["content"]
        turn = sum(1 for m in messages if m["role"] == "assistant")
        time.sleep(self.latency)
        if task == PARENT:
            if turn == 0:
                calls = [("delegate", {"task": WORK.format(n=n)}, f"toolu_d{n}") for n in range(self.children)]
                message = tool_use_message(calls, input_tokens=900, output_tokens=40)
            else:
                message = text_message("All delegated work is done.", input_tokens=1000, output_tokens=10)
        elif turn < self.work:
            message = tool_use_message([("read_file", {"path": "notes.txt"}, f"toolu_r{turn}")], input_tokens=800 + 40 * turn, output_tokens=30)
        else:
            message = text_message("Read it all.", input_tokens=800 + 40 * turn, output_tokens=8)
        return {"message": message}


def _prepare(folder: Path) -> tuple[str, str]:
    (folder / "work").mkdir(parents=True)
    (folder / "work" / "notes.txt").write_text("a line of notes\n" * 20)
    return str(folder / "runs"), str(folder / "work")


def _tree_bytes(store: str) -> tuple[int, int]:
    """(bytes, events) of every log of a store."""
    with open_store(store) as opened:
        datas = [opened.load(r).data for r in opened.run_ids()]
    return sum(len(d) for d in datas), sum(d.count(b"\n") for d in datas)


def _steps(store: str) -> int:
    with open_store(store) as opened:
        return sum(opened.load(r).data.count(b'"kind":"step_completed"') for r in opened.run_ids())


def overhead(work: int, repeats: int) -> dict[str, float]:
    """Inline against delegated: seconds and bytes per step, and the ratios."""
    registry = ToolRegistry(builtin_tools())
    out: dict[str, list[float]] = {"inline_s": [], "delegated_s": []}
    sizes: dict[str, tuple[int, int]] = {}
    for _ in range(repeats):
        for mode in ("inline", "delegated"):
            folder = Path(tempfile.mkdtemp(prefix=f"bench-delegate-{mode}-"))
            store, workspace = _prepare(folder)
            task = INLINE if mode == "inline" else PARENT
            began = time.perf_counter()
            result = run_agent(task, run_id="bench", client=WorkModel(work), model="bench-model", tools=registry,
                               store=store, workspace=workspace, max_turns=work + 2, delegate=mode == "delegated")  # fmt: skip
            out[f"{mode}_s"].append(time.perf_counter() - began)
            assert result.status == "completed", result.detail
            sizes[mode] = (*_tree_bytes(store), _steps(store))  # type: ignore[assignment]
            shutil.rmtree(folder)
    inline_s, delegated_s = sorted(out["inline_s"])[repeats // 2], sorted(out["delegated_s"])[repeats // 2]
    (ib, _ie, isteps), (db, _de, dsteps) = sizes["inline"], sizes["delegated"]  # type: ignore[misc]
    return {
        "inline_steps": isteps, "delegated_steps": dsteps,
        "inline_ms_per_step": 1000 * inline_s / isteps, "delegated_ms_per_step": 1000 * delegated_s / dsteps,
        "inline_bytes_per_step": ib / isteps, "delegated_bytes_per_step": db / dsteps,
        "time_ratio": delegated_s / inline_s, "bytes_ratio": db / ib,
        "extra_ms_per_child": 1000 * (delegated_s - inline_s), "extra_bytes_per_child": db - ib,
    }  # fmt: skip


# --- the tree of 8, killed and resumed ---------------------------------------------------------


def session(store: str, workspace: str, work: int, latency: float, children: int) -> None:
    """One process: start (or resume) the tree's parent."""
    registry = ToolRegistry(builtin_tools())
    model = WorkModel(work, latency, children)
    try:
        result = resume_agent("tree", client=model, tools=registry, store=store)
    except Exception:
        result = run_agent(PARENT, run_id="tree", client=model, model="bench-model", tools=registry, store=store,
                           workspace=workspace, max_turns=work + 2, delegate=True, delegate_fan_out=children)  # fmt: skip
    print(json.dumps({"status": result.status}), flush=True)


def _spawn(store: str, workspace: str, work: int, latency: float, children: int) -> subprocess.Popen[bytes]:
    args = [sys.executable, __file__, "--session", store, workspace, str(work), str(latency), str(children)]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def resume_tree(work: int, latency: float, children: int) -> dict[str, float]:
    """Kill a tree halfway; resume it whole against child by child, to the end and replay only."""
    base = Path(tempfile.mkdtemp(prefix="bench-delegate-tree-"))
    store, workspace = _prepare(base)
    # Halfway: the parent's first turn and starts, and half of each child's work recorded.
    target = 4 + children * (1 + work)  # events; each child turn writes ~2 events
    proc = _spawn(store, workspace, work, latency, children)
    while proc.poll() is None and (not Path(store).exists() or _tree_bytes(store)[1] < target):
        time.sleep(0.005)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    killed_events = _tree_bytes(store)[1]
    registry = ToolRegistry(builtin_tools())
    timings: dict[str, float] = {"events_at_kill": killed_events}
    for mode in ("whole", "one_by_one"):
        folder = base / mode
        shutil.copytree(base / "runs", folder / "runs")
        copy = str(folder / "runs")
        model = WorkModel(work, latency, children)
        began = time.perf_counter()
        if mode == "one_by_one":
            with open_store(copy) as opened:
                kids = descendants(opened, "tree")
            for kid in kids:
                resume_agent(kid, client=model, tools=registry, store=copy)
        result = resume_agent("tree", client=model, tools=registry, store=copy)
        timings[f"{mode}_to_end_s"] = time.perf_counter() - began
        assert result.status == "completed", result.detail
        began = time.perf_counter()  # the finished tree again: replay only
        if mode == "one_by_one":
            for kid in kids:
                resume_agent(kid, client=model, tools=registry, store=copy)
        resume_agent("tree", client=model, tools=registry, store=copy)
        timings[f"{mode}_replay_s"] = time.perf_counter() - began
    timings["to_end_ratio"] = timings["whole_to_end_s"] / timings["one_by_one_to_end_s"]
    timings["replay_ratio"] = timings["whole_replay_s"] / timings["one_by_one_replay_s"]
    shutil.rmtree(base)
    return timings


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=int, default=10, help="turns of work per child (default 10)")
    parser.add_argument("--latency", type=float, default=0.05, help="seconds the model takes in the tree (default 0.05)")
    parser.add_argument("--children", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--session", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.session:
        store, workspace, work, latency, children = args.session
        session(store, workspace, int(work), float(latency), int(children))
        return 0
    cost = overhead(args.work, args.repeats)
    print(f"overhead of a child run ({args.work} turns of work, median of {args.repeats}):")
    print(f"  inline:    {cost['inline_steps']:.0f} steps, {cost['inline_ms_per_step']:.2f} ms and {cost['inline_bytes_per_step']:.0f} bytes per step")
    print(f"  delegated: {cost['delegated_steps']:.0f} steps, {cost['delegated_ms_per_step']:.2f} ms and {cost['delegated_bytes_per_step']:.0f} bytes per step")
    print(f"  ratio delegated/inline: time {cost['time_ratio']:.2f}x, bytes {cost['bytes_ratio']:.2f}x "
          f"(one child adds {cost['extra_ms_per_child']:.1f} ms and {cost['extra_bytes_per_child']:.0f} bytes)")  # fmt: skip
    tree = resume_tree(args.work, args.latency, args.children)
    print(f"resume of 1 parent + {args.children} children killed halfway ({tree['events_at_kill']:.0f} events recorded, "
          f"model latency {args.latency} s):")  # fmt: skip
    print(f"  to the end: whole tree {tree['whole_to_end_s']:.2f} s, one by one {tree['one_by_one_to_end_s']:.2f} s, ratio {tree['to_end_ratio']:.2f}")
    print(f"  replay of the finished tree: whole {tree['whole_replay_s'] * 1000:.0f} ms, one by one "
          f"{tree['one_by_one_replay_s'] * 1000:.0f} ms, ratio {tree['replay_ratio']:.2f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
