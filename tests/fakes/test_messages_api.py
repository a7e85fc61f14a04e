"""The fake Messages API, driven by the real anthropic SDK (httpx2) over loopback TCP."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import pytest

from tests.fakes.messages_api import (
    STOP_REASONS,
    Delay,
    Drop,
    Error,
    FunctionScenario,
    MessagesAPIProcess,
    MessagesAPIServer,
    RecordedRequest,
    Reply,
    ScriptedScenario,
    StreamError,
    action_from_json,
    action_to_json,
    assistant,
    read_request_log,
    reply,
    text,
    tool_result,
    tool_use,
    usage,
    user,
)
from tests.fakes.sdk import HEADERS, MODEL, body_of, create, history, raw_post, stream_final, text_of, tool_of

# --- replies ----------------------------------------------------------------------------------


def test_create_rebuilds_the_scripted_message(serve: Any) -> None:
    call = tool_use("read_file", {"path": "notes/a.txt", "lines": [1, 2], "opts": {"strip": True}})
    server, client = serve([reply("I will read it.", call, usage=usage(120, 34, cache_read_input_tokens=100))])

    msg = create(client, [user("read the notes")])

    assert [b.type for b in msg.content] == ["text", "tool_use"]
    assert text_of(msg) == "I will read it."
    called = tool_of(msg, 1)
    assert (called.id, called.name, called.input) == (call["id"], "read_file", call["input"])
    assert call["id"].startswith("toolu_")
    assert msg.stop_reason == "tool_use" and msg.stop_sequence is None
    assert msg.model == MODEL and msg.role == "assistant" and msg.id.startswith("msg_")
    assert (msg.usage.input_tokens, msg.usage.output_tokens) == (120, 34)
    assert (msg.usage.cache_read_input_tokens, msg.usage.cache_creation_input_tokens) == (100, 0)
    [rec] = server.requests
    assert msg._request_id == rec.request_id and rec.request_id.startswith("req_")
    assert (rec.method, rec.path, rec.turn, rec.attempt, rec.stream) == ("POST", "/v1/messages", 0, 1, False)
    assert (rec.outcome, rec.status, rec.rejected) == ("reply", 200, False)
    assert rec.headers["authorization"] == "Bearer test-key"  # SDK 2.x: the key as a Bearer token
    assert rec.body["messages"] == [user("read the notes")] and rec.body["max_tokens"] == 100
    assert rec.reply is not None and rec.reply["content"] == msg.model_dump(mode="json", exclude_none=True)["content"]


def test_stream_rebuilds_the_same_message_as_create(serve: Any) -> None:
    call = tool_use("write_file", {"path": "out.txt", "content": 'line "one"\nline two\n'})
    words = "Streaming arrives in several pieces, word by word."
    server, client = serve([reply(words, call, usage=usage(50, 20, cache_creation_input_tokens=7))])

    created = create(client, [user("go")])
    pieces, final = stream_final(client, [user("go")])

    assert len(pieces) > 3 and "".join(pieces) == words
    assert final.model_dump(mode="json", exclude={"id"}) == created.model_dump(mode="json", exclude={"id"})
    assert final.content[1].input == call["input"]
    assert final.usage.output_tokens == 20 and final.usage.cache_creation_input_tokens == 7
    assert [r.stream for r in server.requests] == [False, True]
    assert server.requests[1].reply is not None and server.requests[1].outcome == "reply"


def test_sse_wire_format_pairs_every_data_line_with_an_event_line(serve: Any) -> None:
    server, _ = serve([reply("two words", tool_use("t", {"k": "v"}))])
    with httpx2.stream("POST", f"{server.url}/v1/messages", headers=HEADERS,
                       json={"model": MODEL, "max_tokens": 100, "stream": True, "messages": [user("hi")]}) as resp:
        assert resp.headers["content-type"].startswith("text/event-stream")
        assert resp.headers["request-id"] == server.requests[0].request_id
        raw = resp.read().decode()
    events = [chunk.split("\n") for chunk in raw.strip().split("\n\n")]
    assert all(len(e) == 2 and e[0].startswith("event: ") and e[1].startswith("data: ") for e in events)
    names = [e[0][len("event: "):] for e in events]
    datas = [json.loads(e[1][len("data: "):]) for e in events]
    assert all(d["type"] == n for n, d in zip(names, datas, strict=True))
    assert names[:2] == ["message_start", "ping"] and names[-2:] == ["message_delta", "message_stop"]
    assert names.count("content_block_start") == names.count("content_block_stop") == 2
    assert datas[0]["message"]["content"] == [] and datas[0]["message"]["stop_reason"] is None
    assert datas[-2]["delta"] == {"stop_reason": "tool_use", "stop_sequence": None, "stop_details": None}
    partial = "".join(d["delta"]["partial_json"] for d in datas if d.get("delta", {}).get("type") == "input_json_delta")
    assert json.loads(partial) == {"k": "v"}


@pytest.mark.parametrize("streaming", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("stop_reason", STOP_REASONS)
def test_every_stop_reason(serve: Any, stop_reason: str, streaming: bool) -> None:
    sequence = "###" if stop_reason == "stop_sequence" else None
    _, client = serve([reply("partial", stop_reason=stop_reason, stop_sequence=sequence)])
    msg = stream_final(client, [user("hi")])[1] if streaming else create(client, [user("hi")])
    assert (msg.stop_reason, msg.stop_sequence) == (stop_reason, sequence)


def test_usage_is_estimated_when_not_scripted(serve: Any) -> None:
    _, client = serve([reply("short")])
    small = create(client, [user("x")])
    big = create(client, [user("x" * 4000)])
    assert 1 <= small.usage.input_tokens < big.usage.input_tokens and big.usage.input_tokens >= 1000
    assert small.usage.output_tokens >= 1


def test_tool_use_round_trip_and_turn_counters(serve: Any) -> None:
    call = tool_use("list_dir", {"path": "."})
    server, client = serve([reply(call), reply("There are two files.")])

    first = create(client, [user("what is here?")])
    convo = [user("what is here?"), history(first), user(tool_result(call["id"], "a.txt\nb.txt"))]
    second = create(client, convo)

    assert text_of(second) == "There are two files." and second.stop_reason == "end_turn"
    assert [(r.turn, r.attempt) for r in server.requests] == [(0, 1), (1, 1)]
    stats = server.turn_stats()
    assert (stats[0].requests, stats[0].replies, stats[0].completed) == (1, 1, True)
    # Turn 1 was answered, but no later request shows the client received the answer.
    assert (stats[1].requests, stats[1].replies, stats[1].completed) == (1, 1, False)
    assert not server.rejected


def test_resent_turn_gets_the_same_reply_and_repeats_are_counted(serve: Any) -> None:
    call = tool_use("run_bash", {"command": "ls"})
    server, client = serve([reply(call), reply("done")])

    first = create(client, [user("go")])
    again = create(client, [user("go")])  # a crash before the reply was logged: the turn is re-sent
    assert tool_of(again).id == tool_of(first).id == call["id"]
    stats = server.turn_stats()
    assert (stats[0].requests, stats[0].replies, stats[0].completed, stats[0].repeats) == (2, 2, False, 0)

    create(client, [user("go"), history(again), user(tool_result(call["id"], "a.txt"))])
    assert server.turn_stats()[0].completed
    create(client, [user("go")])  # an agent that went back to a completed turn
    stats = server.turn_stats()
    assert (stats[0].requests, stats[0].repeats) == (3, 1)
    assert [r.attempt for r in server.requests_at(0)] == [1, 2, 3]


def test_function_scenario_answers_from_the_conversation(serve: Any) -> None:
    def echo(request: RecordedRequest) -> Reply:
        last = request.messages[-1]["content"]
        return reply(f"turn {request.turn}, attempt {request.attempt}: {last}")

    _, client = serve(FunctionScenario(echo))
    assert text_of(create(client, [user("hello")])) == "turn 0, attempt 1: hello"
    assert text_of(create(client, [user("a"), assistant("b"), user("c")])) == "turn 1, attempt 1: c"


def test_a_turn_beyond_the_script_is_a_clear_400(serve: Any) -> None:
    server, client = serve([reply("only one turn")])
    with pytest.raises(anthropic.BadRequestError, match="no reply for turn 1"):
        create(client, [user("a"), assistant("b"), user("c")])
    assert server.requests[0].outcome == "unscripted" and not server.rejected


# --- strictness -------------------------------------------------------------------------------


def test_401_without_credentials(serve: Any) -> None:
    server, _ = serve([reply("never sent")])
    resp = raw_post(server, {"model": MODEL, "max_tokens": 5, "messages": [user("hi")]},
                    headers={"anthropic-version": "2023-06-01"})
    assert resp.status_code == 401
    assert resp.json()["type"] == "error" and resp.json()["error"]["type"] == "authentication_error"

    # Through the SDK: a client with no credentials must omit the header explicitly, or it
    # raises TypeError before sending anything.
    bare = anthropic.Anthropic(api_key=None, base_url=server.url, max_retries=0,
                               default_headers={"Authorization": anthropic.Omit()})  # type: ignore[dict-item]
    with bare, pytest.raises(anthropic.AuthenticationError) as err:
        create(bare, [user("hi")])
    assert err.value.status_code == 401 and body_of(err.value)["error"]["type"] == "authentication_error"
    assert [(r.outcome, r.status, r.attempt) for r in server.requests] == [("rejected", 401, None)] * 2
    assert "authorization" not in server.requests[1].headers


def test_expected_api_key_and_x_api_key_header(serve: Any) -> None:
    server, client = serve([reply("ok")], api_key="right-key")
    with pytest.raises(anthropic.AuthenticationError, match="invalid x-api-key"):
        create(client, [user("hi")])  # the client sends "test-key"
    ok = raw_post(server, {"model": MODEL, "max_tokens": 5, "messages": [user("hi")]},
                  headers={"x-api-key": "right-key", "anthropic-version": "2023-06-01"})
    assert ok.status_code == 200 and ok.json()["content"] == [text("ok")]


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"model": MODEL, "messages": [user("hi")]}, "max_tokens: Field required"),
        ({"max_tokens": 5, "messages": [user("hi")]}, "model: Field required"),
        ({"model": MODEL, "max_tokens": -1, "messages": [user("hi")]}, "max_tokens: Input should be"),
        ({"model": MODEL, "max_tokens": 5}, "messages: Field required"),
        ({"model": MODEL, "max_tokens": 5, "messages": []}, "at least one message"),
    ],
    ids=["no-max-tokens", "no-model", "negative-max-tokens", "no-messages", "empty-messages"],
)
def test_400_for_a_malformed_body(serve: Any, body: dict[str, Any], fragment: str) -> None:
    server, _ = serve([reply("never sent")])
    resp = raw_post(server, body)
    assert resp.status_code == 400
    assert resp.json()["error"]["type"] == "invalid_request_error" and fragment in resp.json()["error"]["message"]
    assert server.requests[0].rejected and server.requests[0].error_message == resp.json()["error"]["message"]


T1, T2 = tool_use("read_file", {"path": "a"}, id="toolu_01A"), tool_use("read_file", {"path": "b"}, id="toolu_01B")
BAD_CONVERSATIONS = {
    "first-is-assistant": ([assistant("hi"), user("x")], 'first message must use the "user" role'),
    "two-user-in-a-row": ([user("a"), user("b")], 'multiple "user" roles in a row'),
    "two-assistant-in-a-row": ([user("a"), assistant("b"), assistant("c")], 'multiple "assistant" roles'),
    "tool-use-answered-by-text": ([user("a"), assistant(T1), user("b")], "without `tool_result` blocks immediately after: toolu_01A"),
    "tool-use-never-answered": ([user("a"), assistant(T1)], "without `tool_result` blocks immediately after: toolu_01A"),
    "one-of-two-answered": ([user("a"), assistant(T1, T2), user(tool_result("toolu_01A"))], "immediately after: toolu_01B."),
    "result-for-unknown-id": ([user("a"), assistant(T1), user(tool_result("toolu_01A"), tool_result("toolu_01Z"))],
                              "unexpected `tool_use_id` found in `tool_result` blocks: toolu_01Z"),
    "result-without-tool-use": ([user("a"), assistant("b"), user(tool_result("toolu_01A"))], "unexpected `tool_use_id`"),
    "result-after-text": ([user("a"), assistant(T1), user("note", tool_result("toolu_01A"))], "must come first"),
    "duplicate-tool-use-id": ([user("a"), assistant(T1), user(tool_result("toolu_01A")), assistant(T1),
                               user(tool_result("toolu_01A"))], "ids must be unique"),
    "empty-content": ([user("a"), {"role": "assistant", "content": []}, user("c")], "must have non-empty content"),
    "empty-text-block": ([user(text(""))], "text content blocks must be non-empty"),
    "bad-role": ([{"role": "system", "content": "x"}], "messages.0.role"),
}


@pytest.mark.parametrize(("messages", "fragment"), BAD_CONVERSATIONS.values(), ids=BAD_CONVERSATIONS.keys())
def test_400_for_a_conversation_the_real_api_refuses(serve: Any, messages: list[dict[str, Any]], fragment: str) -> None:
    server, client = serve([reply("ok")] * 3)
    with pytest.raises(anthropic.BadRequestError) as err:
        create(client, messages)
    assert err.value.status_code == 400 and body_of(err.value)["type"] == "error"
    assert body_of(err.value)["error"]["type"] == "invalid_request_error" and fragment in body_of(err.value)["error"]["message"]
    [rec] = server.requests
    assert rec.rejected and rec.attempt is None and err.value.request_id == rec.request_id
    # A refused request does not consume the scenario: the next valid one is attempt 1.
    create(client, [user("fine")])
    assert server.requests[1].attempt == 1 and server.requests[1].outcome == "reply"


def test_valid_shapes_are_accepted(serve: Any) -> None:
    server, client = serve([reply("ok")] * 3)
    parallel = [user("a"), assistant("two calls", T1, T2),
                user(tool_result("toolu_01B", "b"), tool_result("toolu_01A", "a", is_error=True), "and a note")]
    create(client, parallel)
    create(client, [user("a"), assistant("prefill")])  # a final assistant message is a prefill
    create(client, [user("a"), {"role": "assistant", "content": []}])  # ... which may be empty
    assert [r.outcome for r in server.requests] == ["reply"] * 3 and [r.turn for r in server.requests] == [1, 1, 1]


def test_other_paths_are_404(serve: Any) -> None:
    server, _ = serve([reply("ok")])
    resp = httpx2.get(f"{server.url}/v1/models", headers=HEADERS)
    assert resp.status_code == 404 and resp.json()["error"]["type"] == "not_found_error"
    assert server.requests[0].rejected and server.requests[0].turn is None


# --- faults -----------------------------------------------------------------------------------


def test_529_with_retry_after_ms_then_429_with_retry_after_then_success(serve: Any) -> None:
    server, client = serve([[Error(529, retry_after_ms=50), Error(429, retry_after="1"), reply("finally")]])

    with pytest.raises(anthropic.OverloadedError) as overloaded:
        create(client, [user("hi")])
    assert overloaded.value.status_code == 529 and overloaded.value.response.headers["retry-after-ms"] == "50"
    assert body_of(overloaded.value)["error"]["type"] == "overloaded_error"
    assert overloaded.value.request_id == server.requests[0].request_id
    assert isinstance(overloaded.value, anthropic.InternalServerError)

    with pytest.raises(anthropic.RateLimitError) as limited:
        create(client, [user("hi")])
    assert limited.value.status_code == 429 and limited.value.response.headers["retry-after"] == "1"
    assert body_of(limited.value)["error"]["type"] == "rate_limit_error"

    assert text_of(create(client, [user("hi")])) == "finally"
    assert text_of(create(client, [user("hi")])) == "finally"  # the last action repeats
    assert [(r.attempt, r.status) for r in server.requests] == [(1, 529), (2, 429), (3, 200), (4, 200)]
    assert server.turn_stats()[0].replies == 2


def test_the_sdk_own_retries_honour_retry_after_ms(serve: Any) -> None:
    server, _ = serve([[Error(529, retry_after_ms=60), Error(500, retry_after_ms=60), reply("third time")]])
    with anthropic.Anthropic(api_key="test-key", base_url=server.url, max_retries=2) as retrying:
        started = time.monotonic()
        assert text_of(create(retrying, [user("hi")])) == "third time"
        assert time.monotonic() - started >= 0.12
    assert [r.headers["x-stainless-retry-count"] for r in server.requests] == ["0", "1", "2"]


def test_500_then_success_and_custom_headers(serve: Any) -> None:
    _, client = serve([[Error(500, headers={"x-should-retry": "false"}), reply("recovered")]])
    with pytest.raises(anthropic.InternalServerError) as err:
        create(client, [user("hi")])
    assert type(err.value) is anthropic.InternalServerError and err.value.status_code == 500
    assert body_of(err.value)["error"] == {"type": "api_error", "message": "Internal server error"}
    assert err.value.response.headers["x-should-retry"] == "false"
    assert text_of(create(client, [user("hi")])) == "recovered"


def test_any_status_and_error_type(serve: Any) -> None:
    _, client = serve([[Error(403, message="no access"), Error(413), Error(503, "overloaded_error", "busy")]])
    with pytest.raises(anthropic.PermissionDeniedError, match="no access"):
        create(client, [user("hi")])
    with pytest.raises(anthropic.APIStatusError) as too_large:
        create(client, [user("hi")])
    assert body_of(too_large.value)["error"]["type"] == "request_too_large"
    with pytest.raises(anthropic.InternalServerError) as busy:
        create(client, [user("hi")])
    assert busy.value.status_code == 503 and body_of(busy.value)["error"]["type"] == "overloaded_error"


def test_mid_stream_overloaded_error_is_a_plain_api_status_error_with_status_200(serve: Any) -> None:
    server, client = serve([[StreamError(partial_text="Half an ans"), StreamError(), reply("whole answer")]])
    pieces: list[str] = []
    with pytest.raises(anthropic.APIStatusError) as err:
        with client.messages.stream(model=MODEL, max_tokens=100, messages=[user("hi")]) as stream:
            pieces.extend(stream.text_stream)
    # SDK 2.14: the `event: error` becomes APIStatusError itself (no subclass: 200 maps to none).
    assert type(err.value) is anthropic.APIStatusError and err.value.status_code == 200
    assert body_of(err.value) == {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    assert "".join(pieces) == "Half an ans" and err.value.request_id == server.requests[0].request_id
    # A non-streaming request cannot fail mid-stream: it gets the error type's HTTP status.
    with pytest.raises(anthropic.OverloadedError):
        create(client, [user("hi")])
    assert stream_final(client, [user("hi")])[1].content[0].text == "whole answer"
    assert [(r.outcome, r.status, r.error_type) for r in server.requests] == [
        ("stream_error", 200, "overloaded_error"), ("error", 529, "overloaded_error"), ("reply", 200, None)]


def test_delay_keeps_the_request_in_flight(serve: Any) -> None:
    server, client = serve([[Delay(0.4, reply("late")), Delay(5, reply("too late"))]])
    result: list[Any] = []
    worker = threading.Thread(target=lambda: result.append(create(client, [user("hi")])))
    started = time.monotonic()
    worker.start()
    in_flight = server.wait_for(lambda rs: len(rs) == 1, timeout=5)
    assert in_flight[0].outcome == "pending" and worker.is_alive()
    worker.join(5)
    assert result[0].content[0].text == "late" and time.monotonic() - started >= 0.4
    assert server.requests[0].outcome == "reply"

    with pytest.raises(anthropic.APITimeoutError):
        create(client.with_options(timeout=0.2), [user("hi")])
    closing = time.monotonic()
    server.close()  # wakes the 5 s delay: the request is dropped, close does not wait for it
    assert time.monotonic() - closing < 1
    server.wait_for(lambda rs: rs[1].outcome == "dropped", timeout=2)


def test_a_delay_until_an_event_answers_once_it_is_set(serve: Any) -> None:
    released = threading.Event()
    server, client = serve([[Delay(30, reply("released"), until=released), Delay(30, reply("never"), until=threading.Event())]])
    result: list[Any] = []
    asking = threading.Thread(target=lambda: result.append(create(client, [user("hi")])))
    asking.start()
    server.wait_for(lambda rs: len(rs) == 1, timeout=5)
    time.sleep(0.1)
    assert server.requests[0].outcome == "pending" and asking.is_alive()  # held past any poll
    released.set()
    asking.join(5)
    assert result[0].content[0].text == "released"

    with pytest.raises(anthropic.APITimeoutError):
        create(client.with_options(timeout=0.2), [user("hi")])
    closing = time.monotonic()
    server.close()  # a held request is dropped at close, its event never set
    assert time.monotonic() - closing < 1
    server.wait_for(lambda rs: rs[1].outcome == "dropped", timeout=2)


def test_dropped_connection_is_an_api_connection_error(serve: Any) -> None:
    server, client = serve([reply("turn 0"), [Drop(), reply("after the drop")]])
    first = create(client, [user("a")])  # leaves a pooled keep-alive connection behind
    convo = [user("a"), history(first), user("b")]
    with pytest.raises(anthropic.APIConnectionError) as err:
        create(client, convo)
    assert type(err.value) is anthropic.APIConnectionError  # not APITimeoutError
    assert text_of(create(client, convo)) == "after the drop"
    assert [(r.turn, r.outcome, r.status) for r in server.requests] == [
        (0, "reply", 200), (1, "dropped", None), (1, "reply", 200)]


def body_error(raised: pytest.ExceptionInfo[BaseException], wrapper: type[Exception], raw: type[Exception]) -> BaseException:
    """The httpx2 error under what the SDK raised while reading a stream's body.

    SDK 2.14 let such errors through raw; 2.17 wraps them (a timeout as ``APITimeoutError``,
    anything else as ``APIConnectionError``) with the httpx2 error as the cause. The agent's
    model seam handles both, so the fake must produce the httpx2 error either way.
    """
    error = raised.value
    if isinstance(error, wrapper):
        error = error.__cause__  # type: ignore[assignment]
    assert isinstance(error, raw), f"{type(raised.value).__name__} ({raised.value}) is not a {raw.__name__}"
    return error


def test_a_stream_cut_mid_way_raises_httpx2_remote_protocol_error(serve: Any) -> None:
    server, client = serve([[Drop(mid_stream=True), reply("whole")]])
    with pytest.raises((httpx2.RemoteProtocolError, anthropic.APIConnectionError)) as raised:
        stream_final(client, [user("hi")])
    assert "incomplete chunked read" in str(body_error(raised, anthropic.APIConnectionError, httpx2.RemoteProtocolError))
    assert stream_final(client, [user("hi")])[1].content[0].text == "whole"
    assert [(r.outcome, r.status) for r in server.requests] == [("dropped", 200), ("reply", 200)]


def test_a_slow_stream_can_be_cut_by_a_read_timeout(serve: Any) -> None:
    server, client = serve([reply("one two three four", event_delay=0.3)])
    with pytest.raises((httpx2.ReadTimeout, anthropic.APITimeoutError)) as raised:
        stream_final(client.with_options(timeout=0.1), [user("hi")])
    body_error(raised, anthropic.APITimeoutError, httpx2.ReadTimeout)
    assert server.requests[0].stream and server.requests[0].outcome in ("pending", "aborted")


# --- JSON scenarios and the separate process --------------------------------------------------


def every_action() -> list[Any]:
    """One of each action kind, with non-default fields."""
    return [
        Error(529, retry_after_ms=50),
        Error(429, "rate_limit_error", "slow down", retry_after="1", headers={"x-should-retry": "true"}),
        StreamError("api_error", "boom", partial_text="Hel"),
        Delay(0.01, Drop(mid_stream=True)),
        Drop(),
        reply("hi", tool_use("t", {"a": [1, None]}), stop_reason="pause_turn", usage=usage(1, 2), model="m", id="msg_01X"),
    ]


def test_scenario_json_round_trip(tmp_path: Path) -> None:
    scenario = ScriptedScenario([every_action(), reply("single")])
    loaded = ScriptedScenario.load(scenario.dump(tmp_path / "s.json"))
    assert loaded.turns == scenario.turns and loaded.to_json() == scenario.to_json()
    assert action_from_json({"type": "reply", "text": "short"}) == Reply([text("short")])
    assert action_to_json(Drop()) == {"type": "drop", "mid_stream": False}
    with pytest.raises(TypeError, match="turn 0"):
        ScriptedScenario([["not an action"]])  # type: ignore[list-item]


def test_read_request_log_skips_a_torn_last_line(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    with MessagesAPIServer([reply("ok")], log_path=log) as server:
        raw_post(server, {"model": MODEL, "max_tokens": 5, "messages": [user("hi")]})
    with log.open("a") as f:
        f.write('{"index": 1, "meth')
    [rec] = read_request_log(log)
    assert (rec.index, rec.outcome, rec.turn) == (0, "reply", 0)
    assert len(log.read_text().splitlines()) == 3  # received, finished, torn


def test_subprocess_mode(tmp_path: Path) -> None:
    call = tool_use("read_file", {"path": "x"})
    scenario = ScriptedScenario([[Error(529, retry_after_ms=1), reply(call)], reply("done")])
    with MessagesAPIProcess(scenario, tmp_path) as proc:
        assert proc.url.startswith("http://127.0.0.1:")
        with anthropic.Anthropic(api_key="test-key", base_url=proc.url, max_retries=1) as client:
            first = create(client, [user("go")])
            pieces, _ = stream_final(client, [user("go"), history(first), user(tool_result(call["id"], "..."))])
        assert tool_of(first).id == call["id"] and "".join(pieces) == "done"
        records = proc.wait_for(lambda rs: len(rs) == 3 and rs[-1].outcome == "reply", timeout=5)
        assert [(r.turn, r.attempt, r.status, r.stream) for r in records] == [
            (0, 1, 529, False), (0, 2, 200, False), (1, 1, 200, True)]
        assert records[0].headers["authorization"] == "Bearer test-key"
        stats = proc.turn_stats()
        assert (stats[0].requests, stats[0].replies, stats[0].completed, stats[1].completed) == (2, 1, True, False)
    assert proc.proc.returncode == 0  # SIGTERM is a clean shutdown
    assert read_request_log(proc.log_path) == records
