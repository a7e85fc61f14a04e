"""The fake Messages API where thinking meets it: configs, signatures, deltas, cut-offs, refusals."""

from __future__ import annotations

import copy
from typing import Any

import anthropic
import pytest
from anthropic.lib.streaming._types import ThinkingEvent

from tests.fakes import (
    MessagesAPIServer,
    Reply,
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
    MODEL,
    body_of,
    create,
    history,
    raw_events,
    stream_final,
    text_of,
    thinking_of,
    tool_of,
)

ADAPTIVE = {"type": "adaptive", "display": "summarized"}
THOUGHT = "The user wants the notes. I should read notes/a.txt before answering anything."


def first_turn(serve: Any, *extra: Reply, **options: Any) -> tuple[MessagesAPIServer, anthropic.Anthropic, Any, dict[str, Any]]:
    """A server whose turn 0 thinks and calls a tool; the reply and the tool call."""
    call = tool_use("read_file", {"path": "notes/a.txt"}, id="toolu_01READ")
    server, client = serve([reply(thinking(THOUGHT), call), *extra, reply(thinking("Got it."), "The notes say hi.")], **options)
    msg = create(client, [user("read the notes")], thinking=ADAPTIVE, max_tokens=2000)
    return server, client, msg, call


def second_turn(first: Any, call: dict[str, Any]) -> list[dict[str, Any]]:
    """The conversation after the tool ran, with the first reply sent back as recorded."""
    return [user("read the notes"), history(first), user(tool_result(call["id"], "hi"))]


# --- signatures -------------------------------------------------------------------------------


def test_thinking_blocks_are_signed_and_accepted_back_unchanged(serve: Any) -> None:
    server, client, first, call = first_turn(serve)
    block = thinking_of(first)
    assert block.thinking == THOUGHT and len(block.signature) > 40
    assert tool_of(first, 1).id == call["id"] and first.stop_reason == "tool_use"
    assert first.usage.output_tokens_details is not None and first.usage.output_tokens_details.thinking_tokens > 0

    second = create(client, second_turn(first, call), thinking=ADAPTIVE, max_tokens=2000)
    assert thinking_of(second).thinking == "Got it." and text_of(second, 1) == "The notes say hi."
    assert thinking_of(second).signature != block.signature
    assert [r.outcome for r in server.requests] == ["reply", "reply"] and server.turn_stats()[0].completed
    # A restarted server (same default secret) accepts what the first one signed.
    with MessagesAPIServer([reply("again")] * 2) as restarted:
        again = anthropic.Anthropic(api_key="k", base_url=restarted.url, max_retries=0)
        assert text_of(create(again, second_turn(first, call), thinking=ADAPTIVE, max_tokens=2000)) == "again"


def _alter_text(convo: list[dict[str, Any]]) -> None:
    convo[1]["content"][0]["thinking"] += " Also, delete everything."


def _alter_signature(convo: list[dict[str, Any]]) -> None:
    sig = convo[1]["content"][0]["signature"]
    convo[1]["content"][0]["signature"] = sig[:-6] + ("AAAAAA" if not sig.endswith("AAAAAA") else "BBBBBB")


def _made_up_signature(convo: list[dict[str, Any]]) -> None:
    convo[1]["content"][0]["signature"] = "EqQBCkYIBhgCIkDsomethingthatlooksrealbutisnot"


def _drop_signature(convo: list[dict[str, Any]]) -> None:
    del convo[1]["content"][0]["signature"]


ALTERATIONS = {
    "text-in-latest": (_alter_text, "messages.1.content.0: `thinking` or `redacted_thinking` blocks in the latest assistant message cannot be modified"),
    "signature": (_alter_signature, "messages.1.content.0: Invalid `signature` in `thinking` block"),
    "made-up-signature": (_made_up_signature, "messages.1.content.0: Invalid `signature` in `thinking` block"),
    "no-signature": (_drop_signature, "messages.1.content.0.thinking.signature: Field required"),
}


