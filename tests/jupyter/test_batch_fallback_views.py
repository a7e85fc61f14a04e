"""A batch-mode model step whose Message Batch gave no answer (expired, errored) falls back to
a normal call at the full price; every view of it says so in the step's line, and why: the
cell's timeline, ``%agent_show`` (HTML and text) and ``nb-durable show``. They showed the step at
full price with no reason (and the timeline the raw decisions of batch mode)."""

from __future__ import annotations

from typing import Any

import pytest

from nb_durable import read_run
from tests.conftest import nb_durable_cli
from tests.fakes import Error, Expired, FunctionScenario, MessagesAPIServer, RecordedRequest, reply, tool_use
from tests.jupyter.test_magics import html_of, run

SAID = {
    "expired": "model turn 1 (Message Batch request expired; sent as a normal call, full price)",
    "errored": "model turn 1 (Message Batch request errored (api_error); sent as a normal call, full price)",
}


@pytest.mark.parametrize("kind", ["expired", "errored"])
def test_every_view_says_why_a_batched_step_cost_the_full_price(ip: Any, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    def scenario(request: RecordedRequest) -> Any:
        if request.endpoint == "batch_request" and request.turn == 1:
            return Expired() if kind == "expired" else Error(500, message="batch request failed")
        if request.turn == 0:
            return reply("Looking.", tool_use("list_dir", {"path": "."}))
        return reply("Done.")

    with MessagesAPIServer(FunctionScenario(scenario)) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        done, cell = run(ip, "%%agent --run fb --batch-api --model claude-test-1 --workspace .\nlook around")
        assert done.success, done.error_in_exec
        assert [r.turn for r in server.requests_to("messages")] == [1], "the fallback: one normal call"
    said = SAID[kind]
    step = read_run("fb", "runs").steps[-1]
    assert step.step_id == "model:1" and "batch" not in step.result, "priced at the full price"
    timeline = html_of(cell)
    assert said in timeline and "model turn 0 (Message Batch, half price)" in timeline, timeline
    assert "asked directly" not in timeline and "gathering a batch" not in timeline, "batch mode's raw decisions"
    shown, _ = run(ip, "%agent_show fb")
    bundle = shown.result._repr_mimebundle_()
    assert said in bundle["text/html"] and said in bundle["text/plain"], bundle["text/plain"]
    cli = nb_durable_cli("show", "fb", "--store", "runs")
    assert cli.returncode == 0, cli.stderr
    assert f"  recorded  {said} " in cli.stdout, cli.stdout
