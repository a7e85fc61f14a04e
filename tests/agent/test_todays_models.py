"""The agent on today's Claude models, through the real SDK against the loopback Messages API.

The fake server signs the thinking blocks it emits and answers 400 when one comes back
altered, streams ``thinking_delta``/``signature_delta``, cuts replies at ``max_tokens``
(thinking counts), refuses with ``stop_details``, accounts the prompt cache per prefix and
TTL, and counts tokens. Proven here: thinking is requested adaptively and shown as it
streams, and goes back byte for byte; every stop reason has its own resumable outcome; each
request is marked for caching and the cost is computed from the usage the server reported;
budgets stop a run before a call and a resume raises them; ``x-should-retry`` is obeyed;
follow-ups and model changes are recorded steps, so the whole run replays with no request.
"""

from __future__ import annotations

import contextlib
import json
import warnings
from pathlib import Path
from typing import Any

import anthropic
import pytest

from nb_durable.agent import Observer, RunHooks, StepView
from nb_durable.agent.display.words import in_words_of
from nb_durable.agent.models.anthropic import AnthropicModel
from nb_durable.agent.models.retry import RetryPolicy
from nb_durable.agent.money.cost import Usage
from nb_durable.agent.money.prices import price_for
from nb_durable.agent.run.loop import continue_agent, resume_agent, run_agent
from nb_durable.agent.run.outcomes import AgentResult
from nb_durable.agent.run.session import EndpointChangedWarning
from nb_durable.core.runs import read_run
from nb_durable.errors import EXIT_CODES, ModelCallError, RunNotFinishedError
from tests.fakes import Error, MessagesAPIServer, reply, tool_use
from tests.fakes.messages_api.content import thinking, usage
from tests.fakes.messages_api.scenario import BrokenStream, cut_off, refusal

MODEL = "claude-test-1"
OTHER = "claude-test-2"
TASK = "Tidy up the notes."
RUN = "today"
RETRY = RetryPolicy(max_attempts=4, base_delay=0.01, jitter=0.0)


class Recorder(Observer):
    def __init__(self) -> None:
        self.steps: list[StepView] = []

    def step_changed(self, step: StepView) -> None:
        self.steps.append(step)


pytestmark = pytest.mark.usefixtures("no_ambient_anthropic")


def client(server: MessagesAPIServer) -> AnthropicModel:
    return AnthropicModel(api_key="test-key", base_url=server.url, timeout=10)


def store_of(workspace: Path) -> str:
    return str(workspace.parent / "runs")


def start(server: MessagesAPIServer, workspace: Path, **kwargs: Any) -> AgentResult:
    observer = kwargs.pop("observer", Observer())
    return run_agent(
        TASK,
        run_id=RUN,
        client=client(server),
        model=MODEL,
        store=store_of(workspace),
        workspace=workspace,
        retry=RETRY,
        hooks=RunHooks(sleep=lambda s: None, observer=observer),
        **kwargs,
    )


def resume(server: MessagesAPIServer, workspace: Path, **kwargs: Any) -> AgentResult:
    return resume_agent(
        RUN, client=client(server), store=store_of(workspace), hooks=RunHooks(sleep=lambda s: None), **kwargs
    )


def messages_requests(server: MessagesAPIServer) -> list[Any]:
    return [r for r in server.requests if r.endpoint == "messages"]


def test_thinking_is_requested_shown_as_it_streams_and_sent_back_unchanged(workspace: Path) -> None:
    scenario = [
        reply(thinking("I should look at the notes first."), tool_use("read_file", {"path": "notes.txt"}, id="toolu_1")),
        reply(thinking("The note says buy milk."), "The notes say: buy milk."),
    ]
    recorder = Recorder()
    with MessagesAPIServer(scenario) as server:
        result = start(server, workspace, effort="low", observer=recorder)
        sent = messages_requests(server)
        assert server.rejected == []
    assert result.status == "completed" and result.text == "The notes say: buy milk."
    first, second = (r.body for r in sent)
    assert first["thinking"] == {"type": "adaptive", "display": "summarized"}
    assert first["output_config"] == {"effort": "low"}
    # The thinking block goes back exactly as the server sent it, signature and all.
    emitted = sent[0].reply["content"][0]
    assert emitted["type"] == "thinking" and emitted["signature"]
    assert second["messages"][1]["content"][0] == emitted
    # Streamed in pieces into the live row, distinct from the answer text.
    live = [s.thinking for s in recorder.steps if s.step_id == "model:0" and s.state == "in_flight"]
    assert live and live[-1] == "I should look at the notes first." and "" not in live[-1:]
    done = [s for s in recorder.steps if s.step_id == "model:1" and s.state == "live"]
    assert done[-1].thinking == "The note says buy milk." and done[-1].output == "The notes say: buy milk."


