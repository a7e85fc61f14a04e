"""The fake Messages API's new faults (x-should-retry, broken streams) and their JSON form."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import pytest

from tests.fakes import (
    Action,
    BrokenStream,
    Error,
    MessagesAPIProcess,
    ScriptedScenario,
    Stall,
    action_from_json,
    action_to_json,
    cut_off,
    redacted_thinking,
    refusal,
    reply,
    thinking,
    tool_result,
    tool_use,
    user,
)
from tests.fakes.sdk import (
    HEADERS,
    MODEL,
    cache_read,
    cache_written,
    create,
    history,
    raw_events,
    stream_final,
    text_of,
    thinking_of,
)


@pytest.mark.parametrize(("status", "should_retry", "requests"), [(500, False, 1), (529, False, 1), (400, True, 3), (500, True, 3)])
def test_x_should_retry_overrides_the_sdk_status_rule(serve: Any, status: int, should_retry: bool, requests: int) -> None:
    server, _ = serve([Error(status, should_retry=should_retry, retry_after_ms=1)])
    with anthropic.Anthropic(api_key="k", base_url=server.url, max_retries=2) as retrying:
        with pytest.raises(anthropic.APIStatusError) as err:
            create(retrying, [user("hi")])
    assert err.value.status_code == status
    assert err.value.response.headers["x-should-retry"] == ("true" if should_retry else "false")
    assert len(server.requests) == requests


def test_error_headers_combine(serve: Any) -> None:
    action = Error(429, retry_after="2", retry_after_ms=5, should_retry=True, headers={"x-extra": "1"})
    assert action.response_headers() == {"x-extra": "1", "retry-after": "2", "retry-after-ms": "5", "x-should-retry": "true"}
    assert "x-should-retry" not in Error(500).response_headers()


def test_an_empty_200_stream_has_no_events_and_the_sdk_fails_on_it(serve: Any) -> None:
    server, client = serve([BrokenStream()])
    assert raw_events(server, {"model": MODEL, "max_tokens": 10, "messages": [user("hi")]}) == []
    # SDK 2.14: iterating an empty stream ends quietly; asking for the message fails (an
    # AssertionError, not an APIError), so an agent must check it got a message at all.
    with client.messages.stream(model=MODEL, max_tokens=10, messages=[user("hi")]) as stream:
        assert list(stream) == []
        with pytest.raises(AssertionError):
            stream.get_final_message()
    with pytest.raises(json.JSONDecodeError):  # not streaming: an empty body, raw from the SDK
        create(client, [user("hi")])
    assert [(r.outcome, r.status) for r in server.requests] == [("broken_stream", 200)] * 3


def test_a_stream_without_message_stop_looks_complete_to_the_sdk(serve: Any) -> None:
    server, client = serve([BrokenStream("no_message_stop", reply("almost done", stop_reason="end_turn"))])
    events = raw_events(server, {"model": MODEL, "max_tokens": 100, "messages": [user("hi")]})
    assert [n for n, _ in events][-1] == "message_delta" and "message_stop" not in [n for n, _ in events]
    # SDK 2.14 hands back the accumulated message as if the stream had finished: only the
    # missing message_stop event tells them apart.
    kinds: list[str] = []
    with client.messages.stream(model=MODEL, max_tokens=100, messages=[user("hi")]) as stream:
        kinds = [e.type for e in stream]
        final = stream.get_final_message()
    assert text_of(final) == "almost done" and final.stop_reason == "end_turn" and "message_stop" not in kinds
    with pytest.raises(json.JSONDecodeError):  # not streaming: the JSON is cut in half
        create(client, [user("hi")])
    assert server.requests[1].usage is not None and server.requests[1].outcome == "broken_stream"


def test_a_stall_can_keep_its_stream_alive_with_nothing_but_pings(serve: Any) -> None:
    server, _ = serve([Stall(seconds=0.5, after=0, pings=0.1)])
    names: list[str] = []
    body = {"model": MODEL, "max_tokens": 10, "messages": [user("hi")], "stream": True}
    with httpx2.stream("POST", f"{server.url}/v1/messages", headers=HEADERS, json=body) as resp:
        assert resp.status_code == 200
        with pytest.raises(httpx2.RemoteProtocolError):  # dropped once the stall is over
            for line in resp.iter_lines():
                if line.startswith("event: "):
                    names.append(line.removeprefix("event: "))
    assert 3 <= len(names) <= 5 and set(names) == {"ping"}
    assert [(r.outcome, r.status) for r in server.requests] == [("stalled", 200)]


def test_broken_stream_shape_is_checked() -> None:
    with pytest.raises(ValueError, match="shape must be one of"):
        BrokenStream("half")


def test_new_actions_round_trip_through_json(tmp_path: Path) -> None:
    actions: list[Action] = [
        Error(500, should_retry=False),
        BrokenStream(),
        BrokenStream("no_message_stop", reply("x", usage=None)),
        Stall(seconds=1, after=0, pings=0.25, reply=reply("x")),
        refusal("no", category="bio", explanation="why"),
        cut_off(thinking("t" * 40), "x", after=3),
        reply(thinking("visible", signature="sig"), redacted_thinking("opaque"), tool_use("t", {}, id="toolu_01J")),
    ]
    scenario = ScriptedScenario([actions])
    loaded = ScriptedScenario.load(scenario.dump(tmp_path / "s.json"))
    assert loaded.turns == scenario.turns
    assert action_to_json(BrokenStream()) == {"type": "broken_stream", "shape": "empty", "reply": None}
    assert action_from_json({"type": "error", "status": 503, "should_retry": True}) == Error(503, should_retry=True)


def test_subprocess_mode_signs_caches_counts_and_breaks(tmp_path: Path) -> None:
    call = tool_use("read_file", {"path": "x"}, id="toolu_01SUB")
    scenario = ScriptedScenario([
        [Error(529, should_retry=False), reply(thinking("I will read x."), call)],
        [BrokenStream("no_message_stop"), refusal("No.", category="general_harms")],
    ])
    with MessagesAPIProcess(scenario, tmp_path, answering_model="claude-answering-1") as proc:
        with anthropic.Anthropic(api_key="k", base_url=proc.url, max_retries=3) as client:
            with pytest.raises(anthropic.OverloadedError):  # x-should-retry: false beats the SDK's 529 rule
                create(client, [user("go")])
            first = create(client, [user("go")], thinking={"type": "adaptive"}, max_tokens=2000, cache_control={"type": "ephemeral"})
            assert first.model == "claude-answering-1" and thinking_of(first).signature
            convo = [user("go"), history(first), user(tool_result(call["id"], "contents"))]
            n = client.messages.count_tokens(model=MODEL, messages=convo, thinking={"type": "adaptive"})  # type: ignore[arg-type]
            broken = stream_final(client, convo, thinking={"type": "adaptive"}, max_tokens=2000, cache_control={"type": "ephemeral"})[1]
            refused = create(client, convo, thinking={"type": "adaptive"}, max_tokens=2000, cache_control={"type": "ephemeral"})
            bad = json.loads(json.dumps(convo))
            bad[1]["content"][0]["thinking"] = "I will delete x."
            assert httpx2.post(f"{proc.url}/v1/messages", headers=HEADERS, json={"model": MODEL, "max_tokens": 2000, "messages": bad}).status_code == 400
        assert cache_read(broken) == cache_written(first)
        assert refused.stop_reason == "refusal" and refused.stop_details is not None
        assert cache_read(refused) + refused.usage.input_tokens + cache_written(refused) == n.input_tokens
        records = proc.wait_for(lambda rs: len(rs) == 6 and rs[-1].outcome == "rejected", timeout=5)
        assert [(r.endpoint, r.outcome) for r in records] == [
            ("messages", "error"), ("messages", "reply"), ("count_tokens", "counted"),
            ("messages", "broken_stream"), ("messages", "reply"), ("messages", "rejected")]
        assert records[2].usage == {"input_tokens": n.input_tokens}
        assert "cannot be modified" in str(records[-1].error_message)
