"""Fallback models on overload, through the real SDK against the loopback Messages API.

A 529 storm (HTTP 529, ``overloaded_error`` bodies, as the real API sends them) on the run's
model: after ``fallback_after`` failures the step moves on to the fallback model, recorded
once as a decision on the step; the run completes there, priced by the model that answered;
a process SIGKILLed after the switch resumes on the fallback without asking the overloaded
model again; and replay sends nothing.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from nb_durable.agent import RunHooks
from nb_durable.agent.models.anthropic import AnthropicModel
from nb_durable.agent.models.retry import RetryPolicy
from nb_durable.agent.run.loop import resume_agent, run_agent
from nb_durable.agent.run.outcomes import AgentResult
from nb_durable.core.runs import read_run
from tests import forkserver
from tests.conftest import subprocess_env
from tests.fakes import (
    BrokenStream,
    Delay,
    Error,
    MessagesAPIServer,
    OverloadStorm,
    StreamError,
    reply,
    tool_use,
)
from tests.fakes.messages_api.content import thinking
from tests.waiting import wait_until

MODEL = "claude-test-1"
FALLBACK = "claude-test-2"
LAST = "claude-test-3"
RUN = "storm"
RETRY = RetryPolicy(max_attempts=6, base_delay=0.01, jitter=0.0)


pytestmark = pytest.mark.usefixtures("no_ambient_anthropic")


def turns() -> list[Any]:
    return [
        reply(thinking("Look at the notes first."), tool_use("read_file", {"path": "notes.txt"}, id="toolu_a")),
        reply(thinking("Now say what they hold."), "The notes say: buy milk."),
    ]


def go(server: MessagesAPIServer, workspace: Path, **values: Any) -> AgentResult:
    return run_agent(
        "Read the notes.",
        run_id=RUN,
        client=AnthropicModel(api_key="test-key", base_url=server.url, timeout=10),
        model=MODEL,
        store=str(workspace.parent / "runs"),
        workspace=workspace,
        retry=RETRY,
        hooks=RunHooks(sleep=lambda s: None),
        **values,
    )


def asked(server: MessagesAPIServer) -> list[str]:
    return [str(r.body["model"]) for r in server.requests if r.endpoint == "messages"]


def test_a_storm_moves_the_run_to_the_fallback_once_and_replay_sends_nothing(workspace: Path) -> None:
    (workspace / "notes.txt").write_text("buy milk\n")
    storm = OverloadStorm(turns(), [MODEL])
    # The storm starts at the second turn: the first turn's thinking must not go to the fallback.
    first = {"done": False}

    def lasts(request: Any) -> bool:
        if request.turn == 0:
            return False
        first["done"] = True
        return True

    storm.lasts = lasts
    with MessagesAPIServer(storm) as server:
        result = go(server, workspace, fallback_models=(FALLBACK, LAST), fallback_after=3)
        models = asked(server)
        assert not server.rejected, server.rejected[0].error_message
        sent = [r for r in server.requests if r.endpoint == "messages"][-1].body
        count = len(server.requests)
        again = go(server, workspace, fallback_models=(FALLBACK, LAST), fallback_after=3)
        assert len(server.requests) == count  # replay sends nothing
    assert result.status == "completed" and result.text == "The notes say: buy milk."
    assert models == [MODEL, MODEL, MODEL, MODEL, FALLBACK]
    # The fallback was sent the conversation without the first model's thinking blocks.
    assert not any(b.get("type") == "thinking" for m in sent["messages"] for b in m["content"] if isinstance(m["content"], list))
    record = read_run(RUN, str(workspace.parent / "runs"))
    decisions = [(s.step_id, d.decision, d.by) for s in record.steps for d in s.decisions]
    assert decisions == [("model:1", f"model -> {FALLBACK} because overloaded: 3 x 529", "fallback")]
    model_step = next(s for s in record.steps if s.step_id == "model:1")
    assert [a.status for a in model_step.attempts] == [529, 529, 529]
    assert model_step.result["message"]["model"] == FALLBACK  # priced by the model that answered
    assert again.status == "completed" and again.live_steps == 0 and again.text == result.text


def test_the_switch_is_sticky_for_the_rest_of_the_run(workspace: Path) -> None:
    (workspace / "notes.txt").write_text("buy milk\n")
    with MessagesAPIServer(OverloadStorm(turns(), [MODEL])) as server:
        result = go(server, workspace, fallback_models=(FALLBACK,), fallback_after=2)
        models = asked(server)
    assert result.status == "completed"
    assert models == [MODEL, MODEL, FALLBACK, FALLBACK]  # turn 1 never asks the first model again


def test_without_a_fallback_the_storm_exhausts_the_retries(workspace: Path) -> None:
    from nb_durable.errors import RetriesExhaustedError

    with MessagesAPIServer(OverloadStorm(turns(), [MODEL])) as server, pytest.raises(RetriesExhaustedError):
        go(server, workspace)
    assert asked(server) == [MODEL] * RETRY.max_attempts


def test_a_fallback_after_more_failures_than_the_attempts_still_moves_when_they_run_out(workspace: Path) -> None:
    # --fallback-after 10 with six attempts a call: the attempts on the first model run out
    # first. The run moves on to the fallback then, as it was asked to, rather than failing
    # with a fallback never tried.
    (workspace / "notes.txt").write_text("buy milk\n")
    with MessagesAPIServer(OverloadStorm(turns(), [MODEL])) as server:
        result = go(server, workspace, fallback_models=(FALLBACK,), fallback_after=10)
        models = asked(server)
    assert result.status == "completed"
    assert models == [MODEL] * RETRY.max_attempts + [FALLBACK, FALLBACK]
    record = read_run(RUN, str(workspace.parent / "runs"))
    assert [d.decision for d in record.steps[0].decisions] == [f"model -> {FALLBACK} because overloaded: 6 x 529"]


def test_the_chain_goes_on_when_the_fallback_is_overloaded_too(workspace: Path) -> None:
    (workspace / "notes.txt").write_text("buy milk\n")
    with MessagesAPIServer(OverloadStorm(turns(), [MODEL, FALLBACK])) as server:
        result = go(server, workspace, fallback_models=(FALLBACK, LAST), fallback_after=1)
        models = asked(server)
    assert result.status == "completed" and models == [MODEL, FALLBACK, LAST, LAST]
    record = read_run(RUN, str(workspace.parent / "runs"))
    assert [d.decision for d in record.steps[0].decisions] == [
        f"model -> {FALLBACK} because overloaded: 1 x 529",
        f"model -> {LAST} because overloaded: 1 x 529",
    ]


@pytest.mark.slow(10)
def test_a_process_killed_after_the_switch_resumes_on_the_fallback(workspace: Path) -> None:
    (workspace / "notes.txt").write_text("buy milk\n")
    killed = {"once": False}
    script = turns()

    def fallback_answer(request: Any) -> Any:
        # The fallback's first answer is held back long enough for the kill to land in it.
        if not killed["once"]:
            return Delay(60, script[request.turn or 0])
        return script[request.turn or 0]

    from tests.fakes import FunctionScenario

    storm = OverloadStorm(FunctionScenario(fallback_answer), [MODEL], retry_after_ms=5)
    store = str(workspace.parent / "runs")
    with MessagesAPIServer(storm) as server:
        child = forkserver.Popen(
            [sys.executable, "-m", "nb_durable.cli", "run", "Read the notes.", "--run", RUN, "--model", MODEL,
             "--workspace", str(workspace), "--store", store, "--fallback-model", FALLBACK, "--fallback-after", "2"],
            env=subprocess_env(ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="test-key"),
        )  # fmt: skip
        try:
            wait_until(lambda: FALLBACK in asked(server), "the fallback asked", timeout=60)
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=30)
        finally:
            if child.poll() is None:
                child.kill()
        killed["once"] = True
        before = asked(server)
        result = resume_agent(
            RUN,
            client=AnthropicModel(api_key="test-key", base_url=server.url, timeout=10),
            store=store,
            hooks=RunHooks(sleep=lambda s: None),
        )
        after = asked(server)[len(before) :]
        count = len(server.requests)
        replayed = resume_agent(RUN, client=AnthropicModel(api_key="test-key", base_url=server.url), store=store)
        assert len(server.requests) == count
    assert before == [MODEL, MODEL, FALLBACK]
    assert result.status == "completed" and after == [FALLBACK, FALLBACK]  # never the first model again
    record = read_run(RUN, store)
    assert [d.decision for s in record.steps for d in s.decisions] == [
        f"model -> {FALLBACK} because overloaded: 2 x 529"
    ]
    assert replayed.status == "completed" and replayed.live_steps == 0


def test_a_refused_turn_is_asked_again_of_the_fallback_and_the_decision_names_the_category(workspace: Path) -> None:
    def answer(request: Any) -> Any:
        if request.body["model"] == MODEL:
            return refusal(category="cyber", explanation="This looks like exploit development.")
        return reply("Done safely.")

    from tests.fakes import FunctionScenario
    from tests.fakes.messages_api.scenario import refusal

    with MessagesAPIServer(FunctionScenario(answer)) as server:
        result = go(server, workspace, fallback_models=(FALLBACK,))
        models = asked(server)
        count = len(server.requests)
        again = go(server, workspace, fallback_models=(FALLBACK,))
        assert len(server.requests) == count  # replay sends nothing
    assert result.status == "completed" and result.text == "Done safely." and models == [MODEL, FALLBACK]
    record = read_run(RUN, str(workspace.parent / "runs"))
    point = next(s for s in record.steps if s.step_id == "settings:1")
    assert [(d.decision, d.by) for d in point.decisions] == [(f"model -> {FALLBACK} because refused: category cyber", "fallback")]
    assert point.result["changes"] == {"model": FALLBACK} and point.result["action"] == "reask"
    assert again.status == "completed" and again.live_steps == 0


def test_without_a_fallback_a_refusal_stays_an_outcome_for_a_person(workspace: Path) -> None:
    from tests.fakes.messages_api.scenario import refusal

    with MessagesAPIServer([refusal(category="cyber")]) as server:
        result = go(server, workspace)
    assert result.status == "refused" and "cyber" in result.detail


@pytest.mark.parametrize("fallbacks", [(), (FALLBACK,)])
def test_a_tool_call_in_a_refused_reply_never_runs(workspace: Path, fallbacks: tuple[str, ...]) -> None:
    """A reply stopped by ``refusal`` in the middle of a tool call ran the call (here, an edit
    of the workspace), and the refusal was neither the outcome nor asked of the fallback."""
    from tests.fakes import FunctionScenario
    from tests.fakes.messages_api.scenario import refusal

    def answer(request: Any) -> Any:
        if request.body["model"] == MODEL:
            return refusal("Writing it.", tool_use("write_file", {"path": "exploit.py", "content": "x"}, id="toolu_w"), category="cyber")
        return reply("Done safely.")

    with MessagesAPIServer(FunctionScenario(answer)) as server:
        result = go(server, workspace, fallback_models=fallbacks)
    assert not (workspace / "exploit.py").exists(), "the refused reply's tool call ran"
    steps = [s.step_id for s in read_run(RUN, str(workspace.parent / "runs")).steps]
    assert not [s for s in steps if s.startswith("tool:")], steps
    if fallbacks:
        assert (result.status, result.text, asked(server)) == ("completed", "Done safely.", [MODEL, FALLBACK])
    else:
        assert result.status == "refused" and "cyber" in result.detail


def test_a_refused_reply_whose_tool_call_an_earlier_version_ran_replays_as_recorded(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The log records that the call ran: a replay that held it back would diverge from it.
    from nb_durable.agent.run import session
    from tests.fakes import FunctionScenario
    from tests.fakes.messages_api.scenario import refusal

    def answer(request: Any) -> Any:
        if request.turn == 0:
            return refusal("Writing it.", tool_use("write_file", {"path": "notes.txt", "content": "x"}, id="toolu_w"), category="cyber")
        return reply("Wrote it.")

    with MessagesAPIServer(FunctionScenario(answer)) as server:
        with monkeypatch.context() as earlier:  # the loop as it was: any reply with tool calls ran them
            earlier.setattr(session, "ending_outcome", lambda stop, unknown=False: "completed")
            first = go(server, workspace)
        asked = len(server.requests)
        again = go(server, workspace)
    assert (first.status, first.text) == ("completed", "Wrote it.")
    assert (again.status, again.text, again.live_steps, len(server.requests)) == ("completed", "Wrote it.", 0, asked)


def test_show_and_export_give_the_switch_its_decision_row(workspace: Path) -> None:
    (workspace / "notes.txt").write_text("buy milk\n")
    store = str(workspace.parent / "runs")
    with MessagesAPIServer(OverloadStorm(turns(), [MODEL])) as server:
        go(server, workspace, fallback_models=(FALLBACK,), fallback_after=2)
    shown = forkserver.run([sys.executable, "-m", "nb_durable.cli", "show", RUN, "--store", store],
                           capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert f"decision  model switch       switched to {FALLBACK}, overloaded: 2 x 529" in shown.stdout, shown.stdout
    out = workspace.parent / "run.ipynb"
    exported = forkserver.run([sys.executable, "-m", "nb_durable.cli", "export", RUN, "--store", store, "-o", str(out)],
                              capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert exported.returncode == 0, exported.stderr
    assert f"**Decision:** switched to {FALLBACK}, overloaded: 2 x 529" in out.read_text()


def test_a_budget_prices_a_call_at_the_dearest_model_it_may_fall_back_to(workspace: Path) -> None:
    # The run's model costs $1 per million output tokens, its fallback $100: a call's worst case
    # (16,000 tokens out) is $0.016 on the run's model and $1.60 on the fallback. A storm would
    # move the step to the fallback, past a $0.50 budget: the call is not made.
    from nb_durable.agent.money.prices import Price

    (workspace / "notes.txt").write_text("buy milk\n")
    prices = {MODEL: Price.simple(0.2, 1.0), FALLBACK: Price.simple(20.0, 100.0)}
    with MessagesAPIServer(OverloadStorm(turns(), [MODEL])) as server:
        result = run_agent(
            "Read the notes.", run_id=RUN, client=AnthropicModel(api_key="test-key", base_url=server.url, timeout=10),
            model=MODEL, store=str(workspace.parent / "runs"), workspace=workspace, retry=RETRY,
            hooks=RunHooks(sleep=lambda s: None, prices=prices), fallback_models=(FALLBACK,), fallback_after=3, max_usd=0.5,
        )  # fmt: skip
        assert asked(server) == []
    assert result.status == "budget_exhausted" and "up to $1.6" in result.detail, result.detail
    assert result.cost.paid_dollars <= 0.5


def test_a_reply_named_by_a_gateway_is_priced_at_the_fallback_its_step_moved_to(workspace: Path) -> None:
    # The gateway names every reply "my-gateway-sonnet", which no table knows: the turn the storm
    # moved to the fallback was priced at the run's first model, by the session, `show` and the index.
    from tests.agent.test_cost import CHEAP, DEAR, priced_at_the_models_asked

    (workspace / "notes.txt").write_text("buy milk\n")
    gateway = [reply(*r.content, stop_reason=r.stop_reason, model="my-gateway-sonnet") for r in turns()]
    storm = OverloadStorm(gateway, [CHEAP], lasts=lambda request: request.turn == 1)
    store = str(workspace.parent / "runs")
    with MessagesAPIServer(storm) as server:
        result = run_agent(
            "Read the notes.", run_id=RUN, client=AnthropicModel(api_key="test-key", base_url=server.url, timeout=10),
            model=CHEAP, store=store, workspace=workspace, retry=RETRY, hooks=RunHooks(sleep=lambda s: None),
            fallback_models=(DEAR,), fallback_after=2,
        )  # fmt: skip
        assert asked(server) == [CHEAP, CHEAP, CHEAP, DEAR]
    assert result.status == "completed"
    priced_at_the_models_asked(RUN, store, result.cost, {"model:0": CHEAP, "model:1": DEAR})


STORM_CHILD = """
import sys
from pathlib import Path
from nb_durable.agent import RunHooks
from nb_durable.agent.models.anthropic import AnthropicModel
from nb_durable.agent.models.retry import RetryPolicy
from nb_durable.agent.run.loop import run_agent
url, store, workspace, model, fallback = sys.argv[1:]
run_agent("Read the notes.", run_id="storm", client=AnthropicModel(api_key="test-key", base_url=url, timeout=90),
          model=model, store=store, workspace=Path(workspace), retry=RetryPolicy(max_attempts=8, base_delay=0.01, jitter=0.0),
          fallback_models=(fallback,), fallback_after=3)