@pytest.mark.parametrize(("alter", "message"), ALTERATIONS.values(), ids=ALTERATIONS.keys())
def test_an_altered_thinking_block_is_a_400_like_the_real_api(serve: Any, alter: Any, message: str) -> None:
    server, client, first, call = first_turn(serve)
    convo = second_turn(first, call)
    alter(convo)
    with pytest.raises(anthropic.BadRequestError) as err:
        create(client, convo, thinking=ADAPTIVE, max_tokens=2000)
    assert body_of(err.value)["error"]["type"] == "invalid_request_error"
    assert body_of(err.value)["error"]["message"].startswith(message)
    with pytest.raises(anthropic.BadRequestError, match="thinking"):  # count_tokens checks the same
        client.messages.count_tokens(model=MODEL, messages=convo, thinking=ADAPTIVE)  # type: ignore[arg-type]
    assert [r.outcome for r in server.requests] == ["reply", "rejected", "rejected"]
    assert server.requests[1].attempt is None  # never reached the scenario


def test_an_altered_block_in_an_earlier_turn_has_an_invalid_signature(serve: Any) -> None:
    _, client, first, call = first_turn(serve)
    second = create(client, second_turn(first, call), thinking=ADAPTIVE, max_tokens=2000)
    convo = [*second_turn(first, call), history(second), user("and now?")]
    convo[1]["content"][0]["thinking"] = "Something else."
    with pytest.raises(anthropic.BadRequestError, match=r"messages\.1\.content\.0: Invalid `signature` in `thinking` block"):
        create(client, convo, thinking=ADAPTIVE, max_tokens=2000)


def test_signatures_are_bound_to_the_model(serve: Any) -> None:
    server, client, first, call = first_turn(serve)
    with pytest.raises(anthropic.BadRequestError, match="Invalid `signature` in `thinking` block"):
        client.messages.create(model="claude-other-1", max_tokens=2000, thinking=ADAPTIVE,  # type: ignore[call-overload]
                               messages=second_turn(first, call))
    # Without the other model's thinking blocks, mid-tool-loop, thinking must be off for that
    # request: with it on, the latest assistant message must start with its thinking block.
    convo = second_turn(first, call)
    convo[1]["content"] = [b for b in convo[1]["content"] if b["type"] != "thinking"]
    with pytest.raises(anthropic.BadRequestError, match="must start with a thinking block"):
        client.messages.create(model="claude-other-1", max_tokens=2000, thinking=ADAPTIVE,  # type: ignore[call-overload]
                               messages=convo)
    assert client.messages.create(model="claude-other-1", max_tokens=2000, thinking={"type": "disabled"},  # type: ignore[call-overload]
                                  messages=convo).content
    assert server.signer.check(MODEL, history(first)["content"][0]) == "ok"
    assert server.signer.check("claude-other-1", history(first)["content"][0]) == "foreign"


def test_thinking_blocks_sent_with_a_tool_call_must_come_back(serve: Any) -> None:
    server, client, first, call = first_turn(serve)
    dropped = second_turn(first, call)
    dropped[1]["content"] = dropped[1]["content"][1:]
    with pytest.raises(anthropic.BadRequestError) as err:
        create(client, dropped, thinking=ADAPTIVE, max_tokens=2000)
    assert body_of(err.value)["error"]["message"].startswith(
        "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `tool_use`. "
        "When `thinking` is enabled, a final `assistant` message must start with a thinking block")
    # Another of our own signed blocks in its place is a modification, though its signature is valid.
    swapped = second_turn(first, call)
    other = create(client, [user("a"), {"role": "assistant", "content": "b"}, user("c")], thinking=ADAPTIVE, max_tokens=2000)
    swapped[1]["content"][0] = history(other)["content"][0]
    with pytest.raises(anthropic.BadRequestError, match="blocks in the latest assistant message cannot be modified"):
        create(client, swapped, thinking=ADAPTIVE, max_tokens=2000)
    assert text_of(create(client, dropped, thinking={"type": "disabled"}, max_tokens=2000)) == "The notes say hi."
    assert [r.outcome for r in server.requests] == ["reply", "rejected", "reply", "rejected", "reply"]


def test_redacted_thinking_is_opaque_signed_and_checked(serve: Any) -> None:
    call = tool_use("t", {}, id="toolu_01T")
    _, client = serve([reply(redacted_thinking(), thinking("visible"), call), reply("done")])
    first = create(client, [user("go")], thinking=ADAPTIVE, max_tokens=2000)
    block = first.content[0]
    assert isinstance(block, anthropic.types.RedactedThinkingBlock) and len(block.data) > 40
    convo = [user("go"), history(first), user(tool_result(call["id"]))]
    bad = copy.deepcopy(convo)
    bad[1]["content"][0]["data"] = block.data[:-8] + "AAAAAAAA"
    with pytest.raises(anthropic.BadRequestError, match="messages.1.content.0: Invalid `data` in `redacted_thinking` block"):
        create(client, bad, thinking=ADAPTIVE, max_tokens=2000)
    assert text_of(create(client, convo, thinking=ADAPTIVE, max_tokens=2000)) == "done"


