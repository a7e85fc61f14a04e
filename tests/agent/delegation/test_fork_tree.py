"""A fork of a parent goes on with the children its kept steps started, and starts its own after.

A fork kept the step that started a child but not the step that took its answer: its resume
looked for a child under an id derived from the fork's (never started) and stopped with
"deleted while its parent ran", so no fork at that point could ever go on. The child is the
one the step recorded: its answer comes back, and it runs nothing again.
"""

from __future__ import annotations

from pathlib import Path

from nb_durable import fork
from nb_durable.agent import resume_agent, run_agent
from nb_durable.core.runs import read_run
from nb_durable.core.stores import open_store
from nb_durable.testing import ScriptedModel, text_message, tool_use_message


def _parent(tmp_path: Path) -> tuple[str, str]:
    store = str(tmp_path / "runs")
    model = ScriptedModel([tool_use_message([("delegate", {"task": "Count the files."})]), text_message("three files"), text_message("done")])
    assert run_agent("Split the work.", client=model, store=store, workspace=str(tmp_path), delegate=True, run_id="p").status == "completed"
    with open_store(store) as opened:
        (child,) = [r for r in opened.run_ids() if r != "p"]
    return store, child


def test_a_fork_between_a_child_s_start_and_its_answer_takes_that_child_s_answer(tmp_path: Path) -> None:
    store, child = _parent(tmp_path)
    assert [s.step_id.split(":")[0] for s in read_run("p", store).steps] == ["model", "delegate", "tool", "model"]
    before = read_run(child, store).summary.steps
    with fork("p", "f", at=2, root=store):  # model:0 and delegate:0:0 kept, the child's answer not
        pass
    model = ScriptedModel([text_message("done again")])
    result = resume_agent("f", client=model, store=store)
    assert (result.status, result.text) == ("completed", "done again"), result.detail
    answer = next(s.result for s in read_run("f", store).steps if s.step_id.startswith("tool:"))
    assert answer == {"content": "three files", "is_error": False}, "the recorded child's report"
    with open_store(store) as opened:
        assert sorted(opened.run_ids()) == sorted(["p", "f", child]), "no child started for the fork"
    assert read_run(child, store).summary.steps == before, "the child ran nothing again"


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
