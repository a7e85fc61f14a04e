"""A streamed reply read from its raw events (``agent.models.stream``) is what the SDK's own
stream helper makes of the same bytes: compared reply by reply against the loopback API, and
by hand for the deltas the fake never sends (citations, a message_delta's usage)."""

from __future__ import annotations

import warnings
from typing import Any

import anthropic
import pytest

from nb_durable.agent.models.anthropic import AnthropicModel, _status_error
from nb_durable.agent.models.stream import accumulate
from nb_durable.errors import TransientModelError
from tests.fakes import BrokenStream, MessagesAPIServer, StreamError, cut_off, refusal, reply, tool_use
from tests.fakes.messages_api.content import thinking

REQUEST: dict[str, Any] = {"model": "claude-test-1", "max_tokens": 2048, "messages": [{"role": "user", "content": "hi"}]}
THINKING: dict[str, Any] = {**REQUEST, "thinking": {"type": "enabled", "budget_tokens": 1024}}
CACHED: dict[str, Any] = {
    **REQUEST,
    "system": [{"type": "text", "text": "You read notes. " * 400, "cache_control": {"type": "ephemeral"}}],
}


def sdk_message(server: MessagesAPIServer, request: dict[str, Any]) -> dict[str, Any]:
    client = anthropic.Anthropic(api_key="test-key", base_url=server.url, max_retries=0)
    with client.messages.stream(**request) as stream:
        for _ in stream:
            pass
        return dict(stream.get_final_message().model_dump(mode="json"))


@pytest.mark.parametrize(
    ("answer", "request_"),
    [
        (reply("Let me look.", tool_use("read_file", {"path": "a.py", "lines": [1, 2]})), REQUEST),
        (reply(tool_use("list_dir", {}, id="toolu_empty")), REQUEST),
        (reply(thinking("First the notes."), "The notes say: buy milk."), THINKING),
        (reply("Cached."), CACHED),
        (refusal("I can't help with that.", category="cyber", explanation="policy"), REQUEST),
        (cut_off("A long answer that goes on and on and on", after=3), REQUEST),
        (cut_off("Writing it.", tool_use("write_file", {"path": "a.py", "content": "print(1)\n" * 40}), after=12), REQUEST),
    ],
    ids=["tool_use", "empty_input", "thinking", "cache", "refusal", "cut_off", "cut_off_tool_input"],
)
def test_a_reply_read_from_its_events_is_the_sdks_message(answer: Any, request_: dict[str, Any]) -> None:
    # A server each: a second request to one server would read the prompt cache the first wrote.
    with MessagesAPIServer([answer]) as sdk_server, MessagesAPIServer([answer]) as server:
        theirs = sdk_message(sdk_server, request_)
        texts: list[str] = []
        thoughts: list[str] = []
        ours = AnthropicModel(api_key="test-key", base_url=server.url, timeout=10).create(
            request_, on_text=texts.append, on_thinking=thoughts.append
        )["message"]
    assert ours["id"] != theirs["id"]  # a fresh id per response: all else is the same
    assert {**ours, "id": None} == {**theirs, "id": None}
    assert "".join(texts) == "".join(b["text"] for b in ours["content"] if b["type"] == "text")
    assert "".join(thoughts) == "".join(b["thinking"] for b in ours["content"] if b["type"] == "thinking")
    if request_ is THINKING:
        assert thoughts and ours["content"][0]["signature"]
    if request_ is CACHED:
        assert ours["usage"]["cache_creation_input_tokens"] > 0


def test_an_error_event_mid_stream_is_the_error_the_sdks_stream_raises() -> None:
    fault = StreamError(error_type="overloaded_error", message="Overloaded", partial_text="Hel")
    with MessagesAPIServer([[fault, fault]]) as server:
        with pytest.raises(anthropic.APIStatusError) as sdk:
            sdk_message(server, REQUEST)
        with pytest.raises(TransientModelError) as ours:
            AnthropicModel(api_key="test-key", base_url=server.url, timeout=10).create(REQUEST)
    expected = _status_error(sdk.value)
    assert (str(ours.value), ours.value.status, ours.value.error_type) == (str(expected), expected.status, expected.error_type)


@pytest.mark.parametrize("shape", ["empty", "no_message_stop"])
def test_a_stream_that_ends_before_message_stop_is_never_a_finished_answer(shape: str) -> None:
    with MessagesAPIServer([BrokenStream(shape)]) as server:
        with pytest.raises(TransientModelError) as info:
            AnthropicModel(api_key="test-key", base_url=server.url, timeout=10).create(REQUEST)
    assert info.value.error_type == "incomplete_stream"