def test_an_altered_thinking_block_is_refused_by_the_fake_so_a_pass_proves_none_was_sent(workspace: Path) -> None:
    # The same server rejects a tampered block: the previous test's clean pass means something.
    with MessagesAPIServer([reply(thinking("plan"), tool_use("list_dir", {}, id="toolu_1")), reply("done")]) as server:
        start(server, workspace)
        sent = messages_requests(server)[1].body
        tampered = json.loads(json.dumps(sent))
        tampered["messages"][1]["content"][0]["thinking"] = "a different plan"
        tampered.pop("cache_control")
        with pytest.raises(anthropic.BadRequestError):
            anthropic.Anthropic(api_key="k", base_url=server.url, max_retries=0).messages.create(**tampered)


def test_models_without_thinking_get_no_thinking_field(workspace: Path) -> None:
    with MessagesAPIServer([reply("done")]) as server:
        result = start(server, workspace, thinking="off")
        (sent,) = messages_requests(server)
    assert result.status == "completed"
    assert "thinking" not in sent.body and "output_config" not in sent.body


def test_a_turn_cut_off_while_thinking_is_truncated_and_a_resume_continues_it(workspace: Path) -> None:
    scenario = [[cut_off(thinking("a long plan " * 200), "never reached", after=50), reply("Finished.")]]
    with MessagesAPIServer(scenario) as server:
        first = start(server, workspace)
        assert first.status == "truncated" and first.text == ""
        assert "max_tokens" in first.detail and EXIT_CODES[first.status] == 5
        assert read_run(RUN, store_of(workspace)).summary.status == "truncated"
        second = resume(server, workspace)
        assert server.rejected == []
        asked = messages_requests(server)
    assert second.status == "completed" and second.text == "Finished."
    # Continued: the cut reply had nothing complete to keep, so the model is asked to go on.
    assert "cut off" in json.dumps(asked[-1].body["messages"][-1])
    steps = [s.step_id for s in read_run(RUN, store_of(workspace)).steps]
    assert steps == ["model:0", "settings:1", "model:1"]


def test_a_truncated_run_resumed_with_more_room_asks_the_turn_again(workspace: Path) -> None:
    scenario = [[cut_off("half of it " * 100, after=20), reply("All of it.")]]
    with MessagesAPIServer(scenario) as server:
        assert start(server, workspace).status == "truncated"
        again = resume(server, workspace, max_tokens=32_000)
        asked = messages_requests(server)
    assert again.status == "completed"
    assert asked[-1].body["max_tokens"] == 32_000
    assert asked[-1].body["messages"] == asked[0].body["messages"]  # the cut reply was dropped
    decision = read_run(RUN, store_of(workspace)).steps[1]
    assert decision.step_id == "settings:1"
    assert decision.result["changes"] == {"max_tokens": 32_000} and decision.result["action"] == "reask"
    assert [d.by for d in decision.decisions] == ["resume"]


def test_a_refusal_shows_its_details_and_a_resume_may_switch_model(workspace: Path) -> None:
    scenario = [[refusal(category="cyber", explanation="This looks like exploit development."), reply("Done safely.")]]
    with MessagesAPIServer(scenario) as server:
        refused = start(server, workspace)
        assert refused.status == "refused" and "cyber" in refused.detail and "exploit" in refused.detail
        moved = resume(server, workspace, model=OTHER)
        asked = messages_requests(server)
        # The whole run replays, model change included, with no request at all.
        count = len(server.requests)
        replayed = resume(server, workspace)
        assert len(server.requests) == count
    assert moved.status == "completed" and asked[-1].body["model"] == OTHER
    assert replayed.status == "completed" and replayed.live_steps == 0


