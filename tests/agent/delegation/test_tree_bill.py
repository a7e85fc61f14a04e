"""One truth for what a run with children cost: a parent with a child and a grandchild is billed
the same by every view (the live header, ``show``, ``show --tree``, ``export``, ``%agent_runs`` on any page,
``%agent_show``), each saying its own cost beside its tree's in ``tree_words``' words."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nb_durable.agent import ToolRegistry, builtin_tools
from nb_durable.agent.delegation.tree import cost_of
from nb_durable.agent.display.views import RunView, tree_words, views_of
from nb_durable.agent.run.hooks import Observer, RunHooks
from nb_durable.core.index.cursor import Cursor
from nb_durable.core.log import EventLog, run_step
from nb_durable.core.runs import read_run
from nb_durable.core.status import Status
from nb_durable.core.stores import open_store
from nb_durable.core.whole_runs.fork import fork
from tests.agent.agent_worker import start_or_resume
from tests.agent.delegation import tree_agent
from tests.conftest import STORE_KINDS, make_store_url, nb_durable_cli
from tests.fakes import FunctionScenario, MessagesAPIServer, reply, tool_use

TOP, MIDDLE, BOTTOM = "Plan the work.", "Do the middle part.", "Do the bottom part."


def _scenario(request: Any) -> Any:
    task, turn = tree_agent._task(request), request.turn or 0
    if task in (TOP, MIDDLE) and turn == 0:
        below = MIDDLE if task == TOP else BOTTOM
        return reply(tool_use("delegate", {"task": below}, id=f"toolu_{len(task)}"), usage={"input_tokens": 100, "output_tokens": 5})
    # Each run pays a different amount, so a figure that left one out could not match.
    paid = {TOP: 1000, MIDDLE: 3000, BOTTOM: 20000}[task]
    return reply(f"{task} done", usage={"input_tokens": paid, "output_tokens": 5})


class _Header(Observer):
    last: RunView | None = None

    def run_changed(self, run: RunView) -> None:
        self.last = run


def test_a_parent_child_and_grandchild_are_billed_alike_by_every_view(
    monkeypatch: pytest.MonkeyPatch, workspace: Path, tmp_path: Path
) -> None:
    from nb_durable.jupyter.cells import show_run
    from nb_durable.jupyter.runs_table import runs_table

    header = _Header()
    store = str(tmp_path / "runs")
    with MessagesAPIServer(FunctionScenario(_scenario)) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        result = start_or_resume(
            TOP, "top", store, str(workspace), ToolRegistry(builtin_tools()), delegate=True, delegate_depth=2,
            hooks=RunHooks(observer=header),
        )  # fmt: skip
    assert result.status == "completed", result.detail
    with open_store(store) as opened:
        ids = sorted(opened.run_ids())
        assert len(ids) == 3, ids
        top, middle, bottom = ids
        own = {run_id: cost_of(opened, run_id) for run_id in ids}
    middle_tree = own[middle] + own[bottom]
    top_tree = own[top] + middle_tree
    top_words = tree_words(RunView(top, Status.COMPLETED, cost=top_tree, own=own[top], children=1))
    middle_words = tree_words(RunView(middle, Status.COMPLETED, cost=middle_tree, own=own[middle], children=1))
    assert top_words.endswith(" with 1 child run") and " own · " in top_words
    assert top_words != middle_words and own[bottom].paid_dollars > own[top].paid_dollars > 0

    # The live header: the session's tree, its own beside it.
    assert header.last is not None and tree_words(header.last) == top_words

    # show, and show --tree: the child that has a child of its own bills its tree too.
    shown = nb_durable_cli("show", top, "--tree", "--store", store, cwd=tmp_path, timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert top_words in shown.stdout and f"paid {top_tree.paid.total:,} tokens" in shown.stdout, shown.stdout
    row = next(line for line in shown.stdout.splitlines() if f"└ {middle} " in line)
    assert middle_words in row and f"paid {middle_tree.paid.total:,} tokens" in row, row
    leaf = next(line for line in shown.stdout.splitlines() if f"└ {bottom} " in line)
    assert " own · " not in leaf and f"paid {own[bottom].paid.total:,} tokens" in leaf, leaf

    # export: each run's header in the notebook, a parent's tree billed, its own beside it (the
    # dollars escaped, or a notebook's Markdown reads what lies between two of them as math).
    exported = nb_durable_cli("export", top, "-o", str(tmp_path / "top.ipynb"), "--store", store, cwd=tmp_path, timeout=60)
    assert exported.returncode == 0, exported.stderr
    cells = ["".join(cell["source"]) for cell in json.loads((tmp_path / "top.ipynb").read_text())["cells"]]
    heading = {top: "# Run", middle: "---\n\n# Child run", bottom: "---\n\n# Child run"}  # one heading a run
    heads = {run_id: next(c for c in cells if c.startswith(f"{heading[run_id]} `{run_id}`")) for run_id in ids}
    for run_id, words, tree in ((top, top_words, top_tree), (middle, middle_words, middle_tree)):
        assert words.replace("$", "\\$") in heads[run_id] and f"**tokens:** {tree.paid.input_tokens:,} in" in heads[run_id]
    assert " own · " not in heads[bottom] and f"**tokens:** {own[bottom].paid.input_tokens:,} in" in heads[bottom]

    # %agent_runs: the same figures whole, and on a page that lists the parent alone.
    for table in (runs_table(store), runs_table(store, limit=1), runs_table(store, status=["completed"], limit=1)):
        views = {summary.run_id: view for summary, view in table.rows}
        assert views[top].cost.paid.total == top_tree.paid.total and tree_words(views[top]) == top_words
        assert top_words in table._repr_html_() and top_words in repr(table)
        if middle in views:
            assert tree_words(views[middle]) == middle_words
            assert views[bottom].children == 0 and views[bottom].cost.paid.total == own[bottom].paid.total

    # %agent_show: the parent's header and its child's nested one.
    static = show_run(top, store)
    assert top_words in static.text and top_words in static.html
    assert middle_words in static.html

    # A view of one run alone still bills what its own log records.
    with open_store(store) as opened:
        assert views_of(read_run(top, opened))[0].cost.paid.total == own[top].paid.total


def test_a_page_finds_its_parents_unlisted_tree_level_by_level_never_by_every_run_id(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``%agent_runs`` found a listed parent's unlisted children by reading every run id of the
    store (10.6 ms at 10,000 SQLite runs, a page being 2.5): it asks the index for the children
    of the runs it knows, a level at a time, and bills the same tree."""
    from nb_durable.core.stores.sqlite import SqliteStore
    from nb_durable.core.whole_runs.children import child_id, start_child
    from nb_durable.jupyter.runs_table import runs_table

    store = f"sqlite:///{tmp_path / 'runs.db'}"

    def paid(log: EventLog, tokens: int, step: str = "model:0") -> None:
        run_step(log, step, lambda: {"message": {"usage": {"input_tokens": tokens, "output_tokens": 0}}}, effect="idempotent")

    with EventLog("x", store) as log:  # a run of its own: neither listed on the page nor in the tree
        paid(log, 7)
    child, grandchild = child_id("p", "spawn"), child_id(child_id("p", "spawn"), "spawn")
    with EventLog("p", store) as parent_log:
        parent_log.start_run({"task": "top"})
        start_child(parent_log, "spawn", child, {"task": "middle"})
        with EventLog(child, store) as child_log:
            start_child(child_log, "spawn", grandchild, {"task": "bottom"})
            with EventLog(grandchild, store) as log:
                paid(log, 300)
            paid(child_log, 20)
        with fork("p", "q", at=0, root=store):  # names p as its parent, but is no child of it
            pass
        paid(parent_log, 1, "model:1")  # the parent updated last: the first page's one run

    def refuse(self: SqliteStore) -> list[str]:
        raise AssertionError("a page read every run id of the store")

    asked: list[object] = []
    list_rows = SqliteStore.list_rows

    def counted(self: SqliteStore, wanted: Any, held: Any) -> Any:
        asked.append(wanted.parent)
        return list_rows(self, wanted, held)

    monkeypatch.setattr(SqliteStore, "run_ids", refuse)
    monkeypatch.setattr(SqliteStore, "list_rows", counted)
    table = runs_table(store, limit=1)
    assert [summary.run_id for summary, _ in table.rows] == ["p"]
    view = table.rows[0][1]
    assert view.cost.paid.total == 1 + 20 + 300 and view.own is not None and view.own.paid.total == 1
    assert view.children == 1
    # The page, then one query a level: p's children, its child's, and none below the grandchild.
    assert asked == [None, ("p",), (child,), (grandchild,)]


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_a_page_places_and_bills_children_from_the_index_and_a_fork_named_like_a_child_is_none(
    kind: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``%agent_runs`` and ``nb-durable runs`` read each dotted run's log to find its parent (a
    page of children, a log read each), and the walk for unlisted children took any run whose id
    is its index parent's and a dot for a child: a fork named ``p.v2`` of ``p`` was billed into
    ``p``'s tree. Both read the index's word now (``child_of``), and no log, on every store; the
    tree they draw is the one each log's own word gives (``children.parent_of``, the rule the
    listings read logs by before)."""
    from nb_durable.agent.delegation.tree import tree_order
    from nb_durable.cli.tree_commands import runs_in_tree_order
    from nb_durable.core.runs import list_runs, list_runs_from_logs
    from nb_durable.core.whole_runs.children import child_id, parent_of, start_child
    from nb_durable.jupyter.runs_table import runs_table

    store = make_store_url(kind, tmp_path)

    def paid(log: EventLog, tokens: int, step: str = "model:0") -> None:
        run_step(log, step, lambda: {"message": {"usage": {"input_tokens": tokens, "output_tokens": 0}}}, effect="idempotent")

    first, second = child_id("p", "spawn-a"), child_id("p", "spawn-b")
    grandchild = child_id(first, "spawn")
    with EventLog("p", store) as parent_log:
        parent_log.start_run({"task": "top"})
        paid(parent_log, 1)
        start_child(parent_log, "spawn-a", first, {"task": "first"})
        with EventLog(first, store) as child_log:
            start_child(child_log, "spawn", grandchild, {"task": "below the first"})
            with EventLog(grandchild, store) as log:
                paid(log, 300)
            paid(child_log, 20)
        start_child(parent_log, "spawn-b", second, {"task": "second"})
        with EventLog(second, store) as log:
            paid(log, 4000)
        paid(parent_log, 1, "model:1")
    # A fork names p as its parent and is no child of it; it copies the first child's tree (whose
    # steps p paid for, as it did for the fork's copied ones).
    with fork("p", "p.v2", at=2, root=store) as log:
        paid(log, 1)  # replayed, as is the start of its copy of the first child
        start_child(log, "spawn-a", first, {"task": "first"})
        paid(log, 50000, "model:1")
    with EventLog("named", store) as log:  # a parent setting names p: no child of it either
        log.start_run({"task": "t", "parent": "p"})
        paid(log, 600000)

    with open_store(store) as opened:
        # Before: each dotted run's parent from its own log.
        ids = [s.run_id for s in list_runs_from_logs(opened)]
        before = tree_order(ids, {run_id: parent_of(opened, run_id) if "." in run_id else None for run_id in ids})
        assert {run_id for run_id, depth in before if depth} == {first, second, grandchild, "p.v2.spawn-a", "p.v2.spawn-a.spawn"}
        p_at = [s.run_id for s in list_runs(opened)].index("p")  # a JSONL store's sidecar made, as any earlier listing leaves it

        loads: list[str] = []
        real = type(opened).load

        def load(self: Any, run_id: str) -> Any:
            loads.append(run_id)
            return real(self, run_id)

        monkeypatch.setattr(type(opened), "load", load)
        whole = runs_table(store)
        placed = [(s.run_id, depth) for s, depth in runs_in_tree_order(list_runs(opened))]
        alone = runs_table(store, limit=1, offset=p_at)  # p alone: its children on no page of it, the fork neither
    assert loads == [], f"a listing read logs: {loads}"
    assert placed == before
    assert [(s.run_id, whole.depth.get(s.run_id, 0)) for s, _ in whole.rows] == before
    assert [(s.run_id, view.cost.paid.total, view.children) for s, view in alone.rows] == [("p", 1 + 1 + 20 + 300 + 4000, 2)]
    bills = {s.run_id: (view.cost.paid.total, view.children) for s, view in whole.rows}
    assert bills["p"] == (4322, 2) and bills[first] == (320, 1) and bills["p.v2"] == (50000, 1) and bills["named"] == (600000, 0)


def test_a_child_listed_without_its_parent_says_whose_child_it_is_in_both_listings(tmp_path: Path) -> None:
    """A child whose parent is on the page before (or filtered out) was listed unindented, a
    top-level run to the eye: both listings now say on its line whose child it is, and a fork,
    which names its source as parent, stays a run of its own."""
    from nb_durable.core.runs import list_runs
    from nb_durable.core.whole_runs.children import child_id, start_child
    from nb_durable.jupyter.runs_table import runs_table

    store = f"sqlite:///{tmp_path / 'runs.db'}"
    child = child_id("p", "spawn")
    with EventLog("p", store) as parent_log:
        parent_log.start_run({"task": "top"})
        start_child(parent_log, "spawn", child, {"task": "middle"})
        with EventLog(child, store) as log:
            run_step(log, "s", lambda: 1)
        with fork("p", "q", at=0, root=store):
            pass
        run_step(parent_log, "after", lambda: 2)  # the parent updated last: alone on the first page
    first = list_runs(store, limit=1)
    assert [s.run_id for s in first] == ["p"]

    listed = nb_durable_cli("runs", "--store", store, "--limit", "2", "--after", first[0].cursor, cwd=tmp_path, timeout=60)
    assert listed.returncode == 0, listed.stderr
    # q, the fork of p made after the child's step, is newer: no child of p, so a run of its own.
    assert [line.split("  ")[0] for line in listed.stdout.splitlines()[1:]] == ["q", f"↳ {child} (child of p)"], listed.stdout
    table = runs_table(store, limit=2, after=Cursor.parse(first[0].cursor))
    assert [line.split("  ")[0] for line in repr(table).splitlines()[2:]] == ["q", f"↳ {child} (child of p)"], repr(table)
    assert f"<code>↳ {child} (child of p)</code>" in table._repr_html_()
    whole = repr(runs_table(store))  # under its parent, it is drawn as before
    assert f"\n  └ {child} " in whole and "↳" not in whole, whole
