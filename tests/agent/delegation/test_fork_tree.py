"""A fork of a parent takes its own copy of each child its kept steps started, and starts its own after.

A fork kept the step that started a child but not the step that took its answer: its resume
looked for a child under an id derived from the fork's (never started) and stopped with
"deleted while its parent ran", so no fork at that point could ever go on. Then a fork went on
with its source's child itself: a child the source left unfinished was resumed by whichever
tree came first, billed to neither the fork's tree nor its budget. Now each child is forked
with the parent, whole, under the fork's own id: a finished one replays its answer and runs
nothing, an unfinished one goes on in the fork's tree, and the source's is left as it was.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from nb_durable import EventLog, fork, run_step
from nb_durable.agent import RunHooks, continue_agent, resume_agent, run_agent
from nb_durable.agent.delegation.tree import descendants, tree_cost
from nb_durable.agent.display.words import in_words_of
from nb_durable.agent.run.crash import CrashPoint
from nb_durable.core.runs import read_run
from nb_durable.core.stores import open_store
from nb_durable.core.stores.base import StoredLog
from nb_durable.core.stores.memory import MemoryStore
from nb_durable.core.whole_runs.children import start_child
from nb_durable.core.whole_runs.retention import delete_run
from nb_durable.errors import RunError, SimulatedCrash
from nb_durable.testing import ScriptedModel, text_message, tool_use_message


def _parent(tmp_path: Path) -> tuple[str, str]:
    store = str(tmp_path / "runs")
    model = ScriptedModel([tool_use_message([("delegate", {"task": "Count the files."})]), text_message("three files"), text_message("done")])
    assert run_agent("Split the work.", client=model, store=store, workspace=str(tmp_path), delegate=True, run_id="p").status == "completed"
    with open_store(store) as opened:
        (child,) = [r for r in opened.run_ids() if r != "p"]
    return store, child


def test_a_fork_between_a_child_s_start_and_its_answer_takes_a_copy_of_that_child_and_its_answer(tmp_path: Path) -> None:
    store, child = _parent(tmp_path)
    assert [s.step_id.split(":")[0] for s in read_run("p", store).steps] == ["model", "delegate", "tool", "model"]
    before = read_run(child, store).summary.steps
    with fork("p", "f", at=2, root=store):  # model:0 and delegate:0:0 kept, the child's answer not
        pass
    (mine,) = descendants(open_store(store), "f")
    assert mine.startswith("f.") and mine != child
    model = ScriptedModel([text_message("done again")])
    result = resume_agent("f", client=model, store=store)
    assert (result.status, result.text) == ("completed", "done again"), result.detail
    answer = next(s.result for s in read_run("f", store).steps if s.step_id.startswith("tool:"))
    assert answer == {"content": "three files", "is_error": False}, "the recorded child's report"
    with open_store(store) as opened:
        assert sorted(opened.run_ids()) == sorted(["p", "f", child, mine]), "no child started for the fork"
    assert read_run(child, store).summary.steps == before == read_run(mine, store).summary.steps, "nothing ran again"
    assert read_run(mine, store).summary.status == "completed" and not read_run(mine, store).summary.figures.get("tokens")


def test_a_fork_goes_on_with_its_own_copy_of_a_child_the_source_left_unfinished(tmp_path: Path) -> None:
    store = str(tmp_path / "runs")
    script = ScriptedModel([tool_use_message([("delegate", {"task": "Count the files."})])])
    with pytest.raises(SimulatedCrash):  # killed as the child's first model call starts
        run_agent("Split the work.", client=script, store=store, workspace=str(tmp_path), delegate=True, run_id="p",
                  hooks=RunHooks(child_crash=CrashPoint.parse("1.1")))  # fmt: skip
    child = read_run("p", store).steps[1].result["child"]
    left = read_run(child, store).summary
    with fork("p", "f", at=2, root=store):
        pass
    with fork("f", "g", at=2, root=store):  # a fork of the fork takes the fork's child, through its map
        pass
    with open_store(store) as opened:
        (mine,), (theirs,) = descendants(opened, "f"), descendants(opened, "g")
        assert descendants(opened, "p") == [child]
    assert mine.startswith("f.") and theirs.startswith("g.")

    result = resume_agent("f", client=ScriptedModel([text_message("four files"), text_message("done in the fork")]), store=store)
    assert (result.status, result.text) == ("completed", "done in the fork"), result.detail
    assert read_run(mine, store).summary.status == "completed"
    assert read_run(child, store).summary == left, "the source's child was left as it was"
    with open_store(store) as opened:
        assert tree_cost(opened, "f").paid.total > 0 and tree_cost(opened, "p").paid.total == 0, "the fork's tree pays for its child"

    done = resume_agent("p", client=ScriptedModel([text_message("three files"), text_message("done")]), store=store)
    assert (done.status, done.text) == ("completed", "done")
    answers = {run: next(s.result["content"] for s in read_run(run, store).steps if s.step_id.startswith("tool:")) for run in ("p", "f")}
    assert answers == {"p": "three files", "f": "four files"}, "each tree's own child answered it"
    assert read_run(theirs, store).summary.status != "completed", "the fork of the fork kept its own copy, unfinished"


def test_a_fork_before_a_child_s_start_starts_a_child_of_its_own(tmp_path: Path) -> None:
    store, _ = _parent(tmp_path)
    with fork("p", "f", at=1, root=store):
        pass
    result = resume_agent("f", client=ScriptedModel([text_message("four files"), text_message("done")]), store=store)
    assert result.status == "completed", result.detail
    with open_store(store) as opened:
        theirs = [r for r in opened.run_ids() if r.startswith("f.")]
    assert len(theirs) == 1 and read_run(theirs[0], store).summary.status == "completed"
    answer = next(s.result for s in read_run("f", store).steps if s.step_id.startswith("tool:"))
    assert answer["content"] == "four files"


def test_a_child_deleted_while_its_parent_was_stopped_is_said_gone_with_the_fork_that_goes_on(tmp_path: Path) -> None:
    """Deleting the child of a stopped parent is allowed; the parent's resume then said the child
    "was deleted while its parent ran", which it was not. It says the child's log is gone, and
    names the fork that goes on without it, which does."""
    store = str(tmp_path / "runs")
    script = ScriptedModel([tool_use_message([("delegate", {"task": "Count the files."})])])
    with pytest.raises(SimulatedCrash):  # stopped as the child's first model call starts
        run_agent("Split the work.", client=script, store=store, workspace=str(tmp_path), delegate=True, run_id="p",
                  hooks=RunHooks(child_crash=CrashPoint.parse("1.1")))  # fmt: skip
    start = next(s for s in read_run("p", store).steps if s.step_id.startswith("delegate:"))
    delete_run(start.result["child"], store)
    with pytest.raises(RunError) as gone:
        resume_agent("p", client=ScriptedModel([text_message("unused")]), store=store)
    said = str(gone.value)
    assert "while its parent ran" not in said, said
    assert f"child run {start.result['child']!r} of run 'p' is missing from " in said and "its log is gone" in said, said
    assert f"fork('p', new_id, at={start.position})" in said, said
    assert in_words_of("cli", said).endswith(f"nb-durable fork p NEW --at {start.position}, and resume the fork."), said
    with fork("p", "f", at=start.position, root=store):
        pass
    result = resume_agent("f", client=ScriptedModel([text_message("four files"), text_message("done")]), store=store)
    assert (result.status, result.text) == ("completed", "done"), result.detail


class _CountingStore(MemoryStore):
    """A memory store that counts the reads of each run's whole log."""

    def __init__(self) -> None:
        super().__init__()
        self.loads: Counter[str] = Counter()

    def load(self, run_id: str) -> StoredLog:
        self.loads[run_id] += 1
        return super().load(run_id)