def test_a_full_context_window_says_what_to_do(workspace: Path) -> None:
    with MessagesAPIServer([reply("partial", stop_reason="model_context_window_exceeded")]) as server:
        result = start(server, workspace)
    assert result.status == "context_full" and "Fork" in result.detail
    assert EXIT_CODES["context_full"] == 7


def test_every_request_is_cached_and_the_cost_comes_from_reported_usage(workspace: Path) -> None:
    turns = [
        reply(f"step {i}", tool_use("read_file", {"path": "notes.txt"}, id=f"toolu_{i}")) for i in range(19)
    ] + [reply("done")]
    with MessagesAPIServer(turns) as server:
        result = start(server, workspace, max_turns=25)
        sent = messages_requests(server)
    assert result.status == "completed" and len(sent) == 20
    assert all(r.body["cache_control"] == {"type": "ephemeral", "ttl": "5m"} for r in sent)
    reads = [int(r.usage["cache_read_input_tokens"]) for r in sent]
    assert reads[0] == 0 and all(n > 0 for n in reads[1:])
    price = price_for(MODEL)
    expected = sum(price.dollars(Usage.parse(r.usage)) for r in sent)
    assert result.cost.paid_dollars == pytest.approx(expected)
    assert result.cost.cache_saved_dollars > 0


def test_the_cache_can_be_turned_off_or_kept_an_hour(workspace: Path) -> None:
    with MessagesAPIServer([reply("a"), reply("b")]) as server:
        start(server, workspace, cache_ttl="off")
        assert "cache_control" not in messages_requests(server)[0].body
    with MessagesAPIServer([reply("a")]) as server:
        run_agent(TASK, run_id="hour", client=client(server), model=MODEL, store=store_of(workspace),
                  workspace=workspace, cache_ttl="1h")
        assert messages_requests(server)[0].body["cache_control"]["ttl"] == "1h"


def test_a_budget_stops_the_run_before_a_call_and_a_resume_raises_it(workspace: Path) -> None:
    # Each turn reports 10,000 output tokens ($0.10 at $10 per million); a call's worst case is
    # its input plus max_tokens=16,000 of output ($0.16). After two turns ($0.20 spent) a third
    # could take the run to $0.36: it is not made.
    spend = usage(input_tokens=100, output_tokens=10_000)
    turns = [reply(f"step {i}", tool_use("list_dir", {}, id=f"toolu_{i}"), usage=spend) for i in range(3)]
    with MessagesAPIServer([*turns, reply("done")]) as server:
        stopped = start(server, workspace, max_usd=0.355)
        counted = [r for r in server.requests if r.endpoint == "count_tokens"]
        assert stopped.status == "budget_exhausted" and "--max-usd" in stopped.detail
        assert "the run has spent $0.2004 of its budget of $0.355." in stopped.detail, stopped.detail  # as given, not $0.36
        assert EXIT_CODES["budget_exhausted"] == 8
        assert len(messages_requests(server)) == 2 and len(counted) == 3
        assert stopped.cost.paid_dollars == pytest.approx(0.2 + 200 * 2 / 1e6)
        raised = resume(server, workspace, max_usd=5.0)
        assert raised.status == "completed"
        before = len(server.requests)
        replay = resume(server, workspace)
        assert len(server.requests) == before  # neither a call nor a count on replay
    assert replay.status == "completed"
    decision = next(s for s in read_run(RUN, store_of(workspace)).steps if s.step_id.startswith("settings:"))
    assert decision.result["changes"] == {"max_usd": 5.0}


