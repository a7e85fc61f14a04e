"""What a background run's timeline sends to the front end, read off a real kernel's iopub.

A timeline fed from a worker thread must not send more per step as the run grows, or a
browser falls ever further behind a long run (benchmarks/bench_background.py measured 38 s
behind at the end of 1,000 steps): the styles go once, and a new row does not resend the list
of every row before it.
"""

from __future__ import annotations

import json
import queue
import time
from collections.abc import Callable
from typing import Any

from tests.jupyter.kernels import Kernel

LAUNCH = """import contextlib
from nb_durable.agent.run.loop import run_agent
from nb_durable.agent.models.messages import text_message, tool_use_message
from nb_durable.agent.models.scripted import ScriptedModel
from nb_durable.agent.display.views import RunView
from nb_durable.jupyter.background import launch
from nb_durable.jupyter.timeline import Timeline

turns = ({steps} - 2) // 2
replies = [tool_use_message([("list_dir", {{"path": "runs"}}, f"toolu_{{i:04d}}_{{k}}") for k in range(2 if i == 0 else 1)])
           for i in range(turns)] + [text_message("Done.")]
timeline = Timeline(RunView("{run}", "running", task="look", model="claude-test-1"), foreground=False)
go = lambda hooks: run_agent("look", run_id="{run}", client=ScriptedModel(replies), model="claude-test-1", store="runs",
                             workspace=".", max_turns=turns + 2, hooks=hooks)
handle = launch(timeline, go, store="runs", resources=contextlib.ExitStack())
assert handle.wait(120).live_steps == {steps}"""


def comm_traffic(kernel: Kernel, run: str, steps: int) -> list[str]:
    """Run a background run of ``steps`` steps under a timeline; every widget message it sent, as JSON."""
    msg_id = kernel.client.execute(LAUNCH.format(steps=steps, run=run), allow_stdin=False)
    sent: list[str] = []
    deadline, idle = time.monotonic() + 180, False
    while time.monotonic() < deadline:
        try:
            msg = kernel.client.get_iopub_msg(timeout=0.5 if idle else 5)
        except queue.Empty:
            if idle:
                break  # drained what the thread sent
            continue
        if msg["msg_type"] in ("comm_open", "comm_msg"):
            sent.append(json.dumps(msg["content"]))
        elif msg["msg_type"] == "error":
            raise AssertionError("\n".join(msg["content"]["traceback"]))
        elif msg["msg_type"] == "status" and msg["parent_header"].get("msg_id") == msg_id:
            idle = msg["content"]["execution_state"] == "idle"
    assert idle, "the cell never finished"
    return sent


def test_what_a_background_timeline_sends_per_step_does_not_grow_with_the_run(kernels: Callable[[], Kernel]) -> None:
    kernel = kernels()
    short, long = 40, 400
    per_step: dict[int, float] = {}
    for steps in (short, long):
        sent = comm_traffic(kernel, f"wire{steps}", steps)
        styles = [m for m in sent if "<style>" in m]
        assert len(styles) == 1, f"the styles went {len(styles)} times over the wire for a {steps}-step run, not once"
        per_step[steps] = sum(len(m) for m in sent) / steps
    assert per_step[long] < 1.5 * per_step[short], (
        f"{per_step[long]:.0f} bytes a step for {long} steps against {per_step[short]:.0f} for {short}: "
        "each step costs more the longer the run"
    )


CLOSE = """import ipywidgets
from nb_durable.jupyter.row_boxes import RowBoxes, close_tree
rows = RowBoxes(ipywidgets)
rows.append([rows.row(f'<div class="nbd-step">{i}</div>') for i in range(120)])
close_tree(rows.box, keep=rows.shared)"""


def test_a_closed_timeline_empties_every_row_before_it_closes_any(kernels: Callable[[], Kernel]) -> None:
    # The kernel's IOPub socket drops what a lagging reader leaves queued past its high-water mark:
    # emptied and closed row by row, the last rows' emptying came at the tail of the burst, and a
    # saved notebook kept their markup (test_nbclient's long run, twice in CI).
    kernel = kernels()
    seen: list[dict[str, Any]] = []
    feed = kernel.widgets.feed

    def recorded(msg: dict[str, Any]) -> None:
        seen.append(msg)
        feed(msg)

    kernel.widgets.feed = recorded  # type: ignore[method-assign]
    assert kernel.run(CLOSE).status == "ok"
    said = [
        "emptied" if msg["msg_type"] == "comm_msg" and msg["content"]["data"].get("state", {}).get("value") == "" else msg["msg_type"]
        for msg in seen
        if msg["msg_type"] in ("comm_msg", "comm_close")
    ]
    emptied = [n for n, what in enumerate(said) if what == "emptied"]
    assert len(emptied) == 120, said
    assert said.index("comm_close") > emptied[-1], said[: emptied[-1] + 2]
