"""Tokens and dollars: paid live versus served by replay, cache writes by TTL, caching's savings."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from nb_durable import read_run
from nb_durable.agent import views_of
from nb_durable.agent.money.cost import Cost, Price, Usage, price_for

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"

# A reply deep into a run as the Messages API reports it: a warm cache, and writes in both TTLs.
REPLY: dict[str, Any] = {
    "model": "claude-sonnet-5-5-20260101",
    "usage": {
        "cache_creation": {"ephemeral_1h_input_tokens": 8_000, "ephemeral_5m_input_tokens": 3_000},
        "cache_creation_input_tokens": 11_000,
        "cache_read_input_tokens": 40_000,
        "inference_geo": None,
        "input_tokens": 1_200,
        "output_tokens": 900,
        "output_tokens_details": None,
        "server_tool_use": None,
        "service_tier": "standard",
        "speed": None,
    },
}


def test_usage_is_read_from_a_message_and_adds_up() -> None:
    message = {
        "usage": {
            "input_tokens": 100,
            "output_tokens": 20,
            "cache_read_input_tokens": 50,
            "cache_creation_input_tokens": None,
        }
    }
    usage = Usage.of(message)
    assert usage == Usage(100, 20, 0, 50)
    assert (usage + usage).total == 340
    assert Usage.of({}) == Usage()


def test_cache_writes_are_split_by_ttl() -> None:
    usage = Usage.of(REPLY)
    assert usage == Usage(1_200, 900, 11_000, 40_000, cache_creation_1h_input_tokens=8_000)
    assert usage.cache_creation_5m_input_tokens == 3_000
    assert usage.prompt_tokens == 52_200 and usage.total == 53_100
    # What to_json wrote reads back the same (run_finished records a session's saved usage).
    assert Usage.parse(usage.to_json()) == usage
    # Usage recorded before the split, or by an API that sends none: every write is 5-minute.
    old = Usage.parse({"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 700})
    assert (old.cache_creation_5m_input_tokens, old.cache_creation_1h_input_tokens) == (700, 0)


def test_a_realistic_turn_is_priced_by_ttl() -> None:
    price = price_for(REPLY["model"])
    usage = Usage.of(REPLY)
    # $2 in, $10 out, $0.10 read, $2.50 5-minute write, $4 1-hour write per million tokens.
    expected = (1_200 * 2 + 900 * 10 + 40_000 * 0.1 + 3_000 * 2.5 + 8_000 * 4) / 1e6
    assert price.dollars(usage) == pytest.approx(expected) == pytest.approx(0.0549)
    assert price.uncached_dollars(usage) == pytest.approx((52_200 * 2 + 900 * 10) / 1e6)
    cost = Cost().add(usage, price, replayed=False)
    assert cost.cache_saved_dollars == pytest.approx(0.1134 - 0.0549)
    assert cost.to_json()["cache_saved_dollars"] == pytest.approx(0.0585)


def test_a_long_prompt_is_priced_wholly_at_the_long_context_rates() -> None:
    price = price_for("claude-sonnet-4-5-20250929")
    short, long = Usage(150_000, 1_000), Usage(150_000, 1_000, 0, 60_000)
    assert price.dollars(short) == pytest.approx((150_000 * 3 + 1_000 * 15) / 1e6)
    assert price.dollars(long) == pytest.approx((150_000 * 6 + 1_000 * 22.5 + 60_000 * 0.6) / 1e6)


def test_cost_splits_paid_from_saved() -> None:
    price = Price.simple(3, 15)
    cost = Cost().add(Usage(1000, 100), price, replayed=False).add(Usage(2000, 200), price, replayed=True)
    assert cost.paid == Usage(1000, 100) and cost.saved == Usage(2000, 200)
    assert cost.paid_dollars == pytest.approx(0.0045)
    assert cost.saved_dollars == pytest.approx(0.009)
    assert cost.to_json()["saved"]["input_tokens"] == 2000
    # Without cache tokens caching saved nothing; replayed steps never count towards it.
    assert cost.cache_saved_dollars == 0 and not cost.simulated


def test_a_cache_write_not_yet_read_back_costs_more_than_it_saves() -> None:
    price = price_for("claude-sonnet-5-5")
    cost = Cost().add(Usage(200, 100, 10_000, 0), price, replayed=False)
    assert cost.cache_saved_dollars == pytest.approx(-10_000 * 0.5 / 1e6)


def test_a_cost_priced_with_a_simulated_price_is_simulated() -> None:
    cost = Cost().add(Usage(100, 10), price_for("claude-sonnet-5-5"), replayed=False)
    assert not cost.simulated and cost.to_json()["simulated"] is False
    assert cost.add(Usage(100, 10), price_for("demo"), replayed=True).simulated
    assert cost.add(Usage(100, 10), price_for("demo"), replayed=False).to_json()["simulated"] is True


def test_usage_recorded_by_nb_durable_0_1_parses_and_is_priced_at_todays_list_price(tmp_path: Path) -> None:
    # Every model reply and every session's recorded cost in the committed 0.1 logs.
    lines = [json.loads(line) for line in (LOGS / "jsonl" / "agent-run.jsonl").read_text().splitlines()]
    replies = [
        e["result"]["message"]
        for e in lines
        if e["kind"] == "step_completed" and isinstance(e.get("result"), dict) and "message" in e["result"]
    ]
    assert replies
    for reply in replies:
        raw = reply["usage"]
        usage = Usage.of(reply)
        assert (usage.input_tokens, usage.output_tokens) == (raw["input_tokens"], raw["output_tokens"])
        assert usage.cache_creation_input_tokens == raw["cache_creation_input_tokens"]
    recorded = [e["output"]["cost"] for e in lines if e["kind"] == "run_finished"]
    assert recorded
    for cost in recorded:
        saved = Usage.parse(cost["saved"])
        assert (
            saved.input_tokens == cost["saved"]["input_tokens"] and saved.cache_creation_1h_input_tokens == 0
        )
    # Read back through the public API: the run was on claude-sonnet-5-5, $2/$10, not $3/$15.
    shutil.copytree(LOGS / "jsonl", tmp_path / "jsonl", ignore=shutil.ignore_patterns(".leases"))
    run, _ = views_of(read_run("agent-run", str(tmp_path / "jsonl")))
    paid = sum((Usage.of(r) for r in replies), Usage())
    assert run.cost.paid == paid
    assert run.cost.paid_dollars == pytest.approx((paid.input_tokens * 2 + paid.output_tokens * 10) / 1e6)
    assert not run.cost.simulated
    # Its steps name no model asked ("scripted" answered): the run index prices them at the run's model too.
    from nb_durable.agent.money.figures import cost_of_figures
    from nb_durable.core.runs import list_runs

    listed = cost_of_figures({s.run_id: s for s in list_runs(str(tmp_path / "jsonl"))}["agent-run"].figures)
    assert listed.paid_dollars == pytest.approx(run.cost.paid_dollars)


def test_a_session_prices_each_reply_by_the_model_that_answered(tmp_path: Path) -> None:
    from nb_durable import DemoModel, run_agent
    from nb_durable.agent import prepare_demo_workspace

    prepare_demo_workspace(tmp_path / "project")
    store = str(tmp_path / "runs")
    # The default model is asked for, and the demo answers as "demo": its figures are simulated.
    result = run_agent("Fix the failing tests", run_id="demo", client=DemoModel(latency=0), workspace=tmp_path / "project", store=store)
    assert result.status == "completed" and result.cost.simulated
    shown, _ = views_of(read_run("demo", store))
    assert result.cost.paid_dollars == pytest.approx(shown.cost.paid_dollars), "the session and the log price alike"


def test_a_fork_counts_as_paid_only_what_it_paid_itself(tmp_path: Path) -> None:
    from nb_durable import DemoModel, fork, list_runs, resume_agent, run_agent
    from nb_durable.agent import prepare_demo_workspace
    from nb_durable.agent.money.figures import cost_of_figures
    from nb_durable.core.index.check import check_index

    prepare_demo_workspace(tmp_path / "project")
    store = str(tmp_path / "runs")
    run_agent("Fix the failing tests", run_id="base", client=DemoModel(latency=0), workspace=tmp_path / "project", store=store)
    fork("base", "branch", at=7, root=store).close()  # its first 7 steps: three model calls
    resumed = resume_agent("branch", client=DemoModel(latency=0), store=store)
    base, _ = views_of(read_run("base", store))
    branch, steps = views_of(read_run("branch", store))
    copied = sum((s.usage for s in steps[:7] if s.usage is not None), Usage())
    assert copied.total > 0 and resumed.cost.saved.total == copied.total  # replayed: saved by the session
    assert branch.cost.paid.total == resumed.cost.paid.total < base.cost.paid.total  # paid: its own calls only
    listed = {s.run_id: s for s in list_runs(store)}
    assert cost_of_figures(listed["branch"].figures).paid.total == branch.cost.paid.total  # the run index too
    assert check_index(store) == []


def test_a_fork_that_copied_a_model_call_in_flight_counts_the_call_it_made_as_paid(tmp_path: Path) -> None:
    # A fork kept a step whose result was never recorded (the source crashed in the call): the
    # fork makes and pays for the call, but its figures left the call out as one it had copied.
    from nb_durable import DemoModel, fork, list_runs, resume_agent, run_agent
    from nb_durable.agent import RunHooks, prepare_demo_workspace
    from nb_durable.agent.money.figures import cost_of_figures
    from nb_durable.agent.run.crash import CrashAt
    from nb_durable.errors import SimulatedCrash

    prepare_demo_workspace(tmp_path / "project")
    store = str(tmp_path / "runs")
    with pytest.raises(SimulatedCrash):  # killed as its third step, a model call, starts
        run_agent("Fix the failing tests", run_id="base", client=DemoModel(latency=0), workspace=tmp_path / "project",
                  store=store, hooks=RunHooks(before_step=CrashAt(3)))  # fmt: skip
    kept = len(read_run("base", store).steps)
    assert read_run("base", store).steps[-1].result is None and read_run("base", store).steps[-1].step_id.startswith("model:")
    fork("base", "branch", at=kept, root=store).close()
    resumed = resume_agent("branch", client=DemoModel(latency=0), store=store)
    branch, _ = views_of(read_run("branch", store))
    assert resumed.cost.paid.total > 0 and branch.cost.paid.total == resumed.cost.paid.total  # the call in flight was its own
    assert cost_of_figures({s.run_id: s for s in list_runs(store)}["branch"].figures).paid.total == branch.cost.paid.total


def test_what_a_forks_replay_saved_of_simulated_calls_is_labelled_simulated(tmp_path: Path) -> None:
    # A fork of a demo run at its end pays nothing itself: every dollar it shows is what its
    # replay saved of the demo's simulated calls, and must say so wherever it is shown.
    from nb_durable import DemoModel, fork, list_runs, resume_agent, run_agent
    from nb_durable.agent import prepare_demo_workspace
    from nb_durable.agent.display.progress import cost_line
    from nb_durable.agent.money.figures import cost_of_figures

    prepare_demo_workspace(tmp_path / "project")
    store = str(tmp_path / "runs")
    run_agent("Fix the failing tests", run_id="base", client=DemoModel(latency=0), workspace=tmp_path / "project", store=store)
    fork("base", "copy", at=len(read_run("base", store).steps), root=store).close()
    resumed = resume_agent("copy", client=DemoModel(latency=0), store=store)
    assert resumed.live_steps == 0 and resumed.cost.saved_dollars > 0 and resumed.cost.simulated
    shown, _ = views_of(read_run("copy", store))
    listed = cost_of_figures({s.run_id: s for s in list_runs(store)}["copy"].figures)
    assert shown.cost.paid_dollars == listed.paid_dollars == 0
    assert shown.cost.simulated and listed.simulated  # `show` and %agent_runs, as the session said
    assert "simulated $" in cost_line(shown.cost)


def test_a_budget_stop_on_the_demo_model_labels_its_dollars_simulated(tmp_path: Path) -> None:
    from nb_durable import DemoModel, run_agent
    from nb_durable.agent import prepare_demo_workspace

    prepare_demo_workspace(tmp_path / "project")
    stopped = run_agent("Fix the failing tests", run_id="demo", client=DemoModel(latency=0), workspace=tmp_path / "project",
                        store=str(tmp_path / "runs"), max_usd=0.01)  # fmt: skip
    assert stopped.status == "budget_exhausted"
    assert "could cost up to simulated $" in stopped.detail and "has spent simulated $0.0000" in stopped.detail, stopped.detail


CHEAP, DEAR = "claude-haiku-5-5", "claude-opus-5"
"""Two models the price table knows, at very different prices."""


def priced_at_the_models_asked(run_id: str, store: str, session: Cost, asked: dict[str, str]) -> None:
    """A run's model steps, whose replies name a model no table knows (a gateway's name), are
    priced at the model each step asked (``asked``: step id -> model), alike by the session that
    ran them (``session``), by ``show`` (``views_of``) and by the run index; check-index agrees."""
    from nb_durable.agent.money.figures import cost_of_figures
    from nb_durable.agent.money.prices import known_price
    from nb_durable.core.index.check import check_index
    from nb_durable.core.runs import list_runs

    record = read_run(run_id, store)
    models = {s.step_id: s for s in record.steps if s.step_id in asked}
    assert set(models) == set(asked) and not any(known_price(s.result["message"]["model"]) for s in models.values())
    expected = sum(price_for(asked[i]).dollars(Usage.of(s.result["message"])) for i, s in models.items())
    shown, _ = views_of(record)
    listed = cost_of_figures({s.run_id: s for s in list_runs(store)}[run_id].figures)
    assert (session.paid_dollars + session.saved_dollars, shown.cost.paid_dollars, listed.paid_dollars) == pytest.approx(
        (expected, expected, expected), abs=1e-6
    )
    assert check_index(store) == []


def test_a_reply_named_by_a_gateway_is_priced_at_the_model_a_resume_moved_the_run_to(tmp_path: Path) -> None:
    # The replies say "my-gateway-sonnet", which no table knows: each is priced at the model
    # its step asked. The run index and `show` priced the turn after `resume --model` at the
    # run's first model, while the session that paid it priced it at the one it asked.
    from nb_durable.agent import RunHooks
    from nb_durable.agent.models.messages import text_message, tool_use_message
    from nb_durable.agent.run.crash import CrashAt
    from nb_durable.agent.run.loop import resume_agent, run_agent
    from nb_durable.errors import SimulatedCrash
    from nb_durable.testing import ScriptedModel

    gateway = "my-gateway-sonnet"
    store = str(tmp_path / "runs")
    script = [tool_use_message([("list_dir", {"path": "."})], model=gateway), text_message("Nothing here.", model=gateway)]
    with pytest.raises(SimulatedCrash):  # as its second step, the tool call, starts
        run_agent("Look around.", run_id="r", client=ScriptedModel(script), model=CHEAP, workspace=tmp_path,
                  store=store, hooks=RunHooks(before_step=CrashAt(2)))  # fmt: skip
    resumed = resume_agent("r", client=ScriptedModel(script[1:]), store=store, model=DEAR)
    assert resumed.status == "completed" and resumed.replayed_steps == 1
    priced_at_the_models_asked("r", store, resumed.cost, {"model:0": CHEAP, "model:1": DEAR})
