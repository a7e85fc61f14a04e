"""A full context compacted, not fatal, through the real SDK against a loopback API with a
small context window (a prompt over it is a 400 "prompt is too long", a reply that would not
fit stops with ``model_context_window_exceeded``, as the real API does).

The agent reads eight parts of a report, one a turn; the conversation outgrows the window
mid-run, so the run records ``compact:N`` steps (a summarising call of its own) whose result
replaces the conversation's prefix, and completes. Its replay writes nothing, byte for byte,
and sends nothing; with compaction off the same run stops ``context_full``.
"""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import pytest

from nb_durable.agent import RunHooks, ToolRegistry, builtin_tools, tool
from nb_durable.agent.models.anthropic import AnthropicModel
from nb_durable.agent.models.retry import RetryPolicy
from nb_durable.agent.run.compaction import SUMMARY_HEADER, SUMMARY_SYSTEM
from nb_durable.agent.run.loop import resume_agent, run_agent
from nb_durable.agent.run.outcomes import AgentResult
from nb_durable.core.runs import read_run
from tests.conftest import subprocess_env
from tests.fakes import FunctionScenario, MessagesAPIServer, reply, tool_use
from tests.fakes.messages_api.records import RecordedRequest
from tests.fakes.messages_api.scenario import refusal

MODEL = "claude-test-1"
PARTS = 8
WINDOW = 3_000


pytestmark = pytest.mark.usefixtures("no_ambient_anthropic")


def reader(request: RecordedRequest) -> Any:
    """Read part 0, 1, ... in turn (the last tool result says which was read), then say done."""
    body = request.body
    if body.get("system") == SUMMARY_SYSTEM:
        return reply("Summary: the agent is reading the report's parts in order; it read them up to the last one shown.")
    last = ""
    for message in body["messages"]:
        for block in message["content"] if isinstance(message["content"], list) else []:
            if block.get("type") == "tool_result":
                last = str(block.get("content"))
    done = [i for i in range(PARTS) if f"PART {i} " in last]
    following = done[-1] + 1 if done else 0
    if following == PARTS:
        return reply("Done: all eight parts read.")
    return reply(tool_use("read_file", {"path": f"part{following}.txt"}, id=f"toolu_{following}"))


def go(server: MessagesAPIServer, workspace: Path, run_id: str, **values: Any) -> AgentResult:
    return run_agent(
        "Read the report's eight parts, in order.",
        run_id=run_id,
        client=AnthropicModel(api_key="test-key", base_url=server.url, timeout=10),
        model=MODEL,
        store=str(workspace.parent / "runs"),
        workspace=workspace,
        retry=RetryPolicy(max_attempts=2, base_delay=0.01, jitter=0.0),
        hooks=RunHooks(sleep=lambda s: None),
        cache_ttl="off",
        **{"max_turns": 30, **values},
    )


@pytest.fixture
def report(workspace: Path) -> Path:
    for i in range(PARTS):
        (workspace / f"part{i}.txt").write_text(f"PART {i} " + "figures and findings of the quarter. " * 55)
    return workspace


def test_a_context_that_fills_up_is_compacted_and_the_run_completes(report: Path) -> None:
    store = report.parent / "runs"
    with MessagesAPIServer(FunctionScenario(reader), context_window=WINDOW) as server:
        result = go(server, report, "compacted")
        sent = [r for r in server.requests if r.endpoint == "messages"]
        log = (store / "compacted.jsonl").read_bytes()
        count = len(server.requests)
        again = go(server, report, "compacted")
        assert len(server.requests) == count  # replay sends nothing
        assert (store / "compacted.jsonl").read_bytes() == log  # and writes nothing
    assert result.status == "completed" and result.text == "Done: all eight parts read."
    assert again.status == "completed" and again.live_steps == 0 and again.text == result.text
    record = read_run("compacted", str(store))
    compactions = [s for s in record.steps if s.step_id.startswith("compact:")]
    assert compactions, [s.step_id for s in record.steps]
    for step in compactions:
        assert step.result["replaced"] > 1 and step.result["after"] < step.result["before"]
    # Every part was read once, and a request after a compaction starts with the summary.
    reads = [s.result for s in record.steps if s.step_id.startswith("tool:")]
    assert len(reads) == PARTS
    summarised = [r for r in sent if SUMMARY_HEADER in str(r.body["messages"][0]["content"])]
    assert summarised and all(r.outcome in ("reply", "rejected") for r in sent)


