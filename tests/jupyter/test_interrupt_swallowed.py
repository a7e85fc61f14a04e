"""The interrupt button stops a run in a kernel at one press, even when Python swallows it.

The button sends the kernel SIGINT; landing while a finalizer runs (httpx or the SDK closing
a connection), its KeyboardInterrupt was "Exception ignored" and the cell went on. Here the
press lands in such a finalizer every time (``tests/agent/test_ctrl_c_swallowed.py`` says how).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from nb_durable import read_run
from tests.agent.test_ctrl_c_swallowed import PRESSED_IN_A_FINALIZER
from tests.jupyter.kernels import Kernel

CELL = PRESSED_IN_A_FINALIZER + '''
import time
from nb_durable import ToolRegistry, run_agent, tool
from nb_durable.testing import ScriptedModel, text_message, tool_use_message


@tool(effect="idempotent")
def tidy() -> str:
    """Tidy the workspace."""
    Cleanup()
    time.sleep(60)  # the press stops the run here, at once
    return "tidied"


model = ScriptedModel([tool_use_message([("tidy", {}, "toolu_tidy")]), text_message("Tidied.")])
run_agent("Tidy up.", client=model, tools=ToolRegistry([tidy]), store="runs", run_id="tidy", workspace=".")
'''


@pytest.mark.kernel
def test_one_press_a_finalizer_swallowed_stops_the_cell(tmp_path: Path) -> None:
    kernel = Kernel(tmp_path)
    try:
        started = time.monotonic()
        done = kernel.run(CELL, timeout=120)
        took = time.monotonic() - started
    finally:
        kernel.close()
    assert done.status == "error" and done.error is not None and done.error["ename"] == "KeyboardInterrupt", done.text()
    assert took < 30, f"the press stopped the 60 s tool at once: {took:.1f} s"
    assert "Exception ignored" not in done.text(), done.text()
    record = read_run("tidy", str(tmp_path / "runs"))
    assert record.summary.status == "interrupted"
    assert [(s.step_id, s.state) for s in record.steps] == [("model:0", "completed"), ("tool:0:0:toolu_tidy", "interrupted")]
