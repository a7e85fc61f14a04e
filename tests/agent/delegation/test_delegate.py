"""Delegation through the real SDK against the loopback API: a parent with two children.

Each child is an ordinary run whose ``run_started`` names its parent and step; only its
report comes back, in ``tool_use`` order; the tree's cost is the sum of its logs; a replay of
the whole tree sends no request and runs no tool.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nb_durable.agent.delegation.tree import child_ids, cost_of, tree_cost
from nb_durable.core.run_index import index_of
from nb_durable.core.runs import read_run
from nb_durable.core.stores import open_store
from tests.agent.agent_worker import ledger_entries
from tests.agent.delegation import tree_agent
from tests.fakes import FunctionScenario, MessagesAPIServer


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Any:
    with MessagesAPIServer(FunctionScenario(tree_agent.scenario)) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        yield server


def _store(kind: str, tmp_path: Path) -> str:
    if kind == "postgres":
        from tests.pg import postgres_url

        return postgres_url()
    return str(tmp_path / "runs.db") if kind == "sqlite" else str(tmp_path / "runs")


STORES = ["jsonl", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.mark.parametrize("kind", STORES)
def test_a_parent_delegates_to_two_children_that_are_runs_of_their_own(api: Any, workspace: Path, tmp_path: Path, kind: str) -> None:
    store = _store(kind, tmp_path)
    ledger = tmp_path / "ledger"
    result = tree_agent.session(store, str(workspace), str(ledger), "fix")
    assert result.status == "completed", result.detail
    assert result.text == f"Done. {tree_agent.REPORTS[tree_agent.FIND]} | {tree_agent.REPORTS[tree_agent.TEST]}"
    with open_store(store) as opened:
        children = child_ids(opened, "fix")
        assert children == ["fix.delegate-0-0-toolu_find", "fix.delegate-0-1-toolu_test"]
        steps = ("delegate:0:0:toolu_find", "delegate:0:1:toolu_test")
        for child, task, step in zip(children, (tree_agent.FIND, tree_agent.TEST), steps, strict=True):
            record = read_run(child, opened)
            assert getattr(record.events[0], "parent", None) == {"run_id": "fix", "step": step}
            assert record.summary.settings["task"] == task
            assert "delegate" not in [t["name"] for t in record.summary.settings["tools"]], "depth 1: no grandchildren"
            assert record.summary.status == "completed"
        index = index_of(opened)
        assert index is not None
        assert [row.parent for row in index.index_rows(children)] == ["fix", "fix"], "the run index knows each child's parent"
        total = tree_cost(opened, "fix")
        assert total.paid.total == sum(cost_of(opened, c).paid.total for c in children) > 0
    assert sorted(e for _, e in ledger_entries(ledger)) == ["found the bug", "wrote the test"]
    asked = len(api.requests)
    assert asked == 6  # the parent's two turns, each child's two

    again = tree_agent.session(store, str(workspace), str(ledger), "fix")
    assert (again.status, again.text, again.live_steps) == ("completed", result.text, 0)
    assert len(api.requests) == asked, "a replay of the whole tree sends no request"
    assert len(ledger_entries(ledger)) == 2 and len(ledger.with_name("ledger.calls").read_text().splitlines()) == 2


def test_the_header_and_agent_runs_bill_the_whole_tree(api: Any, workspace: Path, tmp_path: Path) -> None:
    from nb_durable.agent.display.views import RunView, views_of
    from nb_durable.agent.run.hooks import Observer, RunHooks
    from nb_durable.jupyter.runs_table import runs_table

    class Header(Observer):
        last: RunView | None = None

        def run_changed(self, run: RunView) -> None:
            self.last = run

    header = Header()
    store = str(tmp_path / "runs")
    result = tree_agent.session(store, str(workspace), str(tmp_path / "ledger"), "fix", hooks=RunHooks(observer=header))
    assert result.status == "completed"
    with open_store(store) as opened:
        own = views_of(read_run("fix", opened))[0].cost.paid.total
        children = sum(cost_of(opened, c).paid.total for c in child_ids(opened, "fix"))
    assert header.last is not None and header.last.cost.paid.total == own + children > own

    table = runs_table(store)
    assert [s.run_id for s, _ in table.rows] == ["fix", "fix.delegate-0-0-toolu_find", "fix.delegate-0-1-toolu_test"]
    assert table.rows[0][1].cost.paid.total == own + children
    text = repr(table)
    assert "  └ fix.delegate-0-0-toolu_find" in text and "└ fix.delegate-0-0-toolu_find" in table._repr_html_()