def test_with_compaction_off_the_same_run_stops_context_full(report: Path) -> None:
    with MessagesAPIServer(FunctionScenario(reader), context_window=WINDOW) as server:
        result = go(server, report, "full", compaction="off")
    assert result.status == "context_full"
    assert not [s for s in read_run("full", str(report.parent / "runs")).steps if s.step_id.startswith("compact:")]


def test_show_gives_each_compaction_a_row_with_what_it_saved(report: Path) -> None:
    import sys

    from tests import forkserver

    with MessagesAPIServer(FunctionScenario(reader), context_window=WINDOW) as server:
        go(server, report, "shown")
    # 100 columns (show's own width when not on a terminal): pytest-xdist's workers set COLUMNS=80.
    shown = forkserver.run([sys.executable, "-m", "nb_durable.cli", "show", "shown", "--store", str(report.parent / "runs")],
                           capture_output=True, text=True, timeout=60, check=False, env=subprocess_env(COLUMNS="100"))  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    rows = [line for line in shown.stdout.splitlines() if "compaction before" in line]
    assert rows and all("saved ~" in r and "compacted 7 messages" in r for r in rows), shown.stdout
    # A model call of its own: its row says what it paid, as the notebook's row does, beside what it saved.
    assert all(re.search(r"compaction before turn \d+ +[\d,]+ in / [\d,]+ out · saved ~", r) for r in rows), shown.stdout


def test_a_tool_call_the_window_cut_off_never_runs_the_run_compacts_and_asks_again(report: Path) -> None:
    """A reply stopped by ``model_context_window_exceeded`` may end in a tool call whose input
    never finished (the API sends what it had: here, none). It ran, with that input: a
    ``notify`` meant for one person went to everyone. Now it is a full context like any."""
    sent: list[dict[str, Any]] = []

    def notify(who: str = "everyone", text: str = "") -> str:
        """Notify people (everyone unless ``who`` says otherwise)."""
        sent.append({"who": who, "text": text})
        return f"notified {who}"

    def scenario(request: RecordedRequest) -> Any:
        body = request.body
        if body.get("system") == SUMMARY_SYSTEM:
            return reply("Summary: the agent read the report's first parts and is about to notify its owner.")
        said = str(body["messages"])
        if "notified " in said:
            return reply("Done: the owner was notified.")
        if said.count("PART ") < 4 and SUMMARY_HEADER not in said:
            return reader(request)
        return reply("Notifying the owner.", tool_use("notify", {"who": "owner", "text": "figures " * 250}, id="toolu_notify"))

    tools = ToolRegistry([*builtin_tools(), tool(notify)])
    with MessagesAPIServer(FunctionScenario(scenario), context_window=WINDOW) as server:
        result = go(server, report, "notify", tools=tools)
    assert result.status == "completed", result.detail
    assert sent == [{"who": "owner", "text": "figures " * 250}], "the cut-off call never ran; the whole one ran once"
    steps = [s.step_id for s in read_run("notify", str(report.parent / "runs")).steps]
    assert any(s.startswith("compact:") for s in steps), steps