"""


@pytest.mark.slow(10)
@pytest.mark.parametrize(
    ("failure", "after_resume", "switch"),
    [
        # Overloaded mid-stream (HTTP 200, then an overloaded_error event): each counted toward
        # the switch live, none on resume, so the resumed step asked the model three more times.
        (StreamError("overloaded_error"), [MODEL, FALLBACK], "3 x 529"),
        # A stream cut short (no status, incomplete_stream): never an overload live, yet two
        # "connection" failures on resume, so the resumed step moved on at its next 529.
        (BrokenStream("empty"), [MODEL, MODEL, MODEL, FALLBACK], "3 x 529"),
    ],
    ids=["overloaded-mid-stream", "stream-cut-short"],
)
def test_a_step_killed_mid_storm_counts_its_recorded_failures_as_it_counted_them_live(
    workspace: Path, failure: Any, after_resume: list[str], switch: str
) -> None:
    from tests.fakes import FunctionScenario

    (workspace / "notes.txt").write_text("buy milk\n")
    script, killed, stormy = turns(), {"yet": False}, {"n": 0}

    def answer(request: Any) -> Any:
        if request.body["model"] != MODEL:
            return script[request.turn or 0]
        stormy["n"] += 1
        if stormy["n"] <= 2:
            return failure
        # The first session's third attempt is held in flight until the kill lands in it.
        return Error(529, retry_after_ms=5) if killed["yet"] else Delay(60, Error(529))

    store = str(workspace.parent / "runs")
    with MessagesAPIServer(FunctionScenario(answer)) as server:
        child = forkserver.Popen(
            [sys.executable, "-c", STORM_CHILD, server.url, store, str(workspace), MODEL, FALLBACK], env=subprocess_env()
        )
        try:
            wait_until(lambda: len(asked(server)) == 3, "the third attempt in flight", timeout=60)
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=30)
        finally:
            if child.poll() is None:
                child.kill()
        killed["yet"] = True
        assert [a.status for a in read_run(RUN, store).steps[0].attempts] == [200 if isinstance(failure, StreamError) else None] * 2
        before = len(asked(server))
        result = resume_agent(RUN, client=AnthropicModel(api_key="test-key", base_url=server.url, timeout=10), store=store)
        after = asked(server)[before:]
    assert result.status == "completed" and after == [*after_resume, FALLBACK]
    record = read_run(RUN, store)
    assert [d.decision for s in record.steps for d in s.decisions] == [f"model -> {FALLBACK} because overloaded: {switch}"]


def test_attempts_an_older_version_recorded_count_toward_a_switch_as_they_always_did(tmp_path: Path) -> None:
    # Its attempts keep no error type: a 529 or 503 counts, and so does a failure with no status.
    from nb_durable.agent.run.fallback import Fallback
    from nb_durable.core.context import current_step
    from nb_durable.core.log import EventLog, run_step
    from nb_durable.errors import TransientModelError

    def fails() -> None:
        step = current_step()
        assert step is not None
        for attempt, status in enumerate((529, 503, 429), 1):
            step.record_attempt_failed(attempt, "TransientModelError", status=status, delay=0.0)  # as older versions wrote
        raise TransientModelError("the stream ended before the answer was complete")  # recorded with no status

    with EventLog("old", str(tmp_path / "runs")) as log:
        log.start_run({})
        with pytest.raises(TransientModelError):
            run_step(log, "model:0", fails, effect="idempotent")
        record = log.record_at(0)
    assert [a.error_type for a in record.attempts] == [None] * 4
    assert Fallback.of(MODEL, (FALLBACK,), 3, record).failures == ["529", "503", "connection"]


@pytest.mark.parametrize(("retry_after_ms", "moved_after"), [(120_000, 1), (5, 3)])
def test_a_server_asking_for_a_long_wait_moves_the_step_on_at_once(workspace: Path, retry_after_ms: int, moved_after: int) -> None:
    # 529 with retry-after-ms 120 s, longer than the policy's longest backoff (60 s): with a
    # fallback left, the step moves on instead of waiting two minutes three times; a short
    # retry-after is waited as before, and the switch comes after fallback_after failures.
    (workspace / "notes.txt").write_text("buy milk\n")
    waits: list[float] = []
    with MessagesAPIServer(OverloadStorm(turns(), [MODEL], retry_after_ms=retry_after_ms)) as server:
        result = run_agent(
            "Read the notes.", run_id=RUN, client=AnthropicModel(api_key="test-key", base_url=server.url, timeout=10),
            model=MODEL, store=str(workspace.parent / "runs"), workspace=workspace, retry=RETRY,
            hooks=RunHooks(sleep=waits.append), fallback_models=(FALLBACK,), fallback_after=3,
        )  # fmt: skip
        models = asked(server)
    assert result.status == "completed"
    assert models == [MODEL] * moved_after + [FALLBACK, FALLBACK]
    assert waits == [retry_after_ms / 1000] * (moved_after - 1)
    record = read_run(RUN, str(workspace.parent / "runs"))
    assert [d.decision for d in record.steps[0].decisions] == [f"model -> {FALLBACK} because overloaded: {moved_after} x 529"]


def test_without_a_fallback_a_long_retry_after_is_waited_as_the_server_asked(workspace: Path) -> None:
    from nb_durable.errors import RetriesExhaustedError

    waits: list[float] = []
    with MessagesAPIServer(OverloadStorm(turns(), [MODEL], retry_after_ms=120_000)) as server, pytest.raises(RetriesExhaustedError):
        run_agent(
            "Read the notes.", run_id=RUN, client=AnthropicModel(api_key="test-key", base_url=server.url, timeout=10),
            model=MODEL, store=str(workspace.parent / "runs"), workspace=workspace, retry=RETRY, hooks=RunHooks(sleep=waits.append),
        )  # fmt: skip
    assert waits == [120.0] * (RETRY.max_attempts - 1)
