"""Batch mode (``batch_api``) with fallback models: what counts toward a switch, live and resumed alike.

A batch-mode step's request goes in a Message Batch first; only a result the batch could not
give is asked of the model directly. The calls on the way into the batch (its create, the list
a resume looks through) go to the Batches endpoint, on behalf of every run gathered into that
batch, whatever models they ask: their failures say nothing of this run's model, and a switch
would only send the request to the same endpoint again for a worse model. So they never count
toward the step's switch; the direct call's own failures do. A process killed right after
such a failure is recorded resumes counting exactly that, as the live step did: before, the
live step ignored the batch's failures and a resume counted them, so the same storm moved a
resumed run to its fallback and left a live one on its model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nb_durable.agent import RunHooks
from nb_durable.agent.models.anthropic import AnthropicModel
from nb_durable.agent.models.retry import RetryPolicy
from nb_durable.agent.run.batch_step import BATCH_BY, GATHERING, IN_BATCH
from nb_durable.agent.run.fallback import SWITCHED_BY, Fallback
from nb_durable.agent.run.loop import resume_agent, run_agent
from nb_durable.core.runs import read_run
from nb_durable.errors import SimulatedCrash
from tests.fakes import Error, FunctionScenario, MessagesAPIServer, RecordedRequest, reply

MODEL = "claude-test-1"
FALLBACK = "claude-test-2"
RETRY = RetryPolicy(max_attempts=6, base_delay=0.01, jitter=0.0)
OVERLOADED = (529, "overloaded_error")

pytestmark = pytest.mark.usefixtures("no_ambient_anthropic")


def overloaded_then_answered(direct_529s: int) -> Any:
    """The batch's result errors (overloaded); asked directly, the model is overloaded ``direct_529s``
    times, then answers."""
    asked = {"n": 0}

    def answer(request: RecordedRequest) -> Any:
        if request.endpoint == "batch_request":
            return Error(529)
        if request.body["model"] == MODEL:
            asked["n"] += 1
            if asked["n"] <= direct_529s:
                return Error(529)
        return reply(f"Done, by {request.body['model']}.")

    return answer


def crash_at_wait(n: int) -> Any:
    """A retry's wait that kills the process at its ``n``-th time: the failure before it is recorded."""
    waits = {"n": 0}

    def sleep(seconds: float) -> None:
        waits["n"] += 1
        if waits["n"] == n:
            raise SimulatedCrash("killed while waiting to retry")

    return sleep


def go(server: MessagesAPIServer, store: str, workspace: Path, sleep: Any = lambda s: None) -> Any:
    return run_agent(
        "say hello", run_id="stormy", client=AnthropicModel(api_key="test-key", base_url=server.url, timeout=10),
        model=MODEL, store=store, workspace=workspace, retry=RETRY, hooks=RunHooks(sleep=sleep), batch_api=True,
        fallback_models=(FALLBACK,), fallback_after=3,
    )  # fmt: skip


def direct(server: MessagesAPIServer) -> list[str]:
    return [str(r.body["model"]) for r in server.requests_to("messages")]


