"""Batch mode (``batch_api``): a run the Batches endpoint fails says it was the Batches endpoint.

A 529 or 500 creating the batch is retried by the retry policy; past it, the run stops,
resumable. Before, its error read as the model's own failure ("the Messages API answered 529
(overloaded): Overloaded"), naming no Message Batch: a user looked at the model, not at the
Batches endpoint, and could not tell a batch-mode stop from a normal call's.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from nb_durable.agent import RunHooks
from nb_durable.agent.models.anthropic import AnthropicModel
from nb_durable.agent.models.retry import RetryPolicy
from nb_durable.agent.run.loop import run_agent
from nb_durable.core.runs import read_summary
from nb_durable.errors import ModelCallError, RetriesExhaustedError, RunFailedError
from tests.fakes import FunctionScenario, MessagesAPIServer, reply

pytestmark = pytest.mark.usefixtures("no_ambient_anthropic")


@pytest.mark.parametrize(
    ("fault", "raised"),
    [((529, "overloaded_error"), RetriesExhaustedError), ((500, "api_error"), RetriesExhaustedError), ((400, "invalid_request_error"), ModelCallError)],
    ids=["529", "500", "400"],
)
def test_a_batch_create_that_keeps_failing_says_the_message_batch_in_the_run_s_error(
    tmp_path: Path, fault: tuple[int, str], raised: type[RunFailedError]
) -> None:
    store = str(tmp_path / "runs")
    with MessagesAPIServer(FunctionScenario(lambda r: reply("Done."))) as server:
        server.batches.create_faults = [fault] * 10
        with pytest.raises(raised) as caught:
            run_agent(
                "say hello", run_id="stormy", client=AnthropicModel(api_key="test-key", base_url=server.url, timeout=10),
                model="claude-test-1", store=store, workspace=tmp_path, hooks=RunHooks(sleep=lambda s: None),
                retry=RetryPolicy(max_attempts=3, base_delay=0.01, jitter=0.0), batch_api=True,
            )  # fmt: skip
        assert server.batches.created == [] and server.requests_to("messages") == []  # nothing made, nothing paid
    said = f"the Messages API {'refused the request to create a Message Batch with' if fault[0] == 400 else 'answered'} {fault[0]}"
    assert said in str(caught.value), caught.value
    if fault[0] != 400:
        assert f"answered {fault[0]} ({'overloaded' if fault[0] == 529 else fault[1]}) to create a Message Batch" in str(caught.value)
    assert "to create a Message Batch" in (read_summary("stormy", store).error or "")  # what show and runs say