def test_thinking_blocks_only_in_assistant_messages(serve: Any) -> None:
    _, client = serve([reply("ok")])
    with pytest.raises(anthropic.BadRequestError, match="`thinking` blocks can only be in `assistant` messages"):
        create(client, [user(thinking("x", signature="abc"), "hi")], thinking=ADAPTIVE, max_tokens=2000)


# --- display, disabled, streaming -------------------------------------------------------------


def test_display_omitted_sends_an_empty_thinking_with_a_signature_that_round_trips(serve: Any) -> None:
    omitted = {"type": "adaptive", "display": "omitted"}
    call = tool_use("t", {}, id="toolu_01O")
    server, client = serve([reply(thinking(THOUGHT), call), reply("done")])
    first = create(client, [user("go")], thinking=omitted, max_tokens=2000)
    assert thinking_of(first).thinking == "" and thinking_of(first).signature
    assert first.usage.output_tokens_details is not None and first.usage.output_tokens_details.thinking_tokens >= len(THOUGHT) // 4
    events = raw_events(server, {"model": MODEL, "max_tokens": 2000, "thinking": omitted, "messages": [user("go")]})
    assert [d["delta"]["type"] for n, d in events if n == "content_block_delta" and d["index"] == 0] == ["signature_delta"]
    assert text_of(create(client, [user("go"), history(first), user(tool_result(call["id"]))], thinking=omitted, max_tokens=2000)) == "done"


@pytest.mark.parametrize("config", [None, {"type": "disabled"}], ids=["absent", "disabled"])
def test_without_thinking_the_scripted_thinking_is_not_emitted(serve: Any, config: Any) -> None:
    _, client = serve([reply(thinking(THOUGHT), redacted_thinking(), "plain answer")])
    kw = {"thinking": config} if config else {}
    msg = create(client, [user("go")], **kw)
    assert [b.type for b in msg.content] == ["text"] and msg.usage.output_tokens_details is None


def test_default_thinking_is_what_a_request_without_thinking_gets(serve: Any) -> None:
    _, client = serve([reply(thinking(THOUGHT), "answer")], default_thinking="adaptive")
    assert [b.type for b in create(client, [user("go")], max_tokens=2000).content] == ["thinking", "text"]


def test_between_tools_returns_progress_notes_as_thinking_blocks(serve: Any) -> None:
    _, client = serve([reply(thinking("Reading the file next."), tool_use("t", {}))])
    msg = create(client, [user("go")], thinking={"type": "between_tools"}, max_tokens=2000)
    assert thinking_of(msg).thinking == "Reading the file next." and thinking_of(msg).signature


def test_thinking_streams_as_thinking_deltas_then_one_signature_delta(serve: Any) -> None:
    server, client = serve([reply(thinking(THOUGHT), "Answer text here.")])
    events = raw_events(server, {"model": MODEL, "max_tokens": 2000, "thinking": ADAPTIVE, "messages": [user("go")]})
    block0 = [(n, d) for n, d in events if d.get("index") == 0]
    assert block0[0] == ("content_block_start", {"type": "content_block_start", "index": 0,
                                                 "content_block": {"type": "thinking", "thinking": "", "signature": ""}})
    deltas = [d["delta"] for n, d in block0 if n == "content_block_delta"]
    assert len(deltas) > 3 and all(d["type"] == "thinking_delta" for d in deltas[:-1])
    assert "".join(d["thinking"] for d in deltas[:-1]) == THOUGHT
    assert deltas[-1]["type"] == "signature_delta" and deltas[-1]["signature"]
    assert block0[-1][0] == "content_block_stop"

    kinds: list[str] = []
    thought = ""
    with client.messages.stream(model=MODEL, max_tokens=2000, thinking=ADAPTIVE, messages=[user("go")]) as stream:
        for event in stream:
            kinds.append(event.type)
            if isinstance(event, ThinkingEvent):
                thought += event.thinking
        final = stream.get_final_message()
    assert thought == THOUGHT and kinds.count("thinking") > 3 and "signature" in kinds
    created = create(client, [user("go")], thinking=ADAPTIVE, max_tokens=2000)
    # The SDK's accumulator rebuilds the same blocks; the signature verifies (same model, same text).
    assert final.model_dump(mode="json", exclude={"id"}) == created.model_dump(mode="json", exclude={"id"})
    assert server.signer.check(MODEL, history(final)["content"][0]) == "ok"


