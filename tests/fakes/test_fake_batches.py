"""The fake's Message Batches endpoints, driven by the real SDK: its types parse every answer."""

from __future__ import annotations

from typing import Any

import anthropic
import httpx2
import pytest

from tests.fakes.messages_api import Action, Error, Expired, FunctionScenario, reply
from tests.fakes.sdk import HEADERS, MODEL, body_of


def _params(text: str = "hi", **more: Any) -> dict[str, Any]:
    return {"model": MODEL, "max_tokens": 100, "messages": [{"role": "user", "content": text}], **more}


def _requests(*ids: str) -> list[dict[str, Any]]:
    return [{"custom_id": i, "params": _params(i)} for i in ids]


def test_a_batch_ends_after_its_delay_and_each_request_gets_its_outcome(serve: Any) -> None:
    answers: dict[str, Action] = {"a": reply("answer a"), "b": Error(529), "c": Expired()}
    server, client = serve(FunctionScenario(lambda r: answers[r.body["messages"][0]["content"]]), batch_delay=float("inf"))
    batch = client.messages.batches.create(requests=_requests("a", "b", "c"))
    assert batch.processing_status == "in_progress"
    assert batch.request_counts.processing == 3 and batch.results_url is None
    assert client.messages.batches.retrieve(batch.id).processing_status == "in_progress"
    with pytest.raises(anthropic.AnthropicError, match="results_url"):
        client.messages.batches.results(batch.id)
    assert server.requests_to("batch_request") == []  # nothing processed while it runs

    server.batches.delay = 0.0
    ended = client.messages.batches.retrieve(batch.id)
    assert ended.processing_status == "ended" and ended.ended_at is not None
    counts = ended.request_counts
    assert (counts.processing, counts.succeeded, counts.errored, counts.expired) == (0, 1, 1, 1)
    results = {r.custom_id: r.result for r in client.messages.batches.results(batch.id)}
    assert results["a"].type == "succeeded" and results["a"].message.content[0].text == "answer a"
    assert results["b"].type == "errored" and results["b"].error.error.type == "overloaded_error"
    assert results["c"].type == "expired"
    assert len(server.batches.created) == 1 and server.batches.request_count == 3
    assert [r.outcome for r in server.requests_to("batch_request")] == ["reply", "error", "expired"]


def test_a_batch_is_refused_as_the_real_api_refuses_it(serve: Any) -> None:
    server, client = serve([reply("x")])
    server.batches.max_requests = 2

    def refused(requests: Any) -> str:
        with pytest.raises(anthropic.BadRequestError) as e:
            client.messages.batches.create(requests=requests)
        return str(body_of(e.value)["error"]["message"])

    assert "pattern" in refused([{"custom_id": "run:1/model:0", "params": _params()}])
    assert "pattern" in refused([{"custom_id": "x" * 65, "params": _params()}])
    assert "unique" in refused(_requests("a", "a"))
    assert "at most 2" in refused(_requests("a", "b", "c"))
    assert "at least 1" in refused([])
    assert "stream" in refused([{"custom_id": "a", "params": _params(stream=True)}])
    assert "requests.0.params.max_tokens" in refused([{"custom_id": "a", "params": {"model": MODEL, "messages": [{"role": "user", "content": "x"}]}}])
    assert "Extra inputs" in refused([{"custom_id": "a", "params": _params(), "extra": 1}])
    assert server.batches.created == []
    with pytest.raises(anthropic.NotFoundError):
        client.messages.batches.retrieve("msgbatch_unknown")
    assert httpx2.post(f"{server.url}/v1/messages/batches", json={"requests": _requests("a")}).status_code == 401


def test_batches_list_newest_first_and_cancel_ends_a_batch_after_canceling(serve: Any) -> None:
    server, client = serve([reply("x")], batch_delay=float("inf"))
    first = client.messages.batches.create(requests=_requests("a"))
    second = client.messages.batches.create(requests=_requests("a", "b"))
    page = client.messages.batches.list(limit=1)
    assert [b.id for b in page.data] == [second.id] and page.has_more
    assert [b.id for b in client.messages.batches.list(limit=5, after_id=second.id).data] == [first.id]
    assert [b.id for b in client.messages.batches.list()] == [second.id, first.id]
    canceled = client.messages.batches.cancel(first.id)  # the real API answers canceling; the end comes later
    assert canceled.processing_status == "canceling" and canceled.cancel_initiated_at is not None
    assert canceled.request_counts.processing == 1 and canceled.request_counts.canceled == 0
    ended = client.messages.batches.retrieve(first.id)
    assert ended.processing_status == "ended" and ended.request_counts.canceled == 1
    assert [r.result.type for r in client.messages.batches.results(first.id)] == ["canceled"]
    assert httpx2.get(f"{server.url}/v1/messages/batches/{second.id}/results", headers=HEADERS).status_code == 400
