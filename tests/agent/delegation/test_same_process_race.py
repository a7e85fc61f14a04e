"""Two threads of one process that each found a run free never take it from each other.

The race: a worker's thread reads a child run's summary (nobody holds it: the worker wants
it), then the parent's thread of the same process opens the child to resume it, then the
worker opens it too. Within one process a newer writer supersedes an older one (a notebook
cell run twice), so the worker took the child from under its parent, whose next write of
the child failed with ``LeaseLostError``. Now the worker (and a parent resuming a child)
open inside ``leaving_others()``: the look and the open are one step, and the latecomer gets
``RunLockedError`` and leaves the run to the thread that has it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nb_durable.agent import DemoModel, RunHooks, run_agent
from nb_durable.agent.fleet.worker import ResumeWorker
from nb_durable.agent.models.demo import DEMO_TASK, prepare_demo_workspace
from nb_durable.agent.run.crash import CrashAt
from nb_durable.core.log import EventLog
from nb_durable.core.runs import RunSummary
from nb_durable.core.writing.writer import leaving_others
from nb_durable.errors import RunLockedError, SimulatedCrash


def _crashed_run(tmp_path: Path) -> str:
    work = prepare_demo_workspace(tmp_path / "work")
    store = str(tmp_path / "runs")
    with pytest.raises(SimulatedCrash):
        run_agent(DEMO_TASK, run_id="r", client=DemoModel(latency=0), store=store, workspace=str(work), hooks=RunHooks(before_step=CrashAt(3)))
    return store


def test_a_worker_leaves_a_run_another_thread_of_its_process_opened_just_after_the_worker_looked(tmp_path: Path) -> None:
    store = _crashed_run(tmp_path)
    opened: list[EventLog] = []

    class LookingFirst(ResumeWorker):
        def wants(self, summary: RunSummary, now: float | None = None) -> bool:
            wanted = super().wants(summary, now)
            opened.append(EventLog("r", store))  # the parent's thread opens the run just after the look
            return wanted

    taken = LookingFirst(store=store).take("r")
    assert taken.outcome == "locked", taken
    assert "another thread of this process" in taken.detail
    log = opened[0]
    try:
        assert log._writer.open, "the thread that opened the run first still has it"
        log.record_decision("model:1", "noted", by="test")  # and can still write it
    finally:
        log.close()


def test_a_writer_opened_leaving_others_refuses_instead_of_superseding(tmp_path: Path) -> None:
    store = _crashed_run(tmp_path)
    first = EventLog("r", store)
    try:
        with leaving_others(), pytest.raises(RunLockedError, match="another thread of this process"):
            EventLog("r", store)
        assert first._writer.open
        second: Any = EventLog("r", store)  # outside the block a newer writer supersedes, as a cell run twice does
        assert not first._writer.open
        second.close()
    finally:
        first.close()