# --- request rules ----------------------------------------------------------------------------

BAD_CONFIGS = {
    "unknown-type": ({"thinking": {"type": "sometimes"}}, "thinking: Input tag 'sometimes' found using 'type' does not match"),
    "no-type": ({"thinking": {"budget_tokens": 2000}}, "thinking: Unable to extract tag using discriminator 'type'"),
    "enabled-no-budget": ({"thinking": {"type": "enabled"}}, "thinking.enabled.budget_tokens: Field required"),
    "budget-too-small": ({"thinking": {"type": "enabled", "budget_tokens": 1000}}, "greater than or equal to 1024"),
    "budget-not-below-max": ({"thinking": {"type": "enabled", "budget_tokens": 4000}, "max_tokens": 4000},
                             "`max_tokens` must be greater than `thinking.budget_tokens`"),
    "bad-display": ({"thinking": {"type": "adaptive", "display": "full"}}, "thinking.adaptive.display: Input should be 'summarized' or 'omitted'"),
    "budget-on-adaptive": ({"thinking": {"type": "adaptive", "budget_tokens": 2000}}, "thinking.adaptive.budget_tokens: Extra inputs are not permitted"),
    "display-on-between-tools": ({"thinking": {"type": "between_tools", "display": "omitted"}}, "thinking.between_tools.display: Extra inputs"),
    "bad-effort": ({"output_config": {"effort": "extreme"}}, "output_config.effort: Input should be 'low', 'medium', 'high', 'xhigh' or 'max'"),
    "output-config-extra": ({"output_config": {"speed": "fast"}}, "output_config.speed: Extra inputs are not permitted"),
    "forced-any": ({"thinking": ADAPTIVE, "tool_choice": {"type": "any"}}, "Thinking may not be enabled when tool_choice forces tool use."),
    "forced-tool": ({"thinking": {"type": "enabled", "budget_tokens": 1024}, "tool_choice": {"type": "tool", "name": "t"}},
                    "Thinking may not be enabled when tool_choice forces tool use."),
    "temperature": ({"thinking": ADAPTIVE, "temperature": 0.2}, "`temperature` may only be set to 1 when thinking is enabled"),
    "top-k": ({"thinking": {"type": "enabled", "budget_tokens": 1024}, "top_k": 5}, "`top_k` cannot be set when thinking is enabled"),
    "top-p": ({"thinking": ADAPTIVE, "top_p": 0.5}, "`top_p` must be between 0.95 and 1"),
}
GOOD_CONFIGS = {
    "enabled": {"thinking": {"type": "enabled", "budget_tokens": 1024, "display": "omitted"}},
    "adaptive-effort": {"thinking": {"type": "adaptive"}, "output_config": {"effort": "xhigh"}},
    "between-tools-forced": {"thinking": {"type": "between_tools"}, "tool_choice": {"type": "any"}},
    "disabled-sampling": {"thinking": {"type": "disabled"}, "temperature": 0.2, "top_k": 5, "top_p": 0.5},
    "temperature-1": {"thinking": ADAPTIVE, "temperature": 1, "top_p": 0.95, "tool_choice": {"type": "auto"}},
    "effort-none": {"output_config": {"effort": None}},
}
TOOLS = [{"name": "t", "description": "a tool", "input_schema": {"type": "object", "properties": {}}}]


@pytest.mark.parametrize(("fields", "fragment"), BAD_CONFIGS.values(), ids=BAD_CONFIGS.keys())
def test_400_for_thinking_effort_and_sampling_the_api_refuses(serve: Any, fields: dict[str, Any], fragment: str) -> None:
    server, client = serve([reply("never")])
    fields = {"max_tokens": 2000, **fields}
    with pytest.raises(anthropic.BadRequestError) as err:
        create(client, [user("hi")], tools=TOOLS, max_tokens=fields.pop("max_tokens"), extra_body=fields)
    assert fragment in body_of(err.value)["error"]["message"]
    assert server.requests[0].rejected


@pytest.mark.parametrize("fields", GOOD_CONFIGS.values(), ids=GOOD_CONFIGS.keys())
def test_valid_thinking_configs_are_accepted(serve: Any, fields: dict[str, Any]) -> None:
    _, client = serve([reply("fine")])
    assert text_of(create(client, [user("hi")], tools=TOOLS, max_tokens=2000, extra_body=fields)) == "fine"