def test_the_run_index_counts_what_compactions_cost_as_the_timeline_does(report: Path) -> None:
    from nb_durable.agent.display.views import views_of
    from nb_durable.agent.money.figures import cost_of_figures
    from nb_durable.core.index.rows import index_of
    from nb_durable.core.stores import open_store

    store = str(report.parent / "runs")
    with MessagesAPIServer(FunctionScenario(reader), context_window=WINDOW) as server:
        result = go(server, report, "priced")
    record = read_run("priced", store)
    assert [s for s in record.steps if s.step_id.startswith("compact:") and s.result.get("message")]
    shown, _ = views_of(record)
    indexed = index_of(open_store(store))
    assert indexed is not None
    listed = cost_of_figures(indexed.index_rows(["priced"])[0].figures)
    # %agent_runs reads the index: its tokens and dollars are the header's, summaries included.
    assert listed.paid == shown.cost.paid == result.cost.paid
    assert listed.paid_dollars == pytest.approx(shown.cost.paid_dollars)


def test_a_budget_covers_a_compaction_call_before_it_is_made(report: Path) -> None:
    # Each read costs about $0.0024 and the summary (cut at max_tokens=1,000) about $0.0124: at
    # $0.019, the pre-flight count passes compact_at before turn 3 with $0.0073 spent. The
    # summarising call could cost up to about $0.0125 more: it is not made, as no other call
    # would be (it was made unchecked, and the run ended at $0.0197).
    long_summary = "Summary: " + "word " * 3000

    def summarised_at_length(request: RecordedRequest) -> Any:
        return reply(long_summary) if request.body.get("system") == SUMMARY_SYSTEM else reader(request)

    store = str(report.parent / "runs")
    with MessagesAPIServer(FunctionScenario(summarised_at_length)) as server:
        stopped = go(server, report, "budgeted", max_usd=0.019, max_tokens=1_000, compact_at=2_000)
        asked = [r.body.get("system") for r in server.requests if r.endpoint == "messages"]
        assert stopped.status == "budget_exhausted" and stopped.cost.paid_dollars <= 0.019, stopped.cost
        assert SUMMARY_SYSTEM not in asked and "--max-usd" in stopped.detail
        assert not [s for s in read_run("budgeted", store).steps if s.step_id.startswith("compact:")]
        raised = go(server, report, "budgeted", max_usd=1.0, max_tokens=1_000, compact_at=2_000)
    assert raised.status == "completed"
    assert [s for s in read_run("budgeted", store).steps if s.step_id.startswith("compact:")]


def test_a_budget_prices_a_compaction_call_at_its_own_max_tokens(report: Path) -> None:
    # max_tokens=20,000 makes a turn's worst case about $0.20, but a summary is cut at 4,096
    # tokens: with $0.0073 spent at $0.21, the compaction (at most about $0.044) fits and is
    # made; the turn after it (about $0.20 more) is what the budget refuses.
    store = str(report.parent / "runs")
    with MessagesAPIServer(FunctionScenario(reader)) as server:
        stopped = go(server, report, "own-max", max_usd=0.21, max_tokens=20_000, compact_at=2_000)
        summaries = [r for r in server.requests_to("messages") if r.body.get("system") == SUMMARY_SYSTEM]
    assert stopped.status == "budget_exhausted" and stopped.cost.paid_dollars <= 0.21, stopped.cost
    assert [r.body["max_tokens"] for r in summaries] == [4_096]
    assert [s.step_id for s in read_run("own-max", store).steps][-1] == "compact:3"


def test_a_compaction_that_fails_says_why_on_its_row_and_in_the_runs_detail(report: Path) -> None:
    from nb_durable.agent.display.views import views_of
    from tests.fakes import Error

    def no_summaries(request: RecordedRequest) -> Any:
        if request.body.get("system") == SUMMARY_SYSTEM:
            return Error(403, message="this key may not summarise")
        return reader(request)

    with MessagesAPIServer(FunctionScenario(no_summaries), context_window=WINDOW) as server:
        result = go(server, report, "unsummarised")
    assert result.status == "context_full"
    assert "Compacting the conversation failed" in result.detail and "this key may not summarise" in result.detail
    run, steps = views_of(read_run("unsummarised", str(report.parent / "runs")))
    (row,) = [s for s in steps if s.step_id.startswith("compact:")]
    # Not "compacted ? messages into a summary": nothing was compacted.
    assert row.is_error and row.output.startswith("failed: ") and "this key may not summarise" in row.output
    assert "this key may not summarise" in run.detail


