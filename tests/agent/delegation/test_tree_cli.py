"""A run's tree from the terminal: ``runs`` nests children, ``show`` bills the tree and lists
it with ``--tree``, ``export`` writes the children too, ``delete``/``prune`` cascade (refused
while a child is being written)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import nbformat
import pytest

from nb_durable.agent.delegation.tree import cost_of
from nb_durable.agent.display.views import views_of
from nb_durable.core.log import EventLog, run_step
from nb_durable.core.runs import read_run
from nb_durable.core.stores import open_store
from nb_durable.core.whole_runs.children import start_child
from tests.agent.delegation import tree_agent
from tests.conftest import nb_durable_cli
from tests.fakes import FunctionScenario, MessagesAPIServer

CHILDREN = ["fix.delegate-0-0-toolu_find", "fix.delegate-0-1-toolu_test"]


@pytest.fixture
def tree(monkeypatch: pytest.MonkeyPatch, workspace: Path, tmp_path: Path) -> Any:
    """A finished tree in a JSONL store: run ``fix`` and its two children."""
    with MessagesAPIServer(FunctionScenario(tree_agent.scenario)) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        store = str(tmp_path / "runs")
        result = tree_agent.session(store, str(workspace), str(tmp_path / "ledger"), "fix")
        assert result.status == "completed"
        yield store


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return nb_durable_cli(*args, cwd=cwd, timeout=60)


def test_runs_lists_children_under_their_parent_and_show_bills_the_whole_tree(tree: str, tmp_path: Path) -> None:
    listed = cli("runs", "--store", tree, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    names = [line.split()[0] if not line.lstrip().startswith("└") else line.split()[1] for line in listed.stdout.splitlines()[1:]]
    assert names == ["fix", *CHILDREN]
    assert all(line.startswith("  └ ") for line in listed.stdout.splitlines()[2:])

    shown = cli("show", "fix", "--tree", "--store", tree, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert " own · $" in shown.stdout and " with 2 child runs" in shown.stdout
    for child in CHILDREN:
        assert f"└ {child}  completed" in shown.stdout
    with open_store(tree) as store:
        own = views_of(read_run("fix", store))[0].cost.paid.total
        whole = own + sum(cost_of(store, c).paid.total for c in CHILDREN)
    assert f"paid {whole:,} tokens" in shown.stdout, shown.stdout


def test_export_writes_the_children_after_the_parent(tree: str, tmp_path: Path) -> None:
    done = cli("export", "fix", "-o", str(tmp_path / "fix.ipynb"), "--store", tree, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "with its 2 child run(s)" in done.stdout
    text = json.dumps(json.loads((tmp_path / "fix.ipynb").read_text()))
    for child, report in zip(CHILDREN, (tree_agent.REPORTS[tree_agent.FIND], tree_agent.REPORTS[tree_agent.TEST]), strict=True):
        assert f"Child run `{child}`" in text and report in text
    # One notebook, read top to bottom: it said what it is once, and each child's heading was
    # two cells (a "Child run" one, then the child's own "Run" one), with that warning between.
    cells = nbformat.read(tmp_path / "fix.ipynb", as_version=4).cells
    said = [c.source for c in cells if c.cell_type == "markdown"]
    assert sum("This notebook is a record of an agent run" in text for text in said) == 1, said
    headings = [line for text in said for line in text.splitlines() if line.startswith("# ")]
    assert headings == ["# Run `fix`", *(f"# Child run `{child}`" for child in CHILDREN)], headings


def test_delete_cascades_to_the_children_and_is_refused_while_one_is_written(tree: str, tmp_path: Path) -> None:
    with EventLog(CHILDREN[1], tree):  # a child being written: nothing of the tree is deleted
        refused = cli("delete", "fix", "--store", tree, cwd=tmp_path)
        assert refused.returncode == 3, refused.stdout + refused.stderr
        assert CHILDREN[1] in refused.stderr
        assert sorted(p.stem for p in Path(tree).glob("*.jsonl")) == ["fix", *CHILDREN]
    deleted = cli("delete", "fix", "--store", tree, cwd=tmp_path)
    assert deleted.returncode == 0, deleted.stderr
    assert list(Path(tree).glob("*.jsonl")) == []


def test_prune_takes_a_parent_with_its_children(tree: str, tmp_path: Path) -> None:
    done = cli("prune", "--older-than", "0s", "--store", tree, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "3 run(s) deleted" in done.stdout, done.stdout
    assert list(Path(tree).glob("*.jsonl")) == []


def test_copy_of_a_parent_takes_its_children_so_the_copy_bills_and_lists_the_whole_tree(tree: str, tmp_path: Path) -> None:
    copied = cli("copy", tree, str(tmp_path / "elsewhere"), "fix", cwd=tmp_path)
    assert copied.returncode == 0, copied.stderr
    assert [line.split()[1] for line in copied.stdout.splitlines()[:-1]] == ["fix", *CHILDREN], copied.stdout
    assert "3 run(s) copied" in copied.stdout
    shown = cli("show", "fix", "--tree", "--store", str(tmp_path / "elsewhere"), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert all(f"└ {child}  completed" in shown.stdout for child in CHILDREN), shown.stdout

    # A child alone is an ordinary run: it goes without its parent.
    alone = cli("copy", tree, str(tmp_path / "third"), CHILDREN[0], cwd=tmp_path)
    assert alone.returncode == 0, alone.stderr
    assert sorted(p.stem for p in (tmp_path / "third").glob("*.jsonl")) == [CHILDREN[0]]


def test_delete_of_a_child_is_refused_while_its_parent_is_written(tree: str, tmp_path: Path) -> None:
    with EventLog("fix", tree):  # a live parent replays or resumes its children: it needs them
        refused = cli("delete", CHILDREN[0], "--store", tree, cwd=tmp_path)
        assert refused.returncode == 3, refused.stdout + refused.stderr
        assert f"run {CHILDREN[0]!r} was not deleted: its parent run 'fix' is being written" in refused.stderr
        assert sorted(p.stem for p in Path(tree).glob("*.jsonl")) == ["fix", *CHILDREN]
    parent = (Path(tree) / "fix.jsonl").read_bytes()
    deleted = cli("delete", CHILDREN[0], "--store", tree, cwd=tmp_path)
    assert deleted.returncode == 0, deleted.stderr
    assert sorted(p.stem for p in Path(tree).glob("*.jsonl")) == ["fix", CHILDREN[1]]
    assert (Path(tree) / "fix.jsonl").read_bytes() == parent, "the parent's lease was held, its log left as it was"


def test_delete_names_every_run_it_took_and_the_parent_whose_bill_lost_them(tmp_path: Path) -> None:
    """``delete`` of a middle run said "deleted run p.spawn" alone: its grandchild went too, and
    its parent's bill shrank ("with 1 child run" became no tree), and nothing said so."""
    from nb_durable.core.whole_runs.retention import delete_run

    store = str(tmp_path / "runs")
    with EventLog("p", store) as top:
        start_child(top, "spawn", "p.spawn", {"task": "middle"})
    with EventLog("p.spawn", store) as middle:
        start_child(middle, "spawn", "p.spawn.spawn", {"task": "bottom"})
    with EventLog("p.spawn.spawn", store) as bottom:
        run_step(bottom, "count", lambda: 3)
    with EventLog("q", store) as alone:
        run_step(alone, "count", lambda: 1)

    deleted = cli("delete", "p.spawn", "--store", store, cwd=tmp_path)
    assert deleted.returncode == 0, deleted.stderr
    assert deleted.stdout.splitlines() == [
        "deleted run p.spawn and the run below it: p.spawn.spawn",
        "run p started it, and now bills its tree without them",
    ]
    assert sorted(p.stem for p in Path(store).glob("*.jsonl")) == ["p", "q"]
    plain = cli("delete", "q", "--store", store, cwd=tmp_path)
    assert plain.stdout.splitlines() == ["deleted run q"], plain.stdout
    assert delete_run("p", store) == ("p",)


