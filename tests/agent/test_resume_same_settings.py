"""A resume given a setting it may not change, with the value the run recorded: accepted.

``resume_agent(run, workspace=<the path recorded>)`` was refused ("workspace cannot change
when a run goes on") before the log was even read, so a script that repeats the flags it
started a run with could not resume it; ``nb-durable resume`` and ``%agent_resume`` had no
``--workspace`` at all (the magic: tests/jupyter/test_resume_same_workspace.py). The value is compared as the run recorded it (a workspace by its
absolute path), and only another value is refused, naming the value recorded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nb_durable.agent.run.loop import resume_agent, run_agent
from nb_durable.core.runs import read_run
from nb_durable.errors import SettingError
from nb_durable.testing import ScriptedModel, text_message, tool_use_message
from tests.conftest import nb_durable_cli

pytestmark = pytest.mark.usefixtures("no_ambient_anthropic")


def _stopped_at_its_turn_limit(workspace: Path, store: str) -> None:
    model = ScriptedModel([tool_use_message([("read_file", {"path": "notes.txt"})])])
    result = run_agent(
        "Read the notes.", run_id="r", client=model, store=store, workspace=workspace, max_turns=1,
        effort="low", tags=("nightly",),
    )  # fmt: skip
    assert result.status == "interrupted", result.status


def test_a_resume_given_the_recorded_workspace_in_any_spelling_goes_on(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = str(workspace.parent / "runs")
    _stopped_at_its_turn_limit(workspace, store)
    monkeypatch.chdir(workspace.parent)
    for spelled in ("./work", "work/", str(workspace)):
        result = resume_agent(
            "r", client=ScriptedModel([text_message("Milk.")]), store=store, workspace=spelled, effort="low", max_turns=5,
            tags=["nightly"],
        )  # fmt: skip
        assert (result.status, result.text) == ("completed", "Milk."), spelled


def test_a_resume_given_another_workspace_is_refused_naming_the_recorded_one_and_records_nothing(
    workspace: Path, tmp_path: Path
) -> None:
    store = str(workspace.parent / "runs")
    _stopped_at_its_turn_limit(workspace, store)
    before = read_run("r", store)
    (tmp_path / "other").mkdir()
    given: tuple[tuple[str, Any, str], ...] = (
        ("workspace", str(tmp_path / "other"), repr(str(workspace.resolve()))),
        ("effort", "high", "'low'"),
        ("tags", ("weekly",), '["nightly"]'),
    )
    for name, value, recorded in given:
        with pytest.raises(SettingError) as refused:
            resume_agent("r", client=ScriptedModel([text_message("Milk.")]), store=store, **{name: value})
        assert str(refused.value) == (
            f"{name} of run 'r' cannot change when a run goes on (it is part of what the run is, and a fork keeps "
            f"it too): the run recorded {recorded}; leave it out to go on, or start a new run to use another, "
            f"not {value!r}"
        )
    after = read_run("r", store)
    assert (after.summary.status, len(after.steps)) == (before.summary.status, len(before.steps)), (
        "nothing recorded"
    )


def test_the_cli_resume_and_continue_take_the_recorded_workspace_again(tmp_path: Path) -> None:
    env: dict[str, Any] = {"NB_DURABLE_STORE": str(tmp_path / "runs"), "NB_DURABLE_DEMO_LATENCY": "0"}
    (tmp_path / "work").mkdir()
    ran = nb_durable_cli(
        "run",
        "--demo",
        "--run",
        "c",
        "--max-turns",
        "1",
        "--workspace",
        "work",
        "Look around.",
        cwd=tmp_path,
        **env,
    )
    assert ran.returncode != 0 and "turns" in ran.stdout + ran.stderr, ran.stdout + ran.stderr
    other = nb_durable_cli("resume", "c", "--workspace", ".", cwd=tmp_path, **env)
    assert other.returncode == 2, other.stdout + other.stderr
    assert f"the run recorded {str((tmp_path / 'work').resolve())!r};" in other.stderr, other.stderr
    resumed = nb_durable_cli("resume", "c", "--max-turns", "30", "--workspace", "./work/", cwd=tmp_path, **env)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    again = nb_durable_cli(
        "continue", "c", "--workspace", str(tmp_path / "work"), "Say goodbye.", cwd=tmp_path, **env
    )
    assert again.returncode == 0, again.stdout + again.stderr
