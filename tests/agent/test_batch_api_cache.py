"""Batch mode caches for an hour unless told otherwise: a batch's turnaround often passes five
minutes, so a 5m cache write would be paid at 1.25x and never read.

Proven with the real SDK against the loopback API: a batch-mode run sends ``ttl: "1h"``,
records it, and is charged the 1h write price at batch prices; a ``cache_ttl`` chosen (a
keyword, a batch file's line) is kept; a resume and a rerun of a batch-mode run keep the hour.
The demo model reports a 1h write as the API does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nb_durable.agent import RunHooks
from nb_durable.agent.fleet.batch import submit_batch
from nb_durable.agent.fleet.batch_file import BatchTask
from nb_durable.agent.models.anthropic import AnthropicModel
from nb_durable.agent.models.demo import DemoModel
from nb_durable.agent.money.cost import Usage
from nb_durable.agent.money.prices import price_for
from nb_durable.agent.run.loop import resume_agent, run_agent
from nb_durable.agent.run.prepare import prepare_run
from nb_durable.agent.run.stopping import RunStopped, StopSignal
from nb_durable.agent.settings import AgentSettings
from nb_durable.core.runs import list_runs, read_run, read_summary
from tests.agent.test_batch_api import MODEL, batch_run, two_turns
from tests.fakes import FunctionScenario, MessagesAPIServer

pytestmark = pytest.mark.usefixtures("no_ambient_anthropic")


def ttls(server: MessagesAPIServer) -> list[str | None]:
    """The cache ttl each request of every batch asked for (None: no caching)."""
    return [(r.body.get("cache_control") or {}).get("ttl") for r in server.requests_to("batch_request")]


def test_a_batch_mode_run_caches_for_an_hour_and_pays_the_hour_at_batch_prices(tmp_path: Path) -> None:
    with MessagesAPIServer(FunctionScenario(two_turns)) as server:
        result = batch_run(server, tmp_path)
        assert result.status == "completed" and ttls(server) == ["1h", "1h"]
        assert read_summary(result.run_id, tmp_path / "runs").settings["cache_ttl"] == "1h"  # what a resume reads
        usage = sum((Usage.of(r.reply or {}) for r in server.requests_to("batch_request")), Usage())
        assert usage.cache_creation_1h_input_tokens > 0 and usage.cache_creation_5m_input_tokens == 0
        assert usage.cache_read_input_tokens > 0  # the second turn read what the first wrote
        price = price_for(MODEL)
        assert price.cache_write_1h > price.cache_write_5m
        assert result.cost.paid_dollars == pytest.approx(price.batched().dollars(usage))
        (row,) = list_runs(tmp_path / "runs")
        assert row.figures["dollars"] == pytest.approx(price.batched().dollars(usage))  # `runs`, from the index


@pytest.mark.parametrize(("chosen", "sent"), [("5m", "5m"), ("off", None), ("1h", "1h")])
def test_a_cache_ttl_chosen_is_kept_in_batch_mode(tmp_path: Path, chosen: str, sent: str | None) -> None:
    with MessagesAPIServer(FunctionScenario(two_turns)) as server:
        result = batch_run(server, tmp_path, cache_ttl=chosen)
        assert result.status == "completed" and ttls(server) == [sent, sent]
        assert read_summary(result.run_id, tmp_path / "runs").settings["cache_ttl"] == chosen


def test_without_batch_mode_the_default_is_still_five_minutes(tmp_path: Path) -> None:
    assert AgentSettings(task="t").caching() == "5m" and AgentSettings(task="t").to_json()["cache_ttl"] == "5m"
    assert AgentSettings(task="t").but(batch_api=True).caching() == "1h"  # unset follows the mode, however set
    assert AgentSettings(task="t", batch_api=True, cache_ttl="5m").caching() == "5m"
    prepared = prepare_run("t", values={"batch_api": True}, environ={"ANTHROPIC_API_KEY": "k"})
    assert prepared.settings.to_json()["cache_ttl"] == "1h"


def test_a_queued_batch_mode_run_records_the_hour_and_a_line_that_chooses_keeps_its_own(tmp_path: Path) -> None:
    handle = submit_batch(
        [BatchTask("first"), BatchTask("second", settings={"cache_ttl": "5m"})], store=str(tmp_path / "runs"),
        workspace=str(tmp_path), environ={"ANTHROPIC_API_KEY": "k"}, batch_api=True,
    )  # fmt: skip
    assert [read_summary(r, tmp_path / "runs").settings["cache_ttl"] for r in handle.run_ids] == ["1h", "5m"]


@pytest.mark.parametrize("again", ["resume", "rerun"])
def test_a_batch_mode_run_gone_on_with_keeps_its_hour(tmp_path: Path, again: str) -> None:
    with MessagesAPIServer(FunctionScenario(two_turns), batch_delay=float("inf")) as server:
        stop = StopSignal()
        (tmp_path / "ws").mkdir()

        server.once_batch_polled(stop.request)
        client = AnthropicModel(api_key="test-key", base_url=server.url)
        common: dict[str, Any] = {"client": client, "store": str(tmp_path / "runs")}
        first = {"run_id": "kept", "model": MODEL, "workspace": tmp_path / "ws", **common}
        with pytest.raises(RunStopped):
            run_agent("look around", hooks=RunHooks(stop=stop), batch_api=True, **first)
        server.batches.delay = 0.0
        # A rerun asks no batch_api: the mode the run recorded holds, and its hour with it.
        result = resume_agent("kept", **common) if again == "resume" else run_agent("look around", **first)
        assert result.status == "completed" and ttls(server) == ["1h", "1h"]


def test_the_demo_model_reports_an_hour_write_as_the_api_does(tmp_path: Path) -> None:
    result = run_agent(
        "List the files", client=DemoModel(latency=0), store=str(tmp_path / "runs"), workspace=tmp_path, cache_ttl="1h"
    )
    steps = read_run(result.run_id, tmp_path / "runs").steps
    usage = sum((Usage.of(s.result["message"]) for s in steps if s.step_id.startswith("model:")), Usage())
    assert usage.cache_creation_1h_input_tokens == usage.cache_creation_input_tokens > 0
    assert usage.cache_read_input_tokens > 0