@pytest.mark.parametrize(
    ("summary", "why"),
    [
        (refusal(category="cyber"), "refused"),
        (reply("Summary: the agent", stop_reason="max_tokens"), "cut off"),
        (reply(stop_reason="model_context_window_exceeded"), "context window"),
    ],
    ids=["refused", "cut-off", "too-long"],
)
def test_a_summary_the_model_did_not_finish_never_replaces_the_conversation(report: Path, summary: Any, why: str) -> None:
    """A summarising reply stopped short (refused, cut at its max_tokens, its own prompt too
    long) was taken as the summary: the whole conversation but its last exchanges was replaced
    by a refusal, half a sentence or nothing, and the run went on having forgotten its work."""
    from nb_durable.agent.display.views import views_of

    def unsummarised(request: RecordedRequest) -> Any:
        return summary if request.body.get("system") == SUMMARY_SYSTEM else reader(request)

    with MessagesAPIServer(FunctionScenario(unsummarised), context_window=WINDOW) as server:
        result = go(server, report, "unfinished")
        after = [r for r in server.requests_to("messages") if r.body.get("system") != SUMMARY_SYSTEM][-1]
    assert SUMMARY_HEADER not in str(after.body["messages"][0]["content"])
    assert result.status == "context_full" and "Compacting the conversation failed" in result.detail, result.detail
    assert why in result.detail
    _, steps = views_of(read_run("unfinished", str(report.parent / "runs")))
    (row, *_) = [s for s in steps if s.step_id.startswith("compact:")]
    assert row.is_error and row.output.startswith("failed: ") and why in row.output


def test_a_compaction_whose_call_fails_is_not_the_end_of_the_run(report: Path) -> None:
    """A compaction whose call failed (here a 403, a key not allowed to summarise) ended the
    run context_full for good: every resume replayed the failed compaction and stopped there,
    sending nothing, whatever it asked (the detail's own advice, another model, included)."""
    from tests.fakes import Error

    allowed = {"yet": False}

    def summaries_once_allowed(request: RecordedRequest) -> Any:
        if request.body.get("system") == SUMMARY_SYSTEM and not allowed["yet"]:
            return Error(403, message="this key may not summarise")
        return reader(request)

    store = str(report.parent / "runs")
    with MessagesAPIServer(FunctionScenario(summaries_once_allowed), context_window=WINDOW) as server:
        assert go(server, report, "refused").status == "context_full"
        allowed["yet"] = True
        client = AnthropicModel(api_key="test-key", base_url=server.url, timeout=10)
        result = resume_agent("refused", client=client, store=store, model="claude-test-2", hooks=RunHooks(sleep=lambda s: None))
        count = len(server.requests)
        again = resume_agent("refused", client=client, store=store)
        assert len(server.requests) == count  # replay sends nothing
    assert (result.status, result.text) == ("completed", "Done: all eight parts read."), result.detail
    steps = read_run("refused", store).steps
    compactions = [s.result for s in steps if s.step_id.startswith("compact:")]
    assert "failed" in compactions[0] and "failed" not in compactions[-1]
    assert again.status == "completed" and again.live_steps == 0


def test_a_storm_on_a_compaction_call_fails_the_run_and_a_resume_compacts(report: Path) -> None:
    """Retries exhausted on the summarising call were recorded as a failed compaction, so the
    run ended context_full for a cause that passes; it now fails as any storm does, its
    compaction unfinished, and a resume asks it again."""
    from nb_durable.errors import RetriesExhaustedError
    from tests.fakes import Error

    storm = {"on": True}

    def stormy_summaries(request: RecordedRequest) -> Any:
        return Error(529) if request.body.get("system") == SUMMARY_SYSTEM and storm["on"] else reader(request)

    store = str(report.parent / "runs")
    with MessagesAPIServer(FunctionScenario(stormy_summaries), context_window=WINDOW) as server:
        with pytest.raises(RetriesExhaustedError):
            go(server, report, "stormy")
        storm["on"] = False
        client = AnthropicModel(api_key="test-key", base_url=server.url, timeout=10)
        result = resume_agent("stormy", client=client, store=store, hooks=RunHooks(sleep=lambda s: None))
    assert result.status == "completed", result.detail
    compactions = [s for s in read_run("stormy", store).steps if s.step_id.startswith("compact:")]
    assert compactions[0].attempts and "failed" not in compactions[0].result


