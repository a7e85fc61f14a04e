"""``resume --model`` on a run that failed inside a model call: the failed turn itself is asked
of the new model, through the real SDK against the loopback Messages API.

A run stopped by a model that answers 404 (a wrong name: "check the model name", its error
says) or by a storm that outlasted its whole fallback chain holds its model step unfinished.
A resume that names another model recorded the change only at the point after that step, so
the step was asked of the same model again: the 404 came back on every resume the error
advised, and a storm's last fallback was asked again whatever the person chose.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from nb_durable.agent import RunHooks
from nb_durable.agent.display.export import notebook_of
from nb_durable.agent.display.words import in_words_of
from nb_durable.agent.models.anthropic import AnthropicModel
from nb_durable.agent.models.retry import RetryPolicy
from nb_durable.agent.run.loop import resume_agent, run_agent
from nb_durable.core.runs import read_run
from nb_durable.errors import ModelCallError, RetriesExhaustedError
from tests import forkserver
from tests.fakes import Error, FunctionScenario, MessagesAPIServer, reply, tool_use

WRONG, MODEL, FALLBACK = "claude-nope", "claude-test-1", "claude-test-2"
RUN = "renamed"
QUICK = RetryPolicy(max_attempts=2, base_delay=0.01, jitter=0.0)

pytestmark = pytest.mark.usefixtures("no_ambient_anthropic")


def asked(server: MessagesAPIServer, since: int = 0) -> list[str]:
    return [str(r.body["model"]) for r in server.requests[since:] if r.endpoint == "messages"]


def two_turns(request: Any) -> Any:
    return [reply(tool_use("read_file", {"path": "notes.txt"}, id="toolu_a")), reply("The notes say: milk.")][request.turn or 0]


def test_a_failed_turn_is_asked_of_the_model_a_resume_names(workspace: Path) -> None:
    store = str(workspace.parent / "runs")

    def answer(request: Any) -> Any:
        return Error(404) if request.body["model"] == WRONG else two_turns(request)

    with MessagesAPIServer(FunctionScenario(answer)) as server:
        client = AnthropicModel(api_key="test-key", base_url=server.url, timeout=10)
        with pytest.raises(ModelCallError, match="check the model name"):
            run_agent("Read the notes.", run_id=RUN, client=client, model=WRONG, store=store, workspace=workspace)
        before = len(server.requests)
        result = resume_agent(RUN, client=client, store=store, model=MODEL)
        after = asked(server, before)
        count = len(server.requests)
        again = resume_agent(RUN, client=client, store=store)
        assert len(server.requests) == count  # replay sends nothing
    assert (result.status, result.text) == ("completed", "The notes say: milk.")
    assert after == [MODEL, MODEL]  # the failed turn too, never the wrong name again
    record = read_run(RUN, store)
    decisions = [(s.step_id, d.decision, d.by) for s in record.steps for d in s.decisions]
    assert decisions == [("model:0", f"model -> {MODEL} because asked on resume", "resume")]
    assert again.status == "completed" and again.live_steps == 0
    shown = forkserver.run([sys.executable, "-m", "nb_durable.cli", "show", RUN, "--store", store],
                           capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert f"decision  model switch       switched to {MODEL}, asked on resume" in shown.stdout, shown.stdout


def test_a_storm_past_the_chain_resumes_on_the_model_the_person_names(workspace: Path) -> None:
    # Every model of the chain overloaded: the step moved to the fallback and failed there.
    # A resume with no --model stays on the fallback (the switch sticks); one that names the
    # first model again asks it, the failed turn included, and the chain starts over from it.
    store = str(workspace.parent / "runs")
    storm = {"on": True}

    def answer(request: Any) -> Any:
        return Error(529) if storm["on"] else two_turns(request)

    with MessagesAPIServer(FunctionScenario(answer)) as server:
        client = AnthropicModel(api_key="test-key", base_url=server.url, timeout=10)
        go: dict[str, Any] = {"client": client, "store": store, "hooks": RunHooks(sleep=lambda s: None)}
        with pytest.raises(RetriesExhaustedError) as failed:
            run_agent("Read the notes.", run_id=RUN, model=MODEL, workspace=workspace, retry=QUICK,
                      fallback_models=(FALLBACK,), fallback_after=2, **go)  # fmt: skip
        assert asked(server) == [MODEL, MODEL, FALLBACK, FALLBACK]
        # It said "the model kept failing after 2 attempts": not which, nor that the chain was spent.
        said = str(failed.value)
        assert f"{FALLBACK}, the last of its fallback models, kept failing after 2 attempts, as {MODEL} did" in said, said
        assert f"(it goes on with {FALLBACK}, where the fallback left it), or resume it with another model: " in said, said
        # How, in each front end's words: the flag, the magic's flag, the Python argument.
        assert said.endswith(f"resume_agent({RUN!r}, model=M)."), said
        assert in_words_of("cli", said).endswith(f"nb-durable resume {RUN} --model M."), in_words_of("cli", said)
        assert in_words_of("notebook", said).endswith(f"%agent_resume {RUN} --model M."), in_words_of("notebook", said)
        # An export is read in a notebook: its result cell says it with the magic, not in Python.
        cells = "".join("".join(c.source) for c in notebook_of(read_run(RUN, store)).cells)
        assert f"resume it with %agent_resume {RUN}:" in cells and "resume_agent(" not in cells, cells[-600:]
        storm["on"] = False
        before = len(server.requests)
        result = resume_agent(RUN, model=MODEL, **go)
        after = asked(server, before)
    assert result.status == "completed" and after == [MODEL, MODEL]
    (step, *_) = read_run(RUN, store).steps
    assert [d.decision for d in step.decisions] == [
        f"model -> {FALLBACK} because overloaded: 2 x 529",
        f"model -> {MODEL} because asked on resume",
    ]


def test_a_model_a_resume_names_counts_its_own_failures_toward_the_next_switch(workspace: Path) -> None:
    # Still overloaded: the failures of the fallback before the resume are not the named model's,
    # so it gets its own two before the step moves on again.
    store = str(workspace.parent / "runs")
    with MessagesAPIServer(FunctionScenario(lambda request: Error(529))) as server:
        client = AnthropicModel(api_key="test-key", base_url=server.url, timeout=10)
        go: dict[str, Any] = {"client": client, "store": store, "hooks": RunHooks(sleep=lambda s: None)}
        with pytest.raises(RetriesExhaustedError):
            run_agent("Read the notes.", run_id=RUN, model=MODEL, workspace=workspace, retry=QUICK,
                      fallback_models=(FALLBACK,), fallback_after=2, **go)  # fmt: skip
        before = len(server.requests)
        with pytest.raises(RetriesExhaustedError):
            resume_agent(RUN, model=MODEL, **go)
        assert asked(server, before) == [MODEL, MODEL, FALLBACK, FALLBACK]
    (step, *_) = read_run(RUN, store).steps
    assert [d.decision for d in step.decisions][1:] == [
        f"model -> {MODEL} because asked on resume",
        f"model -> {FALLBACK} because overloaded: 2 x 529",
    ]


def test_a_failed_turn_asked_of_a_dearer_model_is_priced_at_it_before_it_is_made(workspace: Path) -> None:
    # $1 per million output tokens on the run's model, $100 on the one the resume names: the
    # turn's worst case (16,000 tokens out) is $1.60 there, past a $0.50 budget. The failed
    # turn, being in the log, was asked of the dearer model with no count at all.
    from nb_durable.agent.money.prices import Price

    store = str(workspace.parent / "runs")
    prices = {MODEL: Price.simple(0.2, 1.0), FALLBACK: Price.simple(20.0, 100.0)}
    broken = {"on": True}

    def answer(request: Any) -> Any:
        return Error(500) if broken["on"] else two_turns(request)

    with MessagesAPIServer(FunctionScenario(answer)) as server:
        client = AnthropicModel(api_key="test-key", base_url=server.url, timeout=10)
        go: dict[str, Any] = {"client": client, "store": store, "hooks": RunHooks(sleep=lambda s: None, prices=prices)}
        with pytest.raises(RetriesExhaustedError):
            run_agent("Read the notes.", run_id=RUN, model=MODEL, workspace=workspace, retry=QUICK, max_usd=0.5, **go)
        broken["on"] = False
        before = len(server.requests)
        stopped = resume_agent(RUN, model=FALLBACK, **go)
        assert asked(server, before) == []
        assert stopped.status == "budget_exhausted" and "up to $1.6" in stopped.detail, stopped.detail
        raised = resume_agent(RUN, model=FALLBACK, max_usd=5.0, **go)
        assert raised.status == "completed" and asked(server, before) == [FALLBACK, FALLBACK]


class _DiesAtItsFirstCall(AnthropicModel):
    """The process dies as the call leaves, after the switch was recorded."""

    def create(self, request: Any, on_text: Any = None, on_thinking: Any = None) -> dict[str, Any]:
        from nb_durable.errors import SimulatedCrash

        raise SimulatedCrash(f"killed asking {request['model']}")


def test_a_resume_killed_after_naming_the_model_goes_on_with_it(workspace: Path) -> None:
    from nb_durable.errors import SimulatedCrash

    store = str(workspace.parent / "runs")

    def answer(request: Any) -> Any:
        return Error(404) if request.body["model"] == WRONG else two_turns(request)

    with MessagesAPIServer(FunctionScenario(answer)) as server:
        client = AnthropicModel(api_key="test-key", base_url=server.url, timeout=10)
        with pytest.raises(ModelCallError):
            run_agent("Read the notes.", run_id=RUN, client=client, model=WRONG, store=store, workspace=workspace)
        with pytest.raises(SimulatedCrash, match=f"killed asking {MODEL}"):
            resume_agent(RUN, client=_DiesAtItsFirstCall(api_key="test-key", base_url=server.url), store=store, model=MODEL)
        before = len(server.requests)
        result = resume_agent(RUN, client=client, store=store)  # no --model this time
        after = asked(server, before)
    assert result.status == "completed" and after == [MODEL, MODEL]
    (step, *_) = read_run(RUN, store).steps
    assert [d.decision for d in step.decisions] == [f"model -> {MODEL} because asked on resume"]
