"""The offline demo delegates: with ``--delegate`` the demo model splits the fix between a
child that finds and fixes the bug and one that writes a regression test, in one turn."""

from __future__ import annotations

import sys
from pathlib import Path

from nb_durable.agent import DemoModel, run_agent
from nb_durable.agent.models.demo import DEMO_TASK, prepare_demo_workspace
from nb_durable.agent.models.demo.delegating import TEST_PATH
from nb_durable.core.children import child_ids
from nb_durable.core.runs import read_run
from nb_durable.core.stores import open_store
from tests import forkserver
from tests.conftest import subprocess_env


def test_the_demo_model_splits_the_fix_between_two_children(tmp_path: Path) -> None:
    work = prepare_demo_workspace(tmp_path / "work")
    store = str(tmp_path / "runs")
    result = run_agent(DEMO_TASK, run_id="demo", client=DemoModel(latency=0), store=store, workspace=str(work), delegate=True)
    assert result.status == "completed", result.detail
    assert result.text.startswith("Done, with two sub-agents. The regression test passes (2 ran: OK).")
    assert "ordered = sorted(values)" in (work / "calc.py").read_text()
    assert (work / TEST_PATH).exists()
    with open_store(store) as opened:
        children = child_ids(opened, "demo")
        assert len(children) == 2
        assert [read_run(c, opened).summary.status for c in children] == ["completed", "completed"]
    again = run_agent(DEMO_TASK, run_id="demo", client=DemoModel(latency=0), store=store, workspace=str(work), delegate=True)
    assert (again.status, again.text, again.live_steps) == ("completed", result.text, 0)


def test_nb_durable_run_demo_delegate_from_a_terminal(tmp_path: Path) -> None:
    prepare_demo_workspace(tmp_path / "work")
    done = forkserver.run(
        [sys.executable, "-m", "nb_durable.cli", "run", "--demo", "--delegate", "--workspace", "work", "--run", "t", DEMO_TASK],
        cwd=tmp_path, env=subprocess_env(NB_DURABLE_DEMO_LATENCY="0"), capture_output=True, text=True, timeout=120,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("live      child run of tool call") == 2 and "Done, with two sub-agents." in done.stdout
    listed = forkserver.run(
        [sys.executable, "-m", "nb_durable.cli", "runs"], cwd=tmp_path, env=subprocess_env(), capture_output=True,
        text=True, timeout=60, check=False,
    )  # fmt: skip
    assert listed.stdout.count("  └ t.delegate-0-") == 2, listed.stdout
