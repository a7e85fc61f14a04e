"""A crash switch aimed inside a child (``--crash-at K.N``): the tree stops as a killed process
would, in step N of the run's K-th child, and a resume finishes the tree with every step of
every run recorded once, and the resume billing only what the tree paid in it. Bad crash
points are refused with the form they must take."""

from __future__ import annotations

import argparse
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from nb_durable.agent import DemoModel, Observer, RunHooks, RunView, resume_agent, run_agent
from nb_durable.agent.models.demo import DEMO_TASK, prepare_demo_workspace
from nb_durable.agent.money.cost import Usage
from nb_durable.agent.run.crash import CrashPoint, crash_point
from nb_durable.core.events import RunFinished, StepCompleted, StepStarted
from nb_durable.core.runs import read_run
from nb_durable.core.stores import open_store
from nb_durable.core.whole_runs.children import child_ids
from nb_durable.errors import SimulatedCrash


def completions(store: str, run_id: str) -> Counter[str]:
    return Counter(e.step for e in read_run(run_id, store).events if isinstance(e, StepCompleted))


def test_a_crash_in_step_n_of_the_second_child_and_the_resume_that_finishes_the_tree(tmp_path: Path) -> None:
    work = prepare_demo_workspace(tmp_path / "work")
    store = str(tmp_path / "runs")
    common: dict[str, Any] = {"client": DemoModel(latency=0), "store": store}
    with pytest.raises(SimulatedCrash, match=r"at step 3 of child run demo\.delegate-0-1-"):
        run_agent(
            DEMO_TASK, run_id="demo", workspace=str(work), delegate=True, hooks=RunHooks(child_crash=CrashPoint.parse("2.3")), **common
        )
    with open_store(store) as opened:
        first, second = child_ids(opened, "demo")
    crashed = read_run(second, store)
    assert not [e for e in crashed.events if isinstance(e, RunFinished)], "no run_finished: the child's log looks killed"
    assert crashed.summary.status == "interrupted", "unfinished, and nobody holds it"
    assert len(completions(store, second)) == 2, "its first two steps done, step 3's intent at most"
    assert [e.step for e in crashed.events if isinstance(e, StepStarted)][-1] == crashed.steps[-1].step_id
    assert not [e for e in read_run("demo", store).events if isinstance(e, RunFinished)], "the parent died with it"

    class Header(Observer):
        last: RunView | None = None

        def run_changed(self, run: RunView) -> None:
            self.last = run

    header, began = Header(), time.time()
    done = resume_agent("demo", hooks=RunHooks(observer=header), **common)
    assert done.status == "completed", done.detail
    # The resume's bill is what the tree paid in it: not the first child's earlier session again.
    paid_in_it = sum(
        Usage.of(e.result["message"]).total
        for run_id in ("demo", first, second)
        for e in read_run(run_id, store).events
        if isinstance(e, StepCompleted) and e.step.startswith("model:") and e.ts >= round(began, 3)
    )
    assert header.last is not None and header.last.cost.paid.total == paid_in_it > 0, (header.last, paid_in_it)
    assert done.text.startswith("Done, with two sub-agents.")
    for run_id in ("demo", first, second):
        assert read_run(run_id, store).summary.status == "completed"
        counted = completions(store, run_id)
        assert counted and set(counted.values()) == {1}, f"{run_id}: a step recorded twice: {counted}"
    assert "ordered = sorted(values)" in (work / "calc.py").read_text()


def test_crash_points_and_the_words_for_bad_ones() -> None:
    assert CrashPoint.parse("4") == CrashPoint(4)
    assert CrashPoint.parse("2.3") == CrashPoint(3, (2,)) and str(CrashPoint(3, (2,))) == "2.3"
    assert CrashPoint.parse("1.2.5").below(1) == CrashPoint(5, (2,))
    assert CrashPoint.parse("2.3").below(1) is None and CrashPoint.parse("2.3").here() is None
    for bad in ("0.3", "2.0", "2.", ".3", "a.3", "2..3", "-1.2", "1.5x"):
        with pytest.raises(argparse.ArgumentTypeError) as caught:
            crash_point(bad)
        assert str(caught.value) == (
            f"must be N (the run's step N) or K.N (step N of the run's K-th child run), whole numbers from 1, not {bad!r}"
        )
    with pytest.raises(argparse.ArgumentTypeError, match="must be at least 1, not 0"):
        crash_point("0")


def test_a_crash_in_the_first_child_leaves_a_sibling_waiting_for_the_fan_out_unrun(tmp_path: Path) -> None:
    """The parent's session end stopped the children running, then waited for its pool: a sibling
    still queued behind the fan-out then ran whole, live, after the tree had crashed."""
    work = prepare_demo_workspace(tmp_path / "work")
    store = str(tmp_path / "runs")
    with pytest.raises(SimulatedCrash, match=r"at step 3 of child run demo\.delegate-0-0-"):
        run_agent(
            DEMO_TASK, run_id="demo", workspace=str(work), delegate=True, delegate_fan_out=1, client=DemoModel(latency=0),
            store=store, hooks=RunHooks(child_crash=CrashPoint.parse("1.3")),
        )  # fmt: skip
    with open_store(store) as opened:
        _, second = child_ids(opened, "demo")
    assert not read_run(second, store).steps, "started by its parent's step, never run"
    done = resume_agent("demo", client=DemoModel(latency=0), store=store)
    assert done.status == "completed", done.detail
    assert read_run(second, store).summary.status == "completed"
