"""The durable loop on the real SDK against the loopback Messages API: every scenario the API can
put an agent through, and what the server saw.

``run_agent`` drives ``AnthropicModel`` (the real ``anthropic`` SDK over TCP, streaming and
not) against ``MessagesAPIServer``. Proven here: multi-turn tool use; streamed text reaching
the observer in pieces while only the final message is recorded; 529 and 429 storms waited
out for exactly the server's ``retry-after``/``retry-after-ms`` (the loop's ``sleep`` records
the waits instead of sleeping), each attempt recorded; a mid-stream ``overloaded_error``
(HTTP 200, then ``event: error``) retried; 500s retried with exponential backoff; a 401 that
ends the run as failed with a message saying what to fix, then resumes after the fix (from
the environment, with only the run id) without asking a completed turn again; an unknown
tool and malformed tool input answered with ``is_error`` results the model can act on. In
every scenario the server never received an unanswered tool_use (``server.rejected`` is
empty) and never a request for a turn it had already completed (``repeats == 0``).
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from nb_durable.agent import Observer, RunHooks, StepView
from nb_durable.agent.models.anthropic import AnthropicModel
from nb_durable.agent.models.retry import RetryPolicy
from nb_durable.agent.run.loop import AgentResult, resume_agent, run_agent
from nb_durable.core.events import AttemptFailed
from nb_durable.core.runs import read_run
from nb_durable.errors import ModelCallError
from tests.fakes import Error, MessagesAPIServer, ScriptedScenario, StreamError, cut_off, reply, tool_use

MODEL = "claude-test-1"  # made up: real names near end of life raise DeprecationWarning
TASK = "Tidy up the notes."
RUN = "api"
RETRY = RetryPolicy(max_attempts=5, base_delay=0.01, jitter=0.0)


class Recorder(Observer):
    def __init__(self) -> None:
        self.steps: list[StepView] = []

    def step_changed(self, step: StepView) -> None:
        self.steps.append(step)

    def of(self, step_id: str) -> list[StepView]:
        return [s for s in self.steps if s.step_id == step_id]


pytestmark = pytest.mark.usefixtures("no_ambient_anthropic")






def agent(
    server: MessagesAPIServer,
    workspace: Path,
    *,
    stream: bool = True,
    waits: list[float] | None = None,
    observer: Observer | None = None,
) -> AgentResult:
    """run_agent on the real SDK against ``server``; waits are recorded, not slept."""
    sleeps = waits if waits is not None else []
    return run_agent(
        TASK,
        run_id=RUN,
        client=AnthropicModel(api_key="test-key", base_url=server.url, stream=stream, timeout=10),
        model=MODEL,
        store=str(workspace.parent / "runs"),
        workspace=workspace,
        retry=RETRY,
        hooks=RunHooks(sleep=sleeps.append, observer=observer or Observer()),
    )


def assert_clean(server: MessagesAPIServer) -> None:
    """No request carried an unanswered tool_use; no completed turn was requested again."""
    assert not server.rejected, [(r.turn, r.status, r.error_message) for r in server.rejected]
    repeats = {t: s.repeats for t, s in server.turn_stats().items() if s.repeats}
    assert not repeats, f"turns requested again after they completed: {repeats}"


def attempts(workspace: Path, step_id: str) -> list[tuple[int, int | None, float | None]]:
    """The recorded failed attempts of a step: (attempt, HTTP status, wait before the next)."""
    events = read_run(RUN, workspace.parent / "runs").events
    return [(e.attempt, e.status, e.delay) for e in events if isinstance(e, AttemptFailed) and e.step == step_id]


def last_tool_results(server: MessagesAPIServer) -> dict[str, dict[str, Any]]:
    """The tool_result blocks of the last request, by tool_use id."""
    return {b["tool_use_id"]: b for b in server.requests[-1].messages[-1]["content"]}


@pytest.mark.parametrize("stream", [True, False])
def test_multi_turn_tool_use(serve: Any, workspace: Path, stream: bool) -> None:
    server = serve(
        reply("Looking.", tool_use("list_dir", {"path": "."}, id="toolu_ls")),
        reply(
            tool_use("read_file", {"path": "notes.txt"}, id="toolu_rd"),
            tool_use("write_file", {"path": "todo.txt", "content": "milk\n"}, id="toolu_wr"),
        ),
        reply("Wrote todo.txt with one item."),
    )
    result = agent(server, workspace, stream=stream)
    assert (result.status, result.text, result.turns) == ("completed", "Wrote todo.txt with one item.", 3)
    assert (result.live_steps, result.replayed_steps) == (6, 0)
    assert (workspace / "todo.txt").read_text() == "milk\n"
    assert [r.stream for r in server.requests] == [stream] * 3
    assert [r.turn for r in server.requests] == [0, 1, 2]
    second = server.requests[1].messages
    assert second[1]["content"][-1] == {"type": "tool_use", "id": "toolu_ls", "name": "list_dir", "input": {"path": "."}}
    assert second[2]["content"] == [{"type": "tool_result", "tool_use_id": "toolu_ls", "content": "notes.txt", "is_error": False}]
    answers = last_tool_results(server)
    assert answers["toolu_rd"]["content"].startswith("remember the milk") and not answers["toolu_rd"]["is_error"]
    assert answers["toolu_wr"]["content"].startswith("Wrote todo.txt") and not answers["toolu_wr"]["is_error"]
    record = read_run(RUN, workspace.parent / "runs")
    assert [s.step_id for s in record.steps] == [
        "model:0", "tool:0:0:toolu_ls", "model:1", "tool:1:0:toolu_rd", "tool:1:1:toolu_wr", "model:2",
    ]  # fmt: skip
    assert record.steps[0].result["request_id"] == server.requests[0].request_id
    stats = server.turn_stats()
    assert [(stats[t].requests, stats[t].completed) for t in range(3)] == [(1, True), (1, True), (1, False)]
    assert_clean(server)


def test_streamed_text_reaches_the_observer_in_pieces_and_only_the_final_message_is_recorded(
    serve: Any, workspace: Path
) -> None:
    answer = "The notes ask for one thing: remember the milk. Nothing else needs doing today."
    server = serve(reply(answer))
    seen = Recorder()
    result = agent(server, workspace, observer=seen)
    assert result.text == answer
    streamed = [s.output for s in seen.of("model:0") if s.state == "in_flight" and s.output]
    assert len(streamed) > 3, streamed
    assert all(b.startswith(a) and len(b) > len(a) for a, b in itertools.pairwise(streamed)), streamed
    assert streamed[-1] == answer
    assert [s.state for s in seen.of("model:0")][-1] == "live"
    record = read_run(RUN, workspace.parent / "runs")
    assert [e.kind for e in record.events] == ["run_started", "step_started", "step_completed", "run_finished"]
    message = record.steps[0].result["message"]
    assert [b["text"] for b in message["content"]] == [answer]
    assert message["usage"]["output_tokens"] > 1  # the final usage, not the stream's first count
    lines = (workspace.parent / "runs" / f"{RUN}.jsonl").read_text().splitlines()
    holding = [line.split('"kind":"')[1].split('"')[0] for line in lines if "milk. Nothing" in line]
    assert holding == ["step_completed", "run_finished"], "streamed text was recorded apart from the final message"
    assert_clean(server)


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize(
    ("storm", "expected_waits"),
    [
        ([Error(529, retry_after="2"), Error(529, retry_after_ms=250), Error(529, retry_after="1")], [2.0, 0.25, 1.0]),
        ([Error(429, retry_after="3"), Error(429, retry_after_ms=1500), Error(429, retry_after="0")], [3.0, 1.5, 0.0]),
    ],
    ids=["529", "429"],
)
def test_overload_and_rate_limit_storms_wait_exactly_what_the_server_asks(
    serve: Any, workspace: Path, stream: bool, storm: list[Error], expected_waits: list[float]
) -> None:
    server = serve(
        reply(tool_use("list_dir", {"path": "."}, id="toolu_ls")),
        [*storm, reply("Done after the storm.")],
    )
    waits: list[float] = []
    seen = Recorder()
    result = agent(server, workspace, stream=stream, waits=waits, observer=seen)
    assert (result.status, result.text) == ("completed", "Done after the storm.")
    assert waits == expected_waits
    status = storm[0].status
    assert attempts(workspace, "model:1") == [(n + 1, status, w) for n, w in enumerate(expected_waits)]
    retrying = [(s.attempt, s.max_attempts) for s in seen.of("model:1") if s.state == "retrying"]
    assert retrying == [(1, 5), (2, 5), (3, 5)]
    assert [r.turn for r in server.requests] == [0, 1, 1, 1, 1], "turn 0 was asked once, turn 1 until it worked"
    assert [r.status for r in server.requests_at(1)] == [status] * 3 + [200]
    assert_clean(server)


def test_a_mid_stream_overloaded_error_is_retried(serve: Any, workspace: Path) -> None:
    server = serve([StreamError("overloaded_error", partial_text="Half an ans"), reply("A whole answer.")])
    waits: list[float] = []
    seen = Recorder()
    result = agent(server, workspace, waits=waits, observer=seen)
    assert result.text == "A whole answer."
    first = server.requests[0]
    assert (first.status, first.outcome, first.error_type) == (200, "stream_error", "overloaded_error")
    assert waits == [0.01]  # no retry-after on a stream: the policy's backoff
    assert attempts(workspace, "model:0") == [(1, 200, 0.01)]
    states = [s.state for s in seen.of("model:0")]
    assert "retrying" in states and states[-1] == "live"
    assert "Half an ans" not in (workspace.parent / "runs" / f"{RUN}.jsonl").read_text()
    assert_clean(server)


@pytest.mark.parametrize("stream", [True, False])
def test_500s_then_success_back_off_exponentially(serve: Any, workspace: Path, stream: bool) -> None:
    server = serve([Error(500), Error(500), reply("Recovered.")])
    waits: list[float] = []
    result = agent(server, workspace, stream=stream, waits=waits)
    assert result.text == "Recovered."
    assert waits == [0.01, 0.02]
    assert attempts(workspace, "model:0") == [(1, 500, 0.01), (2, 500, 0.02)]
    assert [r.status for r in server.requests] == [500, 500, 200]
    assert_clean(server)


def test_a_401_fails_clearly_then_resumes_after_the_fix_without_repeating_turns(
    serve: Any, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = serve(
        reply("Looking.", tool_use("list_dir", {"path": "."}, id="toolu_ls")),
        Error(401, message="invalid x-api-key"),
    )
    waits: list[float] = []
    with pytest.raises(ModelCallError) as info:
        agent(server, workspace, waits=waits)
    message = str(info.value)
    assert info.value.status == 401
    assert "401" in message and "check ANTHROPIC_API_KEY" in message and "Then resume it with resume_agent('api');" in message
    assert "test-key" not in message
    assert waits == [], "a 401 is not retried"
    summary = read_run(RUN, workspace.parent / "runs").summary
    assert summary.status == "failed" and "ANTHROPIC_API_KEY" in (summary.error or "")
    assert [r.turn for r in server.requests] == [0, 1]

    # The fix: a good key in the environment. Turn 0 would now be refused, so asking it again fails.
    server.scenario = ScriptedScenario([Error(400, message="turn 0 asked again"), reply("Listed: notes.txt.")])
    monkeypatch.setenv("ANTHROPIC_API_KEY", "fixed-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    result = resume_agent(RUN, store=str(workspace.parent / "runs"))
    assert (result.status, result.text) == ("completed", "Listed: notes.txt.")
    assert (result.replayed_steps, result.live_steps) == (2, 1)
    assert [r.turn for r in server.requests] == [0, 1, 1]
    assert server.requests[-1].headers["authorization"] == "Bearer fixed-key"
    assert server.requests[-1].messages[-1]["content"][0]["tool_use_id"] == "toolu_ls"
    assert read_run(RUN, workspace.parent / "runs").summary.status == "completed"
    assert_clean(server)


def test_an_unknown_tool_gets_an_error_result_the_model_can_act_on(serve: Any, workspace: Path) -> None:
    server = serve(
        reply(tool_use("teleport", {"to": "mars"}, id="toolu_tp")),
        reply("I will use list_dir instead.", tool_use("list_dir", {}, id="toolu_ls")),
        reply("The workspace holds notes.txt."),
    )
    result = agent(server, workspace)
    assert result.status == "completed"
    answer = server.requests[1].messages[-1]["content"][0]
    assert answer["tool_use_id"] == "toolu_tp" and answer["is_error"] is True
    assert "no tool named 'teleport'" in answer["content"]
    assert "list_dir, read_file, run_bash, write_file" in answer["content"]
    assert last_tool_results(server)["toolu_ls"] == {
        "type": "tool_result", "tool_use_id": "toolu_ls", "content": "notes.txt", "is_error": False,
    }  # fmt: skip
    assert_clean(server)


def test_malformed_tool_input_gets_error_results_and_runs_nothing(serve: Any, workspace: Path) -> None:
    # The package's own tools go out strict: true, so the API holds types, required and extra
    # fields to the schema; what strict mode cannot enforce (a maximum, an exclusive minimum)
    # is still checked here, and goes back to the model as an error result.
    server = serve(
        reply(
            tool_use("run_bash", {"command": "touch ran.txt", "timeout": 9999}, id="toolu_long"),
            tool_use("run_bash", {"command": "touch ran.txt", "timeout": 0}, id="toolu_zero"),
        ),
        reply("Fixed my inputs.", tool_use("write_file", {"path": "x.txt", "content": "ok\n"}, id="toolu_good")),
        reply("Done."),
    )
    result = agent(server, workspace)
    assert result.status == "completed"
    answers = {b["tool_use_id"]: b for b in server.requests[1].messages[-1]["content"]}
    assert all(a["is_error"] is True for a in answers.values())
    assert "Invalid input for run_bash" in answers["toolu_long"]["content"]
    assert "9999 is above the maximum 600" in answers["toolu_long"]["content"]
    assert "0 is not above 0" in answers["toolu_zero"]["content"]
    assert all(t["strict"] is True for t in server.requests[0].body["tools"])
    assert not (workspace / "ran.txt").exists()
    assert (workspace / "x.txt").read_text() == "ok\n"
    assert_clean(server)


@pytest.mark.parametrize("stream", [True, False])
def test_a_tool_call_cut_off_at_max_tokens_mid_input_is_answered_so_and_the_run_goes_on(serve: Any, workspace: Path, stream: bool) -> None:
    # Streamed, the API sends the input's JSON up to the cut: unfinished. It was read with
    # json.loads and raised a bare ValueError (no run, no step) at every resume.
    big = {"path": "todo.txt", "content": "milk\n" * 400}
    server = serve(cut_off("Writing it.", tool_use("write_file", big, id="toolu_cut"), after=40),
                   reply(tool_use("write_file", {"path": "todo.txt", "content": "milk\n"}, id="toolu_small")),
                   reply("Wrote todo.txt."))  # fmt: skip
    result = agent(server, workspace, stream=stream)
    assert (result.status, result.text) == ("completed", "Wrote todo.txt."), result.detail
    assert (workspace / "todo.txt").read_text() == "milk\n", "the cut-off call never ran"
    told = server.requests[1].messages[-1]["content"][0]
    assert told["is_error"] and "was cut off at max_tokens" in told["content"] and "did not run" in told["content"]
    assert_clean(server)
