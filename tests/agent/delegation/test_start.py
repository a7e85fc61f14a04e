"""A child's start and its parent's record: both or neither, and never a second child.

On SQLite the pair is one transaction, so a write that fails halfway leaves neither; on JSONL
the child's line goes first, and a parent killed between the two writes adopts the dangling
child when its replay reaches the step, instead of starting another.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from nb_durable.core.log import EventLog
from nb_durable.core.runs import read_run
from nb_durable.core.stores import open_store
from nb_durable.core.whole_runs.children import child_id, child_ids, start_child
from nb_durable.errors import RunError, SimulatedCrash, StoreError

STEP = "delegate:0:0:toolu_x"


def test_a_child_id_is_derived_from_the_parent_and_step_and_always_names_a_run() -> None:
    assert child_id("fix", STEP) == "fix.delegate-0-0-toolu_x" == child_id("fix", STEP)
    long = child_id("r" * 120, STEP)
    assert len(long) <= 128 and long.startswith("r" * 100) and long != child_id("r" * 120, STEP + "y")


def test_on_jsonl_a_parent_killed_between_the_two_writes_adopts_its_child(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = str(tmp_path / "runs")
    child = child_id("fix", STEP)
    with EventLog("fix", store) as parent:
        parent.start_run({"task": "t"})
        writes = parent.writer._write

        def killed(*args: object) -> None:
            raise SimulatedCrash("killed between the child's start and the parent's record")

        monkeypatch.setattr(parent.writer, "_write", killed)
        with pytest.raises(SimulatedCrash):
            start_child(parent, STEP, child, {"task": "child"}, request_hash="h1")
        monkeypatch.setattr(parent.writer, "_write", writes)
    assert [s.step_id for s in read_run("fix", store).steps] == [], "the parent never recorded the step"
    dangling = read_run(child, store)
    assert getattr(dangling.events[0], "parent", None) == {"run_id": "fix", "step": STEP}

    with EventLog("fix", store) as parent:
        assert start_child(parent, STEP, child, {"task": "child"}, request_hash="h1") == {"child": child}
    assert [s.step_id for s in read_run("fix", store).steps] == [STEP]
    assert len(read_run(child, store).events) == 1, "adopted, not started again"
    with open_store(store) as opened:
        assert child_ids(opened, "fix") == [child]

    with EventLog("fix", store) as parent:  # replayed: the child is not touched
        assert start_child(parent, STEP, child, {}, request_hash="h1") == {"child": child}
        assert not parent.replaying


def test_a_run_of_the_child_s_id_that_another_started_is_refused(tmp_path: Path) -> None:
    store = str(tmp_path / "runs")
    child = child_id("fix", STEP)
    with EventLog(child, store) as squatter:
        squatter.start_run({"task": "mine"})
    with EventLog("fix", store) as parent, pytest.raises(RunError, match="is not a child run"):
        start_child(parent, STEP, child, {"task": "child"})


def test_on_sqlite_a_pair_that_fails_halfway_leaves_neither(tmp_path: Path) -> None:
    store = str(tmp_path / "runs.db")
    child = child_id("fix", STEP)
    with EventLog("fix", store) as parent:
        parent.start_run({"task": "t"})
        with EventLog(child, store) as log:
            # A row the writer does not know of makes the child's insert fail inside the transaction.
            with sqlite3.connect(tmp_path / "runs.db") as raw:
                raw.execute("INSERT INTO nb_durable_events (run_id, seq, line) VALUES (?, 0, ?)", (child, b"{}"))
            from nb_durable.core.events import RunStarted, StepCompleted

            fields = {"step": STEP, "hash": None, "result": {"child": child}, "ms": 0.0}
            with pytest.raises(StoreError):
                parent.writer.append_with(StepCompleted, fields, log.writer, RunStarted, {"run_id": child, "settings": {}})
    with sqlite3.connect(tmp_path / "runs.db") as raw:
        rows = raw.execute("SELECT count(*) FROM nb_durable_events WHERE run_id = 'fix'").fetchone()[0]
    assert rows == 1, "the parent's record was rolled back with the child's start"