def _old_tree(store: str, monkeypatch: pytest.MonkeyPatch, *, child_ran: bool = False) -> None:
    """Parent ``p`` (stopped) and its child ``p.spawn`` (one step done if ``child_ran``), all three days ago."""
    real = time.time
    with monkeypatch.context() as past:
        past.setattr(time, "time", lambda: real() - 3 * 86400)
        with EventLog("p", store) as log:
            run_step(log, "plan", lambda: "plan")
            start_child(log, "spawn", "p.spawn", {"task": "count"})
            log.finish_run("interrupted", error="stopped")
        if child_ran:
            with EventLog("p.spawn", store) as child:
                run_step(child, "count", lambda: 3)


def test_prune_keeps_a_tree_whose_child_ran_lately_though_its_parent_did_not(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A tree's last activity is its newest run's: an old parent whose child was resumed an
    hour ago was pruned with that child, by prune --older-than 1d."""
    store = str(tmp_path / "runs")
    _old_tree(store, monkeypatch)
    with EventLog("p.spawn", store) as log:  # resumed alone, now
        run_step(log, "count", lambda: 3)
        log.finish_run("completed", output=3)
    for flags in (["--dry-run"], []):
        kept = cli("prune", "--older-than", "1d", *flags, "--store", store, cwd=tmp_path)
        assert kept.returncode == 0, kept.stderr
        assert "0 run(s)" in kept.stdout, kept.stdout
    assert sorted(p.stem for p in Path(store).glob("*.jsonl")) == ["p", "p.spawn"]
    gone = cli("prune", "--older-than", "0s", "--store", store, cwd=tmp_path)
    assert "2 run(s) deleted" in gone.stdout, gone.stdout + gone.stderr


def test_prune_dry_run_refuses_a_tree_whose_child_is_being_written_as_prune_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The dry run listed such a tree as to be deleted, then the prune itself refused it: a
    child's lease (a child waiting days on a person) was looked at only by the delete."""
    from nb_durable.core.whole_runs.retention import prune_runs

    store = str(tmp_path / "runs")
    _old_tree(store, monkeypatch, child_ran=True)
    with EventLog("p.spawn", store):  # its writer holds it now, as one waiting on a person does
        looked, pruned = prune_runs("1d", store, dry_run=True), prune_runs("1d", store)
    assert looked.deleted == pruned.deleted == ()
    assert [r for r, _ in looked.refused] == [r for r, _ in pruned.refused] == ["p"]
    assert sorted(p.stem for p in Path(store).glob("*.jsonl")) == ["p", "p.spawn"]


def test_show_tree_lists_each_grandchild_under_its_own_parent(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``show --tree`` listed a level at a time: both children, then both grandchildren, each
    indented as if it were the second child's."""
    from nb_durable.cli.tree_commands import print_tree
    from nb_durable.core.whole_runs.children import child_id

    store = str(tmp_path / "runs")
    with EventLog("top", store) as top:
        top.start_run({"task": "plan"})
        middles = [child_id("top", f"delegate:0:{i}:toolu_{i}") for i in range(2)]
        for i, middle in enumerate(middles):
            start_child(top, f"delegate:0:{i}:toolu_{i}", middle, {"task": f"middle {i}"})
    for middle in middles:
        with EventLog(middle, store) as log:
            start_child(log, "delegate:0:0:toolu_b", child_id(middle, "delegate:0:0:toolu_b"), {"task": "bottom"})
    with open_store(store) as opened:
        print_tree(opened, "top")
    listed = [line.split("└ ")[1].split()[0] for line in capsys.readouterr().out.splitlines()[1:]]
    assert listed == [middles[0], child_id(middles[0], "delegate:0:0:toolu_b"), middles[1], child_id(middles[1], "delegate:0:0:toolu_b")]


def test_children_are_listed_in_the_order_their_parent_started_them() -> None:
    """Sorted as text, the child of turn 10 came before the child of turn 2."""
    from nb_durable.agent.delegation.tree import tree_order

    kids = [f"p.delegate-{turn}-{index}-toolu_x" for turn, index in ((10, 0), (2, 11), (2, 3), (9, 0))]
    listed = tree_order(["p", *kids], {"p": None, **dict.fromkeys(kids, "p")})
    assert [run_id for run_id, _ in listed] == ["p", kids[2], kids[1], kids[3], kids[0]]


def test_show_counts_one_step_as_a_person_reads_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``show`` and ``show --tree`` said "completed, 1 steps" of a run of one step (as the
    notebook's child row did), where the notebook's header said "1 step"."""
    from nb_durable.agent.display.views import RunView
    from nb_durable.cli.tree_commands import print_tree
    from nb_durable.core.status import Status
    from nb_durable.jupyter.child_rows import title_of

    store = str(tmp_path / "runs")
    with EventLog("p", store) as top:
        top.start_run({"task": "top"})  # a whole log: the tree's lines read the store's index, which reads it
        start_child(top, "spawn", "p.spawn", {"task": "bottom"})
    with EventLog("p.spawn", store) as child:
        run_step(child, "count", lambda: 3)
        child.finish_run("completed")
    with open_store(store) as opened:
        print_tree(opened, "p")
    assert "└ p.spawn  completed, 1 step · " in capsys.readouterr().out
    shown = cli("show", "p.spawn", "--store", store, cwd=tmp_path)
    assert shown.stdout.startswith("run p.spawn: completed, 1 step, at "), shown.stdout + shown.stderr
    assert title_of(RunView("c", Status.COMPLETED, steps=1)) == "child run c · completed · 1 step"
    assert title_of(RunView("c", Status.COMPLETED, steps=2)).endswith(" · 2 steps")
