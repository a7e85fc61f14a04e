"""The walks up and down a run tree (``prune``, ``delete``, ``show --tree``, a worker's choice)
place each run by its index row (``children.parents``), reading no log of a run they only place,
and give the answer the logs give: each is run once from the index and once, on a twin store,
with the index hidden from the walk, so every run is placed by its own log as before. A fork
named like a child and a run whose ``parent`` setting names the parent are never its children,
so never pruned or deleted with it; a row an older nb_durable wrote is not believed."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from nb_durable.agent.fleet.worker import ResumeWorker
from nb_durable.cli.tree_commands import print_tree
from nb_durable.core.index.figures import figures
from nb_durable.core.index.rows import index_of
from nb_durable.core.log import EventLog, run_step
from nb_durable.core.stores import Store, open_store
from nb_durable.core.whole_runs import children as children_module
from nb_durable.core.whole_runs.children import child_id, descendants, start_child
from nb_durable.core.whole_runs.fork import fork
from nb_durable.core.whole_runs.retention import delete_run, prune_runs
from tests.conftest import STORE_KINDS, make_store_url

FIRST, SECOND = child_id("p", "spawn-a"), child_id("p", "spawn-b")
GRANDCHILD = child_id(FIRST, "spawn")
TREE = {"p", FIRST, SECOND, GRANDCHILD}
FORKED = {"p.v2", child_id("p.v2", "spawn-a"), child_id(child_id("p.v2", "spawn-a"), "spawn")}
"""The fork of p named like a child of it, and its own copies of p's first child and grandchild."""


def _build(kind: str, where: Path) -> tuple[str, float]:
    """A parent p stopped by a person, with two children (whose writers died) and a grandchild;
    a fork of p named p.v2 copying the first child's tree; a run whose parent setting names p.
    Also when p's tree was last written, before the others were."""
    where.mkdir()
    store = make_store_url(kind, where)
    task = {"task": "t", "model_kind": "anthropic"}
    with EventLog("p", store) as parent:
        parent.start_run({**task, "task": "top"})
        run_step(parent, "model:0", lambda: 1)
        start_child(parent, "spawn-a", FIRST, {**task, "task": "first"})
        with EventLog(FIRST, store) as log:
            start_child(log, "spawn", GRANDCHILD, {**task, "task": "below the first"})
            with EventLog(GRANDCHILD, store) as below:
                run_step(below, "model:0", lambda: 2)
            run_step(log, "model:1", lambda: 3)
        start_child(parent, "spawn-b", SECOND, {**task, "task": "second"})
        with EventLog(SECOND, store) as log:
            run_step(log, "model:0", lambda: 4)
        parent.finish_run("interrupted", error="interrupted by the user")
    time.sleep(0.05)
    tree_done = time.time()
    time.sleep(0.05)
    with fork("p", "p.v2", at=2, root=store) as log:  # at its first child's start: copies that tree
        run_step(log, "model:0", lambda: 1)
        start_child(log, "spawn-a", FIRST, {**task, "task": "first"})
    with EventLog("named", store) as log:
        log.start_run({**task, "parent": "p"})
    return store, tree_done


@contextmanager
def _loads(store: str, listings: list[int] | None = None) -> Iterator[list[str]]:
    """The runs whose logs are read meanwhile, in order (and each listing of every run id, in ``listings``)."""
    seen: list[str] = []
    with open_store(store) as opened:
        kind = type(opened)
    real, run_ids = kind.load, kind.run_ids

    def load(self: Store, run_id: str) -> Any:
        seen.append(run_id)
        return real(self, run_id)

    def listed(self: Store) -> list[str]:
        if listings is not None:
            listings.append(len(seen))
        return run_ids(self)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(kind, "load", load)
        patch.setattr(kind, "run_ids", listed)
        yield seen


