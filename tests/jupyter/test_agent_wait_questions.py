"""%agent_wait on a run that asks a question gives the kernel back: a click cannot reach a busy kernel."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.jupyter.kernels import Kernel

GATED = """%%agent --run gated --background --workspace project -o run
The tests in this project fail. Find out why, fix the code (not the tests), and show that the tests pass."""


@pytest.mark.kernel
def test_agent_wait_stops_waiting_when_the_run_waits_for_an_answer_and_waits_again_after_it(tmp_path: Path) -> None:
    kernel = Kernel(tmp_path, NB_DURABLE_DEMO_LATENCY="0")
    try:
        setup = "%load_ext nb_durable\nfrom nb_durable.agent import prepare_demo_workspace\nprepare_demo_workspace('project')"
        assert kernel.run(setup).status == "ok"
        assert kernel.run('%config AgentMagics.approve_bash = "unittest"').status == "ok"
        assert kernel.run(GATED).status == "ok"
        waited = kernel.run("%agent_wait gated", timeout=30)
        assert waited.status == "error", "the wait ended with the run still asking"
        said = waited.text()
        assert "run gated waits for an answer" in said and "python3 -m unittest -v" in said
        assert "Approve" in said and "%agent_wait gated" in said
        status = kernel.run("print(run.status, len(run.pending))")
        assert status.text().strip() == "waiting 1", "the run still waits; nothing was decided for the person"
        # Answered (as the Approve button does), the next wait goes on until the next question.
        assert kernel.run("run.pending[0].approve(note='fine')").status == "ok"
        assert "run gated waits for an answer" in kernel.run("%agent_wait gated", timeout=30).text()
        assert kernel.run("run.pending[0].approve(note='fine')").status == "ok"
        assert kernel.run("%agent_wait gated", timeout=30).status == "ok"
        assert kernel.run("print(run.status)").text().strip() == "completed"
    finally:
        kernel.close()
