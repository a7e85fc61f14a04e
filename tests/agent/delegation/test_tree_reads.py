"""``nb-durable show RUN --tree`` reads each log below the run at most once: the tree's lines
(status, steps, task and the bill of each run's own tree) come from the run index, and only
the header's bill reads the logs below. Counted on a real SQLite store whose ``load`` (the one
way to read a run's log) counts the runs it reads, for a parent, two children and a grandchild;
the lines agree with what the logs say."""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import nb_durable.agent  # noqa: F401  (registers the index's figures: tokens and dollars)
from nb_durable.agent.delegation.tree import with_children
from nb_durable.agent.display.progress import cost_line
from nb_durable.agent.display.views import views_of
from nb_durable.cli.inspecting import _show
from nb_durable.cli.tree_commands import print_tree
from nb_durable.core.log import EventLog, run_step
from nb_durable.core.runs import read_run
from nb_durable.core.stores.base import StoredLog
from nb_durable.core.stores.sqlite import SqliteStore
from nb_durable.core.whole_runs.children import child_id, start_child

FIRST, SECOND = child_id("p", "spawn-a"), child_id("p", "spawn-b")
GRANDCHILD = child_id(FIRST, "spawn")
BELOW = (FIRST, GRANDCHILD, SECOND)


class CountingStore(SqliteStore):
    """A SQLite store that counts the logs read from it, run by run."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.reads: Counter[str] = Counter()

    def load(self, run_id: str) -> StoredLog:
        self.reads[run_id] += 1
        return super().load(run_id)


def _reply(tokens: int) -> Any:
    """A model step's result as the agent records it: the reply, with its usage."""
    usage = {"input_tokens": tokens, "output_tokens": tokens // 10}
    return lambda: {"message": {"model": "claude-sonnet-5-5", "role": "assistant", "content": [], "usage": usage}}


def _build(store: SqliteStore) -> None:
    """p, its children FIRST and SECOND, and FIRST's child GRANDCHILD, each with a paid model call."""
    task = {"task": "t", "model_kind": "anthropic", "model": "claude-sonnet-5-5"}
    with EventLog("p", store) as parent:
        parent.start_run({**task, "task": "top"})
        run_step(parent, "model:0", _reply(1000))
        start_child(parent, "spawn-a", FIRST, {**task, "task": "first"})
        with EventLog(FIRST, store) as log:
            run_step(log, "model:0", _reply(2000))
            start_child(log, "spawn", GRANDCHILD, {**task, "task": "below the first"})
            with EventLog(GRANDCHILD, store) as below:
                run_step(below, "model:0", _reply(4000))
                below.finish_run("completed", output="done")
            log.finish_run("completed", output="done")
        start_child(parent, "spawn-b", SECOND, {**task, "task": "second"})
        with EventLog(SECOND, store) as log:
            run_step(log, "model:0", _reply(8000))
            log.finish_run("completed", output="done")
        parent.finish_run("completed", output="done")


@pytest.fixture
def store(tmp_path: Path) -> Any:
    opened = CountingStore(tmp_path / "runs.db")
    try:
        _build(opened)
        opened.reads.clear()
        yield opened
    finally:
        opened.close()


def test_show_tree_reads_each_log_below_at_most_once(store: CountingStore, capsys: pytest.CaptureFixture[str]) -> None:
    assert _show(argparse.Namespace(run="p", tree=True, store=store.url), store) == 0
    shown = capsys.readouterr().out
    assert all(f"└ {run_id}  completed" in shown for run_id in BELOW), shown
    assert max(store.reads[run_id] for run_id in BELOW) <= 1, dict(store.reads)


def test_the_tree_lines_read_no_log_and_bill_as_the_logs_do(store: CountingStore, capsys: pytest.CaptureFixture[str]) -> None:
    print_tree(store, "p")
    shown = capsys.readouterr().out
    assert not store.reads, dict(store.reads)
    # Each line's bill, as the child's own ``show`` heads it from the logs.
    for run_id in BELOW:
        view, _ = with_children(views_of(read_run(run_id, store))[0], store)
        line = next(line for line in shown.splitlines() if f"└ {run_id} " in line)
        assert cost_line(view.cost, brief=True) in line, (line, cost_line(view.cost, brief=True))
    first = next(line for line in shown.splitlines() if f"└ {FIRST} " in line)
    assert "own · $" in first and "with 1 child run" in first, first
    assert [line.split()[1] for line in shown.splitlines()[1:]] == list(BELOW)
