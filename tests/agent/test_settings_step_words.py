"""A recorded settings step says what it did: the settings it changed and who changed them, or,
for a worker's mark with nothing changed, which worker took the run (not "no change")."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from nb_durable import open_store
from nb_durable.agent import views_of
from nb_durable.agent.models.scripted import ScriptedModel
from nb_durable.agent.run.crash import CrashAt
from nb_durable.agent.run.hooks import RunHooks
from nb_durable.agent.run.loop import resume_agent, run_agent
from nb_durable.core.runs import read_run
from nb_durable.errors import SimulatedCrash
from nb_durable.testing import text_message, tool_use_message


def _settings_outputs(store: str, run_id: str) -> list[str]:
    """Each settings step's row as shown: its title, then its output."""
    with open_store(store) as runs:
        _, steps = views_of(read_run(run_id, runs))
    return [f"{v.title}: {v.output}" for v in steps if v.kind == "settings"]


def _crashed(tmp_path: Path) -> tuple[str, list[dict[str, Any]]]:
    store = str(tmp_path / "runs")
    replies = [tool_use_message([("list_dir", {"path": "."})]), text_message("Done.")]
    with contextlib.suppress(SimulatedCrash):
        run_agent("look", run_id="r", client=ScriptedModel(replies), store=store, workspace=tmp_path, hooks=RunHooks(before_step=CrashAt(2)))
    return store, replies


def test_a_workers_mark_with_nothing_changed_says_which_worker_resumed_the_run(tmp_path: Path) -> None:
    store, replies = _crashed(tmp_path)
    resume_agent("r", client=ScriptedModel(replies), store=store, resumed_by="vm:4242")
    assert _settings_outputs(store, "r") == ["resume before turn 1: resumed by worker vm:4242, no setting changed"]


def test_a_change_says_what_it_changed_and_by_whom(tmp_path: Path) -> None:
    store, replies = _crashed(tmp_path)
    resume_agent("r", client=ScriptedModel(replies), store=store, resumed_by="vm:4242", max_tokens=3000)
    assert _settings_outputs(store, "r") == ["settings change before turn 1: max_tokens=3000 by worker vm:4242"]


def test_a_truncated_turn_continued_with_nothing_changed_says_so(tmp_path: Path) -> None:
    store = str(tmp_path / "runs")
    cut = text_message("Here is the first half", stop_reason="max_tokens")
    assert run_agent("write", run_id="t", client=ScriptedModel([cut]), store=store, workspace=tmp_path).status == "truncated"
    resume_agent("t", client=ScriptedModel([cut, text_message(" and the rest.")]), store=store)
    assert _settings_outputs(store, "t") == ["resume before turn 1: resumed, no setting changed; the model continues its turn"]


def test_a_new_run_given_a_setting_its_log_leaves_out_records_no_change_by_resume(tmp_path: Path) -> None:
    # --fallback-after without --fallback-model: the log writes fallback_after only beside
    # fallback models, so the new run read its own settings back as changed, and recorded
    # "fallback_after=5 by resume" before its first turn, in a run nobody had resumed.
    store = str(tmp_path / "runs")
    done = run_agent("look", run_id="n", client=ScriptedModel([text_message("Done.")]), store=store, workspace=tmp_path,
                     fallback_after=5)  # fmt: skip
    assert done.status == "completed"
    assert [s.step_id for s in read_run("n", store).steps] == ["model:0"]