class Event:
    def __init__(self, data: dict[str, Any]) -> None:
        import json

        self.event, self.data = data["type"], json.dumps(data)


def events(*data: dict[str, Any]) -> list[Event]:
    start = {
        "type": "message_start",
        "message": {
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test-1", "content": [],
            "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": 12, "output_tokens": 1, "cache_read_input_tokens": 7, "cache_creation_input_tokens": 3},
        },
    }  # fmt: skip
    return [Event(start), *map(Event, data), Event({"type": "message_stop"})]


def test_citations_and_a_message_deltas_totals_accumulate_as_the_sdk_says() -> None:
    citation = {"type": "char_location", "cited_text": "milk", "document_index": 0, "start_char_index": 0, "end_char_index": 4}
    message = accumulate(
        events(
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": "", "citations": None}},
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Buy "}},
            {"type": "content_block_delta", "index": 0, "delta": {"type": "citations_delta", "citation": citation}},
            {"type": "content_block_delta", "index": 0, "delta": {"type": "citations_delta", "citation": citation}},
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "milk."}},
            {"type": "content_block_stop", "index": 0},
            # Running totals: output and input overwrite, the omitted cache reads keep message_start's.
            {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
             "usage": {"output_tokens": 9, "input_tokens": 15, "cache_creation_input_tokens": None}},
        ),
        None, None, None,
    )  # fmt: skip
    assert message["content"] == [{"type": "text", "text": "Buy milk.", "citations": [citation, citation]}]
    assert message["stop_reason"] == "end_turn"
    assert message["usage"] == {"input_tokens": 15, "output_tokens": 9, "cache_read_input_tokens": 7, "cache_creation_input_tokens": 3}


def test_tool_input_that_is_not_json_says_so_and_an_event_before_message_start_is_refused() -> None:
    # Unfinished JSON is a cut reply's (the cut_off_tool_input case above); this never was JSON.
    broken = events(
        {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "t", "name": "x", "input": {}}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": '{"path": ]'}},
        {"type": "content_block_stop", "index": 0},
    )
    with pytest.raises(ValueError, match="Unable to parse tool parameter JSON"):
        accumulate(broken, None, None, None)
    with pytest.raises(TransientModelError, match="before 'message_start'"):
        accumulate(broken[1:], None, None, None)


def test_a_reply_is_read_to_the_end_of_its_body_so_the_next_call_reuses_the_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    # message_stop is not the body's end: a response closed before its last chunk is read
    # takes its connection with it, and every call would pay a new one (and the server a thread).
    from tests.fakes.messages_api import connection

    opened: list[object] = []
    setup = connection.Handler.setup

    def counted(handler: Any) -> None:
        opened.append(handler)
        setup(handler)

    monkeypatch.setattr(connection.Handler, "setup", counted)
    with MessagesAPIServer([[reply("Hi.", tool_use("list_dir", {"path": "."}))] * 5]) as server:
        model = AnthropicModel(api_key="test-key", base_url=server.url, timeout=10)
        for _ in range(5):
            model.create(REQUEST)
    assert len(opened) == 1


def test_a_reply_the_sdks_types_refuse_is_still_shaped_as_the_sdks_stream_builds_it() -> None:
    # Validated when the SDK's types take it (the fast way), built field by field when they do
    # not: a block type newer than this SDK, a count the stream left out. Either way, what the
    # SDK's own stream helper (``construct``) would dump.
    from anthropic.types import Message

    from nb_durable.agent.models.stream import sdk_shape

    start: dict[str, Any] = {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test-1", "stop_reason": "end_turn",
        "stop_sequence": None, "usage": {"input_tokens": 5, "output_tokens": 2},
    }  # fmt: skip
    taken: dict[str, Any] = {**start, "content": [{"type": "text", "text": "Hi."}, {"type": "tool_use", "id": "t", "name": "x", "input": {"a": [1]}}]}
    newer: dict[str, Any] = {**start, "content": [{"type": "hologram", "frames": 3}, {"type": "text", "text": "Hi."}]}
    uncounted: dict[str, Any] = {**start, "content": [], "usage": {"input_tokens": 5, "output_tokens": None}}
    for message in (taken, newer, uncounted):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a newer block type is no cause for a warning in the user's notebook
            shaped = sdk_shape(message)
        assert shaped == dict(Message.construct(**message).model_dump(mode="json", warnings=False))
    assert sdk_shape(newer)["content"][0]["frames"] == 3  # kept, as construct keeps what it does not know
    assert sdk_shape(taken)["content"][0]["citations"] is None  # the SDK's defaults, filled in