def test_a_server_can_refuse_sampling_and_thinking_types_per_model(serve: Any) -> None:
    _, client = serve([reply("ok")] * 3, refuse_sampling=("claude-test",), thinking_types={MODEL: ("adaptive", "disabled")})
    with pytest.raises(anthropic.BadRequestError, match="`temperature` is not supported on this model"):
        create(client, [user("hi")], extra_body={"temperature": 0.5})
    with pytest.raises(anthropic.BadRequestError, match="thinking.type: 'enabled' is not supported on claude-test-1"):
        create(client, [user("hi")], max_tokens=2000, thinking={"type": "enabled", "budget_tokens": 1024})
    assert text_of(create(client, [user("hi")], max_tokens=2000, thinking=ADAPTIVE)) == "ok"


# --- max_tokens cut-offs and refusals ---------------------------------------------------------


@pytest.mark.parametrize("streaming", [False, True], ids=["json", "sse"])
def test_max_tokens_cuts_a_reply_mid_thinking(serve: Any, streaming: bool) -> None:
    _, client = serve([reply(thinking(THOUGHT * 5), "The answer nobody sees.")])
    kw = {"thinking": ADAPTIVE, "max_tokens": 20}
    msg = stream_final(client, [user("go")], **kw)[1] if streaming else create(client, [user("go")], **kw)
    assert msg.stop_reason == "max_tokens" and [b.type for b in msg.content] == ["thinking"]
    assert thinking_of(msg).thinking == (THOUGHT * 5)[:80] and thinking_of(msg).signature
    assert msg.usage.output_tokens == 20


def test_max_tokens_cuts_mid_text_and_a_cut_tool_use_is_incomplete(serve: Any) -> None:
    words = "one two three four five six seven eight nine ten " * 4
    _, client = serve([[reply(thinking("short"), words), reply("intro", tool_use("write", {"text": "x" * 400}))]])
    msg = create(client, [user("go")], thinking=ADAPTIVE, max_tokens=12)
    assert msg.stop_reason == "max_tokens" and [b.type for b in msg.content] == ["thinking", "text"]
    assert text_of(msg, 1) == words[: (12 - 2) * 4]
    cut = create(client, [user("go")], thinking=ADAPTIVE, max_tokens=10)
    assert cut.stop_reason == "max_tokens" and tool_of(cut, 1).input == {}


def test_cut_off_scripts_a_truncation_below_max_tokens(serve: Any) -> None:
    _, client = serve([cut_off(thinking(THOUGHT), "never reached", after=5)])
    msg = create(client, [user("go")], thinking=ADAPTIVE, max_tokens=4000)
    assert msg.stop_reason == "max_tokens" and thinking_of(msg).thinking == THOUGHT[:20]
    assert msg.usage.output_tokens == 5 and msg.stop_sequence is None


@pytest.mark.parametrize("streaming", [False, True], ids=["json", "sse"])
def test_refusal_carries_stop_details(serve: Any, streaming: bool) -> None:
    server, client = serve([refusal("I can't help with", category="cyber", explanation="This could enable malware.")])
    msg = stream_final(client, [user("go")])[1] if streaming else create(client, [user("go")])
    assert msg.stop_reason == "refusal" and text_of(msg) == "I can't help with"
    assert isinstance(msg.stop_details, anthropic.types.RefusalStopDetails)
    assert (msg.stop_details.type, msg.stop_details.category, msg.stop_details.explanation) == (
        "refusal", "cyber", "This could enable malware.")
    events = raw_events(server, {"model": MODEL, "max_tokens": 100, "messages": [user("go")]})
    [delta] = [d for n, d in events if n == "message_delta"]
    assert delta["delta"]["stop_details"] == {"type": "refusal", "category": "cyber", "explanation": "This could enable malware."}


def test_refusal_without_a_category_and_context_window_exceeded(serve: Any) -> None:
    _, client = serve([[refusal(), reply("partial", stop_reason="model_context_window_exceeded")]])
    first = create(client, [user("go")])
    assert first.stop_reason == "refusal" and first.content == []
    assert first.stop_details is not None and first.stop_details.category is None
    second = create(client, [user("go")])
    assert second.stop_reason == "model_context_window_exceeded" and second.stop_details is None
