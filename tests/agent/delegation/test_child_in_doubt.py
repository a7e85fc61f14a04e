"""A child's step in doubt under ``in_doubt="fail"`` stops the tree, and the decision reaches it.

The parent used to answer its delegate call with "the child run stopped ... this call's result
is final" and go on to completed: the person who asked the run to stop for a by-hand check got
a finished parent, and a child whose settling could never reach it. Now the tree stops (the
delegate call unanswered), and resuming the parent with the decision finishes the tree.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nb_durable.agent import RunHooks, ToolRegistry, builtin_tools, resume_agent, run_agent
from nb_durable.agent.run.crash import CrashPoint
from nb_durable.agent.tools import Tool, ToolContext, ToolResult
from nb_durable.core.runs import read_run
from nb_durable.errors import InDoubtError, SimulatedCrash
from nb_durable.testing import ScriptedModel, text_message, tool_use_message


def test_a_child_in_doubt_with_in_doubt_fail_stops_the_tree_and_a_decision_finishes_it(tmp_path: Path) -> None:
    store = str(tmp_path / "runs")
    notes: list[Any] = []

    def note(tool_input: dict[str, Any], context: ToolContext) -> ToolResult:
        notes.append(tool_input)
        return ToolResult("noted")

    tools = ToolRegistry([*builtin_tools(), Tool("note", "Take a note.", {"type": "object", "properties": {"text": {"type": "string"}}}, "external", note)])
    script = [tool_use_message([("delegate", {"task": "Note it.", "tools": ["note"]})]), tool_use_message([("note", {"text": "x"})])]
    with pytest.raises(SimulatedCrash):  # killed as the child's note starts: the note is in doubt
        run_agent("Have it noted.", client=ScriptedModel(script), tools=tools, store=store, workspace=str(tmp_path),
                  delegate=True, run_id="p", hooks=RunHooks(child_crash=CrashPoint.parse("1.2")))  # fmt: skip
    child = read_run("p", store).steps[1].result["child"]

    answers = ScriptedModel([text_message("noted it"), text_message("all noted")])
    with pytest.raises(InDoubtError, match=f"of run '{child}' started at .* its result was never recorded"):
        resume_agent("p", client=answers, tools=tools, store=store, in_doubt="fail")
    assert answers.remaining == 2, "nothing was asked: the tree stopped"
    assert [s.step_id.split(":")[0] for s in read_run("p", store).steps if s.result is not None] == ["model", "delegate"]
    assert (read_run("p", store).summary.status, read_run(child, store).summary.status) == ("interrupted", "in_doubt")

    done = resume_agent("p", client=answers, tools=tools, store=store, in_doubt="rerun")
    assert (done.status, done.text) == ("completed", "all noted")
    assert notes == [{"text": "x"}], "the note ran once, when the decision said so"
    assert read_run(child, store).summary.status == "completed"
