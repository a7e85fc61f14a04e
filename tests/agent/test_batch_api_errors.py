"""Batch mode (``batch_api``): what a run says and keeps when the Batches endpoint fails it.

A 529 or 500 creating the batch is retried by the retry policy; past it, the run stops,
resumable. Before, its error read as the model's own failure ("the Messages API answered 529
(overloaded): Overloaded"), naming no Message Batch: a user looked at the model, not at the
Batches endpoint, and could not tell a batch-mode stop from a normal call's.

A batch its reader may not read (a rejected or unentitled key: 401, 403) is still there, and
still answers: the step fails, resumable, and its resume with the right key polls it. Before,
it was taken for gone: the step recorded ``batch unreadable: asked directly`` for good, and
every resume paid the full price for a normal call while the batch's answer, paid too, was
never read. Only a batch the API says is not there (404) falls back.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from nb_durable.agent import RunHooks
from nb_durable.agent.models.anthropic import AnthropicModel
from nb_durable.agent.models.retry import RetryPolicy
from nb_durable.agent.run.batch_step import BATCH_BY, GATHERING, IN_BATCH
from nb_durable.agent.run.loop import resume_agent, run_agent
from nb_durable.agent.run.stopping import RunStopped, StopSignal
from nb_durable.core.runs import read_run, read_summary
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


def stopped_while_polled(server: MessagesAPIServer, store: str, workspace: Path) -> str:
    """A batch-mode run stopped while its batch (held by the fake) is polled: the batch's id."""
    stop = StopSignal()

    server.once_batch_polled(stop.request)
    with pytest.raises(RunStopped):
        run_agent(
            "say hello", run_id="held", client=AnthropicModel(api_key="good-key", base_url=server.url, timeout=10),
            model="claude-test-1", store=store, workspace=workspace, hooks=RunHooks(sleep=lambda s: None, stop=stop),
            batch_api=True,
        )  # fmt: skip
    (batch,) = server.batches.created
    return batch.id


def said(store: str) -> list[str]:
    return [d.decision for d in read_run("held", store).steps[0].decisions if d.by == BATCH_BY]


def test_a_batch_its_reader_may_not_read_is_polled_again_by_a_resume_with_the_right_key(tmp_path: Path) -> None:
    store = str(tmp_path / "runs")
    with MessagesAPIServer(FunctionScenario(lambda r: reply("Done.")), batch_delay=float("inf"), api_key="good-key") as server:
        batch_id = stopped_while_polled(server, store, tmp_path)
        server.batches.delay = 0.0
        with pytest.raises(ModelCallError, match=r"401 .*to read a Message Batch|to read a Message Batch with 401") as caught:
            resume_agent("held", store=store, client=AnthropicModel(api_key="wrong-key", base_url=server.url), hooks=RunHooks(sleep=lambda s: None))
        assert "resume_agent('held')" in str(caught.value)
        assert said(store) == [GATHERING, IN_BATCH + batch_id]  # no fallback recorded: the batch still answers
        assert server.requests_to("messages") == []
        result = resume_agent("held", store=store, client=AnthropicModel(api_key="good-key", base_url=server.url), hooks=RunHooks(sleep=lambda s: None))
        assert result.status == "completed" and result.text == "Done."
        assert len(server.batches.created) == 1 and server.requests_to("messages") == []  # polled, paid once, at half
        assert read_run("held", store).steps[0].result.get("batch", {}).get("id") == batch_id


def test_a_batch_the_api_no_longer_has_falls_back_to_one_normal_call(tmp_path: Path) -> None:
    store = str(tmp_path / "runs")
    with MessagesAPIServer(FunctionScenario(lambda r: reply("Done.")), batch_delay=float("inf"), api_key="good-key") as server:
        batch_id = stopped_while_polled(server, store, tmp_path)
        server.batches._batches.clear()  # gone: deleted, or past the API's keeping
        result = resume_agent("held", store=store, client=AnthropicModel(api_key="good-key", base_url=server.url), hooks=RunHooks(sleep=lambda s: None))
        assert result.status == "completed" and len(server.requests_to("messages")) == 1
        assert said(store) == [GATHERING, IN_BATCH + batch_id, "batch unreadable: asked directly"]


def test_a_batch_whose_polls_fail_is_polled_on_and_the_listing_says_so(tmp_path: Path) -> None:
    """529s reading the batch are polled through (it still answers; nothing is sent again), and
    meanwhile the listings say the last poll failed, and how, beside the batch it waits on.
    Before, they said only "in Message Batch ...": a Batches endpoint down for hours looked
    like a batch slow to end."""
    store = str(tmp_path / "runs")
    with MessagesAPIServer(FunctionScenario(lambda r: reply("Done.")), batch_delay=float("inf")) as server:
        server.batches.retrieve_faults = [(529, "overloaded_error")] * 1000
        done: list[Any] = []

        def go() -> None:
            done.append(run_agent(
                "say hello", run_id="polled", client=AnthropicModel(api_key="test-key", base_url=server.url, timeout=10),
                model="claude-test-1", store=store, workspace=tmp_path, hooks=RunHooks(sleep=lambda s: None), batch_api=True,
            ))  # fmt: skip

        thread = threading.Thread(target=go)
        thread.start()
        server.wait_for(lambda rs: sum(r.endpoint == "batch_retrieve" for r in rs) >= 2)
        deadline = time.monotonic() + 10
        while "failed" not in str(read_summary("polled", store).awaiting) and time.monotonic() < deadline:
            time.sleep(0.05)
        awaiting = read_summary("polled", store).awaiting
        batch_id = server.batches.created[0].id
        assert awaiting is not None and awaiting.what.startswith(f"Message Batch {batch_id}")
        assert "its last poll failed: 529 overloaded_error" in awaiting.what, awaiting
        server.batches.retrieve_faults.clear()
        server.batches.delay = 0.0
        thread.join(30)
        assert done and done[0].status == "completed"
        assert len(server.batches.created) == 1 and server.requests_to("messages") == []
        assert read_summary("polled", store).awaiting is None