def test_a_fork_reads_each_run_of_the_tree_once() -> None:
    """A fork read each child's log twice: once to see that it is the child of its step, then
    again to copy it. A tree of long children paid for every log two times."""
    store = _CountingStore()
    with EventLog("p", store) as parent:
        run_step(parent, "plan", lambda: "plan")
        start_child(parent, "spawn:1", "p.one", {"task": "one"})
        with EventLog("p.one", store) as one:
            run_step(one, "count", lambda: 1)
            start_child(one, "spawn:1", "p.one.deep", {"task": "deep"})
            with EventLog("p.one.deep", store) as deep:
                run_step(deep, "count", lambda: 2)
        start_child(parent, "spawn:2", "p.two", {"task": "two"})
    store.loads.clear()
    with fork("p", "f", at=3, root=store):
        pass
    assert store.loads == Counter({"p": 1, "p.one": 1, "p.one.deep": 1, "p.two": 1}), store.loads
    copies = descendants(store, "f")
    assert len(copies) == 3 and sorted(copies) == sorted(r for r in store.run_ids() if r.startswith("f.")), copies


def test_a_budgeted_parent_whose_child_was_deleted_stops_where_its_tree_s_spending_is_unknown(tmp_path: Path) -> None:
    """A finished parent whose child was deleted, continued under a token budget: the tree's
    spending was summed without the child (its log gone), so the budget let the tree pay again
    what that child had paid. What the tree spent is unknown now: the run stops, naming the fork."""
    store = str(tmp_path / "runs")
    script = [tool_use_message([("delegate", {"task": "Count the files."})], input_tokens=100, output_tokens=10),
              text_message("three files", input_tokens=5000, output_tokens=10), text_message("done", input_tokens=100, output_tokens=10)]  # fmt: skip
    assert run_agent("Split the work.", client=ScriptedModel(script), store=store, workspace=str(tmp_path), delegate=True,
                     run_id="p", max_tokens=100).status == "completed"  # fmt: skip
    start = next(s for s in read_run("p", store).steps if s.step_id.startswith("delegate:"))
    with open_store(store) as opened:
        assert tree_cost(opened, "p").paid.total == 5010  # the child's: more than the budget leaves
    delete_run(start.result["child"], store)
    with pytest.raises(RunError) as gone:
        continue_agent("p", "Count again.", client=ScriptedModel([text_message("four", input_tokens=100, output_tokens=10)]),
                       store=store, max_run_tokens=5000)  # fmt: skip
    said = str(gone.value)
    assert f"child run {start.result['child']!r} of run 'p' is missing from " in said and "its log is gone" in said, said
    assert "budget" in said and f"fork('p', new_id, at={start.position})" in said, said
    models = [s.step_id for s in read_run("p", store).steps if s.step_id.startswith("model:")]
    assert len(models) == 2, f"nothing was paid: the call was never made ({models})"