def test_a_second_resume_at_the_same_point_is_recorded_after_the_first_never_dropped(workspace: Path) -> None:
    # As above, a third call could take the run to $0.36: a resume to $0.36 is still short of
    # it and stops at the same point; the next resume's $5 is recorded there too, and counts.
    spend = usage(input_tokens=100, output_tokens=10_000)
    turns = [reply(f"step {i}", tool_use("list_dir", {}, id=f"toolu_{i}"), usage=spend) for i in range(3)]
    with MessagesAPIServer([*turns, reply("done")]) as server:
        assert start(server, workspace, max_usd=0.355).status == "budget_exhausted"
        assert resume(server, workspace, max_usd=0.36).status == "budget_exhausted"
        assert resume(server, workspace, max_usd=5.0).status == "completed"
        before = len(server.requests)
        assert resume(server, workspace).status == "completed"
        assert len(server.requests) == before  # the whole run, both changes in place, replays
    changes = [(s.step_id, s.result["changes"]) for s in read_run(RUN, store_of(workspace)).steps if s.step_id.startswith("settings:")]
    assert changes == [("settings:2", {"max_usd": 0.36}), ("settings:2:1", {"max_usd": 5.0})]


def test_a_follow_up_to_a_run_out_of_budget_is_recorded_and_sent_once_the_budget_allows(workspace: Path) -> None:
    spend = usage(input_tokens=100, output_tokens=10_000)
    turns = [reply(f"step {i}", tool_use("list_dir", {}, id=f"toolu_{i}"), usage=spend) for i in range(3)]
    with MessagesAPIServer([*turns, reply("done")]) as server:
        assert start(server, workspace, max_usd=0.355).status == "budget_exhausted"
        follow = continue_agent(RUN, "Also list the notes.", client=client(server), store=store_of(workspace))
        assert follow.status == "budget_exhausted"  # kept, not dropped: the budget still stops the call
        more = continue_agent(RUN, "And sort them.", client=client(server), store=store_of(workspace), max_usd=5.0)
        assert more.status == "completed"
        sent = messages_requests(server)[2].body["messages"][-1]["content"]  # turn 2's: the tool results, then both
    texts = [block["text"] for block in sent if block.get("type") == "text"]
    assert texts == ["Also list the notes.", "And sort them."]
    ids = [s.step_id for s in read_run(RUN, store_of(workspace)).steps if s.step_id.startswith(("settings:", "user:"))]
    assert ids == ["user:2", "settings:2", "user:2:1"]


def test_a_reply_holding_a_lone_surrogate_is_recorded_once_with_a_replacement_character(workspace: Path) -> None:
    # JSON may escape half a surrogate pair ("\\udce9", a broken endpoint or proxy); UTF-8 cannot
    # hold it, so the step could not be recorded and every resume paid for the call again.
    with MessagesAPIServer([reply(tool_use("read_file", {"path": "caf\udce9.txt"}, id="toolu_s")), reply("done \udce9")]) as server:
        result = start(server, workspace)
        asked = len(server.requests)
        assert resume(server, workspace).status == "completed" and len(server.requests) == asked
    assert result.status == "completed" and result.text == "done \ufffd"
    first = read_run(RUN, store_of(workspace)).steps[0].result["message"]["content"][0]
    assert first["input"] == {"path": "caf\ufffd.txt"}


def test_x_should_retry_decides_before_the_status(workspace: Path) -> None:
    with MessagesAPIServer([[Error(400, should_retry=True), reply("done")]]) as server:
        assert start(server, workspace).status == "completed"
    with MessagesAPIServer([[Error(529, should_retry=False), reply("never")]]) as server:
        with pytest.raises(ModelCallError):
            run_agent(TASK, run_id="no-retry", client=client(server), model=MODEL, store=store_of(workspace),
                      workspace=workspace, retry=RETRY, hooks=RunHooks(sleep=lambda s: None))
        assert len(messages_requests(server)) == 1


@pytest.mark.parametrize("shape", ["empty", "no_message_stop"])
def test_a_broken_stream_is_retried_never_recorded_as_an_answer(workspace: Path, shape: str) -> None:
    with MessagesAPIServer([[BrokenStream(shape), reply("whole answer")]]) as server:
        result = start(server, workspace)
    assert result.status == "completed" and result.text == "whole answer"
    (model_step,) = read_run(RUN, store_of(workspace)).steps
    assert len(model_step.attempts) == 1 and "message_stop" in model_step.attempts[0].message


