"""A resume's own settings change, the process killed between the two lines that record it (the
decision, then the ``settings:N`` step that carries it).

The next resume found the step unfinished and completed it as no change: the timeline row said
"max_tokens=3000", the run went on with the old value, and the user had to ask again.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from nb_durable.agent.models.scripted import ScriptedModel
from nb_durable.agent.run.crash import CrashAt
from nb_durable.agent.run.hooks import RunHooks
from nb_durable.agent.run.loop import resume_agent, run_agent
from nb_durable.core.runs import read_run
from nb_durable.errors import SimulatedCrash
from nb_durable.testing import text_message, tool_use_message


def _cut_after_the_decision(log: Path, step: str) -> None:
    """Leave the log as a process killed right after the point's first line leaves it."""
    lines = log.read_text().splitlines(keepends=True)
    first = next(i for i, line in enumerate(lines) if json.loads(line).get("step") == step)
    assert json.loads(lines[first])["kind"] == "decision"
    log.write_text("".join(lines[: first + 1]))


def test_a_settings_change_killed_between_its_two_lines_is_completed_as_asked(tmp_path: Path) -> None:
    store = str(tmp_path / "runs")
    replies = [tool_use_message([("list_dir", {"path": "."})]), text_message("Done.")]
    with contextlib.suppress(SimulatedCrash):
        run_agent("look", run_id="r", client=ScriptedModel(replies), store=store, workspace=tmp_path,
                  hooks=RunHooks(before_step=CrashAt(2)))  # fmt: skip
    resume_agent("r", client=ScriptedModel(replies), store=store, max_tokens=3000)
    _cut_after_the_decision(tmp_path / "runs" / "r.jsonl", "settings:1")

    model = ScriptedModel(replies[1:])
    result = resume_agent("r", client=model, store=store)

    assert (result.status, result.text) == ("completed", "Done.")
    assert [r["max_tokens"] for r in model.requests] == [3000]  # the change holds, not asked again
    point = next(s for s in read_run("r", store).steps if s.step_id == "settings:1")
    assert point.result["changes"] == {"max_tokens": 3000}
