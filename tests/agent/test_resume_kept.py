"""What a resume says of the configured values it keeps a run's recorded settings over.

``kept_note`` compares a front end's configured values with what the run goes on with
(``settings_now``: as recorded, then each recorded change and fallback switch), and says how
each that differs can change. The notebook says it (tests/jupyter/test_resume_says_kept.py);
the CLI has nothing to say, since no environment variable sets a recorded setting.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nb_durable.agent import RunHooks
from nb_durable.agent.models.anthropic import AnthropicModel
from nb_durable.agent.models.retry import RetryPolicy
from nb_durable.agent.run.kept import kept_note, settings_now
from nb_durable.agent.run.loop import run_agent
from nb_durable.agent.settings import TABLE, AgentSettings
from nb_durable.core.runs import read_run
from tests.conftest import nb_durable_cli
from tests.fakes import MessagesAPIServer, OverloadStorm, reply, tool_use

pytestmark = pytest.mark.usefixtures("no_ambient_anthropic")


def test_a_run_that_fell_back_goes_on_with_its_fallback_and_says_the_configured_model_is_kept_over(workspace: Path) -> None:
    # The switch is a decision on a model step, not a settings step: a note that read only the
    # settings the run started with would have said nothing of a %config naming the first model.
    storm = OverloadStorm([reply(tool_use("read_file", {"path": "notes.txt"}, id="toolu_a")), reply("Done.")], ["claude-test-1"])
    store = str(workspace.parent / "runs")
    with MessagesAPIServer(storm) as server:
        result = run_agent(
            "Read the notes.", run_id="storm", client=AnthropicModel(api_key="test-key", base_url=server.url, timeout=10),
            model="claude-test-1", fallback_models=("claude-test-2",), fallback_after=2, store=store, workspace=workspace,
            retry=RetryPolicy(max_attempts=4, base_delay=0.01, jitter=0.0), hooks=RunHooks(sleep=lambda s: None),
        )  # fmt: skip
    assert result.status == "completed"
    now = settings_now(read_run("storm", store))
    assert now.model == "claude-test-2"
    note = kept_note("storm", {"model": "claude-test-1"}, now, source="%config", command="resume", front="notebook")
    assert note == "run storm goes on with its recorded settings, not %config's: model claude-test-2, not claude-test-1 (--model changes it)"
    assert kept_note("storm", {"model": "claude-test-2"}, now, source="%config", command="resume", front="notebook") is None


def test_a_demo_run_says_nothing_of_a_configured_model() -> None:
    # The demo answers as itself and refuses --model: naming the flag would send a person to a refusal.
    now = AgentSettings(task="x", model_kind="demo")
    said = kept_note("d", {"model": "claude-x", "max_usd": 2.0}, now, source="%config", command="resume", front="notebook")
    assert said == "run d goes on with its recorded settings, not %config's: max_usd unset, not 2.0 (--max-usd changes it)"


def test_a_cli_resume_under_every_setting_variable_says_nothing_kept(tmp_path: Path) -> None:
    # The CLI's configured values are NB_DURABLE_* variables; each sets a setting a resume takes
    # (a session's, or the store), so there is nothing a resume keeps over them to say. A
    # recorded setting given a variable would need `nb-durable resume` to say it is kept.
    recorded = [row.name for row in TABLE if row.env and row.recorded]
    assert recorded == [], f"{recorded}: a resume keeps these over the environment; say so as %agent_resume does"
    variables: dict[str, Any] = {row.env: "7" for row in TABLE if row.env}
    store = str(tmp_path / "runs")
    ran = nb_durable_cli("run", "--demo", "--run", "c", "--max-turns", "1", "--workspace", str(tmp_path), "Look around.",
                         cwd=tmp_path, NB_DURABLE_STORE=store, NB_DURABLE_DEMO_LATENCY="0")  # fmt: skip
    assert ran.returncode != 0 and "turns" in ran.stdout + ran.stderr, ran.stdout + ran.stderr  # stopped at its turn limit
    resumed = nb_durable_cli("resume", "c", "--max-turns", "9", cwd=tmp_path, NB_DURABLE_STORE=store, NB_DURABLE_DEMO_LATENCY="0", **variables)
    said = resumed.stdout + resumed.stderr
    assert resumed.returncode == 0, said
    assert "recorded settings" not in said, said
