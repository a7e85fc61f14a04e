"""The offline demo delegates: with ``--delegate`` the demo model splits the fix between a
child that finds and fixes the bug and one that writes a regression test, in one turn. The
same command again, in the demo's own folder where that test now is, replays the tree; a
folder holding anything else is refused as a mistake (exit 2), naming --workspace."""

from __future__ import annotations

import sys
from pathlib import Path

from nb_durable.agent import DemoModel, run_agent
from nb_durable.agent.models.demo import DEMO_TASK, prepare_demo_workspace
from nb_durable.agent.models.demo.delegating import TEST_PATH
from nb_durable.core.runs import read_run
from nb_durable.core.stores import open_store
from nb_durable.core.whole_runs.children import child_ids
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


def test_the_same_delegating_demo_again_in_its_own_folder_replays(tmp_path: Path) -> None:
    # No --workspace: the demo's own folder, which the first run's child wrote a test folder into.
    command = [sys.executable, "-m", "nb_durable.cli", "run", "--demo", "--delegate", "--run", "d", DEMO_TASK]
    runs = [
        forkserver.run(command, cwd=tmp_path, env=subprocess_env(NB_DURABLE_DEMO_LATENCY="0"), capture_output=True,
                       text=True, timeout=120, check=False)
        for _ in range(2)
    ]
    assert [r.returncode for r in runs] == [0, 0], runs[1].stderr
    assert "8 steps replayed, 0 live." in runs[1].stdout
    (tmp_path / "demo-workspace" / "mine.txt").write_text("not the demo's\n")
    refused = forkserver.run(
        [*command[:-3], "--run", "other", DEMO_TASK], cwd=tmp_path, env=subprocess_env(), capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert refused.returncode == 2, refused.stderr  # a mistake in where to work: no run started (not 1, failed)
    assert "holds other files (mine.txt)" in refused.stderr and "--workspace" in refused.stderr


def test_show_tree_says_the_simulation_once_and_no_saving_of_nothing(tmp_path: Path) -> None:
    work = prepare_demo_workspace(tmp_path / "work")
    store = str(tmp_path / "runs")
    run_agent(DEMO_TASK, run_id="demo", client=DemoModel(latency=0), store=store, workspace=str(work), delegate=True)
    shown = forkserver.run(
        [sys.executable, "-m", "nb_durable.cli", "show", "demo", "--tree", "--store", store], cwd=tmp_path,
        env=subprocess_env(COLUMNS="200"), capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    lines = shown.stdout[shown.stdout.index("child runs of demo:") :].splitlines()[1:]
    children = [line for line in lines if line.lstrip().startswith("└")]
    assert len(children) == 2, shown.stdout
    assert lines[-1] == "(the demo model's figures are simulated, not a bill)"
    assert not any("simulated, not a bill" in line or "replay saved" in line for line in children), children
    # Each task cut after a whole word, saying it was cut.
    assert children[0].endswith("Find out why, fix the code…"), children[0]
