"""A failed run read from its log says what to do, as the session that failed said it.

The log keeps the cause (the API's answer); the session's error added the rest (resume once it
is fixed). ``show`` and ``%agent_show``, reading the log later, say it too, in their own words.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from nb_durable.agent import RunHooks
from nb_durable.agent.display.views import views_of
from nb_durable.agent.models.anthropic import AnthropicModel
from nb_durable.agent.models.retry import RetryPolicy
from nb_durable.agent.run.loop import run_agent
from nb_durable.core.runs import read_run
from nb_durable.errors import RetriesExhaustedError
from nb_durable.jupyter.render import render_answer
from tests import forkserver
from tests.fakes import MessagesAPIServer, OverloadStorm, reply

pytestmark = pytest.mark.usefixtures("no_ambient_anthropic")


def test_a_run_failed_in_a_storm_says_how_to_go_on_when_read_from_its_log(workspace: Path) -> None:
    store = str(workspace.parent / "runs")
    with MessagesAPIServer(OverloadStorm([reply("Hello.")], ["claude-test-1"])) as server, pytest.raises(RetriesExhaustedError):
        run_agent("Say hello.", run_id="storm", client=AnthropicModel(api_key="test-key", base_url=server.url, timeout=10),
                  model="claude-test-1", store=store, workspace=workspace,
                  retry=RetryPolicy(max_attempts=2, base_delay=0.0, jitter=0.0), hooks=RunHooks(sleep=lambda s: None))  # fmt: skip
    assert read_run("storm", store).summary.error == "the Messages API answered 529 (overloaded): Overloaded"  # the log: the cause
    run, _ = views_of(read_run("storm", store))
    assert "Once the cause is fixed or has passed, resume it with %agent_resume storm" in render_answer(run)
    shown = forkserver.run([sys.executable, "-m", "nb_durable.cli", "show", "storm", "--store", store],
                           capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert shown.stdout.splitlines()[-1] == (
        "error: the Messages API answered 529 (overloaded): Overloaded. Once the cause is fixed or has passed, "
        f"resume it with nb-durable resume storm --store {store}: its recorded steps do not repeat."
    ), shown.stdout