@pytest.mark.parametrize("crash", [False, True], ids=["live", "killed-after-the-second-create-529"])
def test_a_batch_create_overloaded_never_counts_toward_a_switch_live_or_resumed(tmp_path: Path, crash: bool) -> None:
    """Two 529s creating the batch, its result errored, then one 529 asked directly: one
    overload of the model, so the step stays on it. Before, a resume after the second create
    529 counted three and moved to the fallback, where the live step did not."""
    store = str(tmp_path / "runs")
    with MessagesAPIServer(FunctionScenario(overloaded_then_answered(direct_529s=1))) as server:
        server.batches.create_faults = [OVERLOADED, OVERLOADED]
        if crash:
            with pytest.raises(SimulatedCrash):
                go(server, store, tmp_path, sleep=crash_at_wait(2))
            assert [a.status for a in read_run("stormy", store).steps[0].attempts] == [529, 529]
            assert server.batches.created == [] and direct(server) == []  # refused: no batch made, nothing asked
            result = resume_agent("stormy", client=AnthropicModel(api_key="test-key", base_url=server.url), store=store, hooks=RunHooks(sleep=lambda s: None))
        else:
            result = go(server, store, tmp_path)
        assert result.status == "completed" and result.text == f"Done, by {MODEL}."
        assert direct(server) == [MODEL, MODEL]  # the 529 retried on the model, never the fallback
        assert len(server.batches.created) == 1
    step = read_run("stormy", store).steps[0]
    assert [a.status for a in step.attempts] == [529, 529, 529]
    assert not any(d.by == SWITCHED_BY for d in step.decisions)
    said = [d.decision for d in step.decisions if d.by == BATCH_BY]
    assert said[-2:] == [IN_BATCH + server.batches.created[0].id, "batch errored: asked directly"]


def test_the_direct_calls_overloads_switch_the_step_live_and_resumed_alike(tmp_path: Path) -> None:
    """The fallback still works in batch mode: three 529s of the direct call move the step on,
    and a process killed after two of them resumes counting those two, not the batch's."""
    outcomes = []
    for crash in (False, True):
        store = str(tmp_path / f"runs-{crash}")
        with MessagesAPIServer(FunctionScenario(overloaded_then_answered(direct_529s=6))) as server:
            server.batches.create_faults = [OVERLOADED]
            if crash:  # the first wait follows the create's 529, the third the direct call's second
                with pytest.raises(SimulatedCrash):
                    go(server, store, tmp_path, sleep=crash_at_wait(3))
                assert direct(server) == [MODEL, MODEL]
                result = resume_agent("stormy", client=AnthropicModel(api_key="test-key", base_url=server.url), store=store, hooks=RunHooks(sleep=lambda s: None))
            else:
                result = go(server, store, tmp_path)
            assert result.status == "completed" and result.text == f"Done, by {FALLBACK}."
            outcomes.append(direct(server))
        step = read_run("stormy", store).steps[0]
        assert [d.decision for d in step.decisions if d.by == SWITCHED_BY] == [f"model -> {FALLBACK} because overloaded: 3 x 529"]
    assert outcomes == [[MODEL, MODEL, MODEL, FALLBACK]] * 2


def test_a_resumed_step_counts_only_the_failures_of_its_model_calls(tmp_path: Path) -> None:
    """The one rule, read off the step's record (as the live step reads its own): failures
    between a ``gathering a batch`` decision and the batch's next decision are the Batches
    endpoint's; those of the model asked directly count, if they say it is overloaded."""
    from nb_durable.core.context import current_step
    from nb_durable.core.log import EventLog, run_step

    def fails() -> None:
        step = current_step()
        assert step is not None
        log, at = step.log, step.step_id

        def failed(status: int, error_type: str) -> None:
            step.record_attempt_failed(step.attempts + 1, "TransientModelError", status=status, delay=0.0, error_type=error_type)

        log.record_decision(at, GATHERING, by=BATCH_BY)
        failed(529, "overloaded_error")  # the create
        log.record_decision(at, IN_BATCH + "msgbatch_1", by=BATCH_BY)
        log.record_decision(at, "batch errored: asked directly", by=BATCH_BY)
        failed(503, "api_error")  # the model, asked directly
        failed(500, "api_error")  # a failure, but no overload
        failed(529, "overloaded_error")
        raise RuntimeError("killed")  # recorded as no overload

    with EventLog("counted", str(tmp_path / "runs")) as log:
        log.start_run({})
        with pytest.raises(RuntimeError):
            run_step(log, "model:0", fails, effect="idempotent")
        record = log.record_at(0)
    assert Fallback.of(MODEL, (FALLBACK,), 3, record).failures == ["503", "529"]