@contextmanager
def _by_logs() -> Iterator[None]:
    """Each run placed by its own log, as before the walks read the index."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(children_module, "index_of", lambda store: None)
        patch.setattr("nb_durable.core.runs.index_of", lambda store: None)
        yield


def _walks(store: str, tree_done: float, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """What each walk answers, and which logs it read, on a store ``_build`` made."""
    out: dict[str, Any] = {}
    listings: list[int] = []
    with _loads(store, listings) as read:
        with open_store(store) as opened:
            out["below p"] = descendants(opened, "p")
        out["below p reads"] = list(read)
        out["prune --dry-run"] = prune_runs(0, store, dry_run=True, now=tree_done + 3600)
        out["prune --dry-run reads"] = list(read[len(out["below p reads"]) :])
        read.clear()
        listings.clear()
        with open_store(store) as opened:
            print_tree(opened, "p")
        out["show --tree"] = capsys.readouterr().out
        out["show --tree reads"] = set(read)
        out["show --tree reads run ids"] = len(listings)
        read.clear()
        out["worker takes"] = sorted(ResumeWorker(store).candidates())
        out["worker reads"] = list(read)
        read.clear()
        out["delete p.spawn-a.spawn"] = delete_run(GRANDCHILD, store)
        out["delete reads"] = list(read)
        read.clear()
        out["prune"] = prune_runs(0, store, now=tree_done)
        out["prune reads"] = set(read)
    with open_store(store) as opened:
        out["left"] = set(opened.run_ids())
    return out


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_the_walks_of_a_tree_place_runs_by_the_index_and_answer_as_the_logs_do(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    indexed = _walks(*_build(kind, tmp_path / "indexed"), capsys)
    twin, tree_done = _build(kind, tmp_path / "logs")
    with _by_logs():
        by_logs = _walks(twin, tree_done, capsys)
    reads = {name for name in indexed if "reads" in name}
    assert {k: v for k, v in indexed.items() if k not in reads} == {k: v for k, v in by_logs.items() if k not in reads}

    assert indexed["below p"] == [FIRST, SECOND, GRANDCHILD]
    # Everything old: each tree goes whole, the fork's with it, and the named run alone.
    assert set(indexed["prune --dry-run"].deleted) == TREE | FORKED | {"named"}
    lines = indexed["show --tree"].splitlines()
    assert [line.split(" ", 2)[:2] for line in (ln.strip() for ln in lines[1:])] == [["└", r] for r in (FIRST, GRANDCHILD, SECOND)], lines
    assert lines[2].startswith(f"    └ {GRANDCHILD} ") and lines[3].startswith(f"  └ {SECOND} "), lines
    # p was stopped by a person: its children wait for that person; its grandchild (whose parent's
    # writer died) and the fork's copies do not.
    assert indexed["worker takes"] == sorted(FORKED | {"named", GRANDCHILD})
    # Only p's tree is older than tree_done: the fork and the named run are kept.
    assert indexed["delete p.spawn-a.spawn"] == (GRANDCHILD,)
    assert indexed["prune"].deleted == ("p", FIRST, SECOND)
    assert indexed["left"] == FORKED | {"named"}

    # No log of a run only placed is read: the walks read none at all, a delete only its runs'.
    assert indexed["below p reads"] == indexed["prune --dry-run reads"] == indexed["worker reads"] == []
    assert indexed["show --tree reads"] <= {FIRST, SECOND, GRANDCHILD}, indexed["show --tree reads"]
    assert indexed["show --tree reads run ids"] <= 1  # once at most, not again for each child's tree
    assert indexed["delete reads"] == [GRANDCHILD]
    assert indexed["prune reads"] <= {"p", FIRST, SECOND}, indexed["prune reads"]
    # As they were: each dotted run's log read to place it, a parent's to say it is there.
    assert {FIRST, SECOND, "p.v2"} <= set(by_logs["prune --dry-run reads"])
    assert FIRST in by_logs["delete reads"]


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_a_row_an_older_nb_durable_wrote_is_not_believed_by_the_walks(kind: str, tmp_path: Path) -> None:
    """A row of rule 3 said nothing of children (``child`` False), and one edited by hand may say
    anything: rows of another rule are never believed, so a fork whose old row calls it p's
    child is not deleted with p, and a child whose old row says nothing still goes with it."""
    store, tree_done = _build(kind, tmp_path / "store")
    with open_store(store) as opened:
        indexed = index_of(opened)
        assert indexed is not None
        old = {row.run_id: row for row in indexed.index_rows([FIRST, "p.v2"])}
        stale = {FIRST: replace(old[FIRST], child=False), "p.v2": replace(old["p.v2"], parent="p", child=True)}
        for run_id, row in stale.items():
            writer = opened.open_writer(run_id)
            try:
                writer.put_index(replace(row, rule=f"3.{figures().rule}"))
            finally:
                writer.close()
    with _loads(store) as read:
        with open_store(store) as opened:
            assert descendants(opened, "p") == [FIRST, SECOND, GRANDCHILD]
        # The old rows' runs, placed by their logs (JSONL's writers leave its sidecar to readers,
        # which make it from the logs: no old row is kept there).
        assert sorted(read) == (sorted(stale) if getattr(opened, "index_written", True) else [])
        report = prune_runs(0, store, now=tree_done)
    assert report.deleted == ("p", FIRST, SECOND, GRANDCHILD)
    with open_store(store) as opened:
        assert set(opened.run_ids()) == FORKED | {"named"}


@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
def test_a_parent_whose_id_is_too_long_for_its_children_to_keep_still_has_them_walked(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A child's id keeps only the first 114 characters of a longer parent's (``child_id``), so
    it no longer starts with the parent's id and a dot: the listings placed such a child under
    its parent, but ``show --tree``, ``delete`` and ``prune`` looked for that prefix, found no
    child, and left the children behind when the parent went."""
    long_id = "nightly-" + "x" * 116  # 124 characters: with ".spawn", past the 128 a run id may have
    child = child_id(long_id, "spawn")
    grandchild = child_id(child, "spawn")
    assert not child.startswith(long_id + "."), "the case at hand: the child's id keeps part of the parent's"
    sibling = long_id[:114] + "-other"  # shares the prefix, but no parent record names the long run
    (tmp_path / "store").mkdir()
    store = make_store_url(kind, tmp_path / "store")
    task = {"task": "t", "model_kind": "anthropic"}
    with EventLog(long_id, store) as parent:
        parent.start_run(task)
        start_child(parent, "spawn", child, task)
        with EventLog(child, store) as log:
            start_child(log, "spawn", grandchild, task)
            with EventLog(grandchild, store) as below:
                run_step(below, "model:0", lambda: 1)
        parent.finish_run("completed")
    with EventLog(sibling, store) as log:
        log.start_run(task)
    with open_store(store) as opened:
        assert descendants(opened, long_id) == [child, grandchild]
        assert descendants(opened, sibling) == []
        print_tree(opened, long_id)
    shown = capsys.readouterr().out
    assert child in shown and grandchild in shown, shown
    assert delete_run(long_id, store) == (long_id, child, grandchild)
    with open_store(store) as opened:
        assert set(opened.run_ids()) == {sibling}, "the children went with their parent, the look-alike stayed"
