"""A step's row says what its log holds, in the terminal, the notebook and an export alike.

* A model call waiting out a backoff or a server's retry-after says how long it waits (live),
  and one whose session stopped in the middle of that wait says so when read back.
* After a fallback switch, each turn the fallback answered says which model answered it; a turn
  the run's own model answered (which the run's header names) says nothing more.
"""

from __future__ import annotations

import io
import time
from pathlib import Path
from typing import Any

import pytest

from nb_durable.agent import RunHooks
from nb_durable.agent.display.export import notebook_of
from nb_durable.agent.display.progress import TextProgress
from nb_durable.agent.display.views import StepView, views_of
from nb_durable.agent.models.anthropic import AnthropicModel
from nb_durable.agent.models.retry import RetryPolicy
from nb_durable.agent.run.loop import run_agent
from nb_durable.core.runs import read_run
from nb_durable.jupyter.render import render_page, render_step, render_text
from tests.fakes import Error, MessagesAPIServer, OverloadStorm, ScriptedScenario, reply, tool_use

MODEL = "claude-test-1"
FALLBACK = "claude-test-2"

pytestmark = pytest.mark.usefixtures("no_ambient_anthropic")


class Stopped(KeyboardInterrupt):
    """A person stops the run (Ctrl-C) in the middle of the wait before a retry."""


def go(server: MessagesAPIServer, workspace: Path, hooks: RunHooks, **settings: Any) -> Any:
    return run_agent(
        "Say hello.",
        run_id="r",
        client=AnthropicModel(api_key="test-key", base_url=server.url, timeout=10),
        model=MODEL,
        store=str(workspace.parent / "runs"),
        workspace=workspace,
        retry=RetryPolicy(max_attempts=4, base_delay=0.5, jitter=0.0),
        hooks=hooks,
        **settings,
    )


def listed(workspace: Path) -> str:
    """The rows ``show`` prints of run r."""
    run, steps = views_of(read_run("r", str(workspace.parent / "runs")))
    out = io.StringIO()
    progress = TextProgress(out, width=200, listing=True, model=run.model)
    for view in steps:
        progress.step_changed(view)
    return out.getvalue()


def test_a_retrying_row_in_the_notebook_says_when_it_retries(workspace: Path) -> None:
    """Nothing redraws a notebook row while it waits: it says the local time of the next attempt,
    which stays true, where "waiting 4.0s" would still say so a minute on. The terminal's row,
    redrawn as the wait passes, still counts down from "waiting 4.0s"."""
    rows: list[str] = []
    out = io.StringIO()

    class Rows(TextProgress):
        def step_changed(self, step: StepView) -> None:
            if step.state == "retrying":
                rows.append(render_step(step))
            super().step_changed(step)

    before = time.time()
    with MessagesAPIServer(ScriptedScenario([[Error(529, retry_after=4), reply("Hello.")]])) as server:
        go(server, workspace, RunHooks(sleep=lambda s: None, observer=Rows(out, live=False)))
    after = time.time()
    due = {time.strftime("%H:%M:%S", time.localtime(t + 4)) for t in (before, after)}
    assert len(rows) == 1 and "retrying 1/4" in rows[0], rows
    assert any(f"retrying at {at}, after a 4.0s wait" in rows[0] for at in due), (due, rows)
    assert "waiting 4.0s" not in rows[0]
    assert "waiting 4.0s" in out.getvalue()


def test_a_step_stopped_while_waiting_to_retry_says_so_read_back(workspace: Path) -> None:
    def stop(seconds: float) -> None:
        raise Stopped

    with MessagesAPIServer(ScriptedScenario([[Error(529, retry_after=4), reply("Hello.")]])) as server:
        with pytest.raises(Stopped):
            go(server, workspace, RunHooks(sleep=stop))
    record = read_run("r", str(workspace.parent / "runs"))
    run, steps = views_of(record)
    said = "stopped while waiting 4.0s to retry"
    assert said in listed(workspace)
    assert said in render_page(run, steps) and said in render_text(run, steps)
    (cell,) = [c for c in notebook_of(record).cells if "Model, turn 0" in c.source]
    assert said in cell.source


def test_turns_a_fallback_answered_say_which_model_answered(workspace: Path) -> None:
    turns = [reply(tool_use("list_dir", {}, id="toolu_ls")), reply("Listed.")]
    with MessagesAPIServer(OverloadStorm(turns, [MODEL])) as server:
        go(server, workspace, RunHooks(sleep=lambda s: None), fallback_models=(FALLBACK,), fallback_after=2)
    record = read_run("r", str(workspace.parent / "runs"))
    run, steps = views_of(record)
    by = f"answered by {FALLBACK}"
    rows = [line for line in listed(workspace).splitlines() if "model turn" in line]
    assert len(rows) == 2 and all(by in row for row in rows), rows
    assert render_page(run, steps).count(by) == 2 and render_text(run, steps).count(by) == 2
    heads = [c.source.split("\n")[0] for c in notebook_of(record).cells if "Model, turn" in c.source]
    assert heads == [f"**Model, turn 0** ({by})", f"**Model, turn 1** ({by})"]


def test_turns_the_run_s_own_model_answered_name_no_model(workspace: Path) -> None:
    with MessagesAPIServer(ScriptedScenario([reply("Hello.")])) as server:
        go(server, workspace, RunHooks(sleep=lambda s: None), fallback_models=(FALLBACK,))
    record = read_run("r", str(workspace.parent / "runs"))
    run, steps = views_of(record)
    assert "answered by" not in listed(workspace) + render_page(run, steps) + render_text(run, steps)