def test_a_follow_up_is_a_recorded_step_and_the_whole_run_replays(workspace: Path) -> None:
    with MessagesAPIServer([reply("Read them."), reply("Also sorted them.")]) as server:
        assert start(server, workspace).status == "completed"
        followed = continue_agent(RUN, "Now sort them too.", client=client(server), store=store_of(workspace))
        asked = messages_requests(server)
        assert server.rejected == []
        count = len(server.requests)
        replay = resume(server, workspace)  # a finished run replays whole: nothing is sent
        assert len(server.requests) == count
    assert followed.status == "completed" and followed.text == "Also sorted them."
    last = asked[-1].body["messages"]
    assert last[-2] == {"role": "assistant", "content": [{"type": "text", "text": "Read them."}]}
    assert last[-1]["content"] == "Now sort them too."
    assert [s.step_id for s in read_run(RUN, store_of(workspace)).steps] == ["model:0", "user:1", "model:1"]
    assert replay.live_steps == 0 and replay.text == "Also sorted them."


def test_a_run_that_is_not_finished_cannot_take_a_follow_up(workspace: Path) -> None:
    with MessagesAPIServer([[Error(401)]]) as server:
        with pytest.raises(ModelCallError):
            start(server, workspace)
        with pytest.raises(RunNotFinishedError, match="is failed, not finished: resume it first") as refused:
            continue_agent(RUN, "and more", client=client(server), store=store_of(workspace))
    assert refused.value.outcome == "usage"  # a mistake in what was asked: the CLI exits 2, a cell shows the message
    assert in_words_of("notebook", str(refused.value)).endswith(f"resume it first with %agent_resume {RUN}, then continue it")
    assert f"resume it first with nb-durable resume {RUN}, then" in in_words_of("cli", str(refused.value))


def test_a_resume_against_another_endpoint_is_warned_about(workspace: Path) -> None:
    with MessagesAPIServer([cut_off("x " * 100, after=5), reply("done")]) as server:
        start(server, workspace)
        other = AnthropicModel(auth_token="tok", base_url=server.url + "/", timeout=10)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            resume_agent(RUN, client=other, store=store_of(workspace), hooks=RunHooks(sleep=lambda s: None))
    changed = [w for w in seen if issubclass(w.category, EndpointChangedWarning)]
    said = f"recorded against {server.url} with an API key and now goes to {server.url} with an auth token;"
    assert changed and said in str(changed[0].message) and "test-key" not in str(changed[0].message)
    settings = read_run(RUN, store_of(workspace)).summary.settings
    assert settings["endpoint"] == {"url": server.url, "credential": "api_key"}


def test_an_endpoint_without_credentials_is_said_in_words(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with MessagesAPIServer([cut_off("x " * 100, after=5), reply("done")]) as server:
        start(server, workspace)
        for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"):
            monkeypatch.delenv(name, raising=False)
        bare = AnthropicModel(base_url=server.url, timeout=10)
        with warnings.catch_warnings(record=True) as seen, contextlib.suppress(Exception):
            warnings.simplefilter("always")
            resume_agent(RUN, client=bare, store=store_of(workspace), hooks=RunHooks(sleep=lambda s: None))
    changed = [str(w.message) for w in seen if issubclass(w.category, EndpointChangedWarning)]
    assert changed and f"now goes to {server.url} with no credentials;" in changed[0], changed
    assert "none credentials" not in changed[0]


def test_an_api_error_that_echoes_the_key_is_recorded_masked(workspace: Path) -> None:
    key = "sk-ant-api03-" + "k" * 40
    echo = f"invalid request: x-api-key {key} is not allowed here"
    with MessagesAPIServer([[Error(400, message=echo)]]) as server:
        with pytest.raises(ModelCallError) as failed:
            run_agent(TASK, run_id=RUN, client=AnthropicModel(api_key=key, base_url=server.url, timeout=10),
                      model=MODEL, store=store_of(workspace), workspace=workspace)
    assert key not in str(failed.value)
    logged = (workspace.parent / "runs" / f"{RUN}.jsonl").read_text()
    assert key not in logged and "REDACTED" in logged