def test_a_compaction_a_resume_asks_again_is_priced_before_it_is_made(report: Path) -> None:
    # The storm left compact:N unfinished; the resume names a model at $100 per million output
    # tokens, so the summary's worst case (4,096 tokens out) is about $0.41, past a $0.30 budget.
    from nb_durable.agent.money.prices import Price
    from nb_durable.errors import RetriesExhaustedError
    from tests.fakes import Error

    storm = {"on": True}

    def stormy_summaries(request: RecordedRequest) -> Any:
        return Error(529) if request.body.get("system") == SUMMARY_SYSTEM and storm["on"] else reader(request)

    store = str(report.parent / "runs")
    prices = {MODEL: Price.simple(0.2, 1.0), "claude-test-2": Price.simple(20.0, 100.0)}
    hooks = RunHooks(sleep=lambda s: None, prices=prices)
    with MessagesAPIServer(FunctionScenario(stormy_summaries), context_window=WINDOW) as server:
        with pytest.raises(RetriesExhaustedError):
            go(server, report, "priced-again", max_usd=0.3, max_tokens=4_096)
        storm["on"] = False
        before = len(server.requests)
        client = AnthropicModel(api_key="test-key", base_url=server.url, timeout=10)
        result = resume_agent("priced-again", client=client, store=store, model="claude-test-2", hooks=hooks)
        assert [r.body.get("system") for r in server.requests[before:] if r.endpoint == "messages"] == []
    assert result.status == "budget_exhausted" and "--max-usd" in result.detail, result.detail


def test_a_turn_the_api_refused_as_too_long_is_not_said_to_have_been_retried(report: Path) -> None:
    # The refusal is the turn's one attempt: it stands for a full window, and no attempt came after it.
    from nb_durable.agent.display.progress import TextProgress
    from nb_durable.agent.display.views import views_of
    from nb_durable.jupyter.render import render_step

    with MessagesAPIServer(FunctionScenario(reader), context_window=WINDOW) as server:
        go(server, report, "refused", compaction="off")
    _, steps = views_of(read_run("refused", str(report.parent / "runs")))
    full = steps[-1]
    assert full.stop_reason == "model_context_window_exceeded" and full.attempt == 1
    assert "retr" not in render_step(full)
    printed = io.StringIO()
    TextProgress(printed, listing=True).step_changed(full)
    assert "retr" not in printed.getvalue(), printed.getvalue()


def test_a_request_refused_as_too_long_spends_no_turn(report: Path) -> None:
    # The run needs nine replies; the API refuses two requests as too long on the way. Counted
    # as turns, they stopped it at its limit of nine, one reply short of done.
    from nb_durable.agent.display.views import views_of
    from nb_durable.agent.models.stops import refused_as_too_long

    store = str(report.parent / "runs")
    with MessagesAPIServer(FunctionScenario(reader), context_window=WINDOW) as server:
        result = go(server, report, "nine", max_turns=9)
    steps = read_run("nine", store).steps
    refused = [s.step_id for s in steps if s.step_id.startswith("model:") and refused_as_too_long(s.result["message"])]
    assert refused == ["model:5", "model:9"], "step ids still count every model step"
    assert (result.status, result.text, result.turns) == ("completed", "Done: all eight parts read.", 9)
    run, _ = views_of(read_run("nine", store))
    assert run.turns == 9, "the run's header counts turns as the limit does"
    with MessagesAPIServer(FunctionScenario(reader), context_window=WINDOW) as server:
        short = go(server, report, "eight", max_turns=8)
    assert short.status == "interrupted" and "limit of 8 turns" in short.detail, short.detail
