"""The fake Messages API's prompt cache, count_tokens, and usage, through the real SDK."""

from __future__ import annotations

from typing import Any

import anthropic
import pytest

from tests.fakes import MessagesAPIServer, prompt_tokens, reply, text, thinking, tool_result, tool_use, user
from tests.fakes.sdk import (
    MODEL,
    body_of,
    cache_read,
    cache_written,
    create,
    history,
    raw_events,
    raw_post,
    stream_final,
)

SYSTEM = [{"type": "text", "text": "You are a careful agent. " * 40}]
TOOLS = [{"name": f"tool_{k}", "description": "does a thing " * 10, "input_schema": {"type": "object"}} for k in range(3)]
AUTO = {"type": "ephemeral"}


def body(messages: list[dict[str, Any]], **kw: Any) -> dict[str, Any]:
    """A request body as the SDK sends it, for computing the expected counts."""
    return {"model": MODEL, "max_tokens": 100, "messages": messages, **kw}


def counted(client: anthropic.Anthropic, messages: list[dict[str, Any]], **kw: Any) -> int:
    """count_tokens for the same request."""
    kw.pop("max_tokens", None)
    return client.messages.count_tokens(model=MODEL, messages=messages, **kw).input_tokens  # type: ignore[arg-type]


def split(msg: Any) -> tuple[int, int, int, int, int]:
    """(input, cache read, cache write, 5m write, 1h write) of a reply's usage."""
    u = msg.usage
    assert u.cache_creation is not None
    return (u.input_tokens, u.cache_read_input_tokens, u.cache_creation_input_tokens,
            u.cache_creation.ephemeral_5m_input_tokens, u.cache_creation.ephemeral_1h_input_tokens)


def test_without_cache_control_nothing_is_cached_and_usage_equals_count_tokens(serve: Any) -> None:
    server, client = serve([reply("a")] * 2)
    for _ in range(2):
        msg = create(client, [user("hello")], system=SYSTEM, tools=TOOLS)
        assert split(msg) == (counted(client, [user("hello")], system=SYSTEM, tools=TOOLS), 0, 0, 0, 0)
    assert msg.usage.input_tokens == prompt_tokens(body([user("hello")], system=SYSTEM, tools=TOOLS))
    assert len(server.cache) == 0


def test_top_level_cache_control_writes_the_prefix_then_the_next_turn_reads_it(serve: Any) -> None:
    call = tool_use("tool_0", {"q": 1}, id="toolu_01C")
    server, client = serve([reply("first", call), reply("second")])
    convo = [user("start")]
    first = create(client, convo, system=SYSTEM, tools=TOOLS, cache_control=AUTO)
    total1 = counted(client, convo, system=SYSTEM, tools=TOOLS, cache_control=AUTO)
    assert split(first) == (0, 0, total1, total1, 0)  # the whole prompt was written, at 5m

    convo = [user("start"), history(first), user(tool_result(call["id"], "result " * 30))]
    second = create(client, convo, system=SYSTEM, tools=TOOLS, cache_control=AUTO)
    total2 = counted(client, convo, system=SYSTEM, tools=TOOLS, cache_control=AUTO)
    assert split(second) == (0, total1, total2 - total1, total2 - total1, 0)  # read turn 1, wrote the new part
    again = create(client, convo, system=SYSTEM, tools=TOOLS, cache_control=AUTO)
    assert split(again) == (0, total2, 0, 0, 0)
    assert [r.endpoint for r in server.requests] == ["messages", "count_tokens"] * 2 + ["messages"]
    assert server.requests[2].usage == second.usage.model_dump(exclude_none=True) | {"output_tokens": second.usage.output_tokens}


def test_block_breakpoints_split_writes_by_ttl_and_the_rest_is_input(serve: Any) -> None:
    system = [{**SYSTEM[0], "cache_control": {"type": "ephemeral", "ttl": "1h"}}]
    tools = [*TOOLS[:-1], {**TOOLS[-1], "cache_control": {"type": "ephemeral", "ttl": "1h"}}]
    convo = [user(text("a question " * 20) | {"cache_control": {"type": "ephemeral", "ttl": "5m"}}, "uncached tail")]
    _, client = serve([reply("ok")] * 2)
    msg = create(client, convo, system=system, tools=tools)
    b = body(convo, system=system, tools=tools)
    tools_part = prompt_tokens({"tools": TOOLS})
    system_part = prompt_tokens({"system": SYSTEM})
    tail = prompt_tokens({"messages": [user("uncached tail")]})
    total = prompt_tokens(b)
    assert split(msg) == (tail, 0, total - tail, total - tail - tools_part - system_part, tools_part + system_part)
    # A different last message reads the 1h prefix (tools + system) and writes its own 5m part.
    other = [user(text("another question " * 20) | {"cache_control": {"type": "ephemeral"}})]
    second = create(client, other, system=system, tools=tools)
    assert cache_read(second) == tools_part + system_part
    assert cache_written(second) == prompt_tokens({"messages": other})


def test_the_cache_is_per_model_and_clears(serve: Any) -> None:
    server, client = serve([reply("ok")] * 4)
    create(client, [user("hi " * 50)], cache_control=AUTO)
    other = client.messages.create(model="claude-other-1", max_tokens=10, messages=[user("hi " * 50)], cache_control=AUTO)
    assert cache_read(other) == 0 and cache_written(other) > 0
    assert cache_read(create(client, [user("hi " * 50)], cache_control=AUTO)) > 0
    server.cache.clear()
    assert cache_read(create(client, [user("hi " * 50)], cache_control=AUTO)) == 0


def test_entries_expire_after_their_ttl_and_a_read_refreshes_them(serve: Any) -> None:
    now = [0.0]
    _, client = serve([reply("ok")] * 5, clock=lambda: now[0])
    convo = [user("hi " * 50)]
    assert cache_written(create(client, convo, cache_control=AUTO)) > 0
    now[0] = 299.0
    assert cache_read(create(client, convo, cache_control=AUTO)) > 0  # and refreshed
    now[0] = 598.0
    assert cache_read(create(client, convo, cache_control=AUTO)) > 0
    now[0] = 1000.0
    assert cache_read(create(client, convo, cache_control=AUTO)) == 0  # 5m ran out
    one_hour = {"type": "ephemeral", "ttl": "1h"}
    create(client, convo, cache_control=one_hour)
    now[0] = 1000.0 + 3000
    assert cache_read(create(client, convo, cache_control=one_hour)) > 0


def test_minimum_cacheable_length_is_per_model(serve: Any) -> None:
    _, client = serve([reply("ok")] * 4, min_cacheable_tokens={MODEL: 200})
    short, long = [user("short prompt")], [user("a long prompt " * 80)]
    for _ in range(2):
        assert cache_written(create(client, short, cache_control=AUTO)) == 0
        assert cache_read(create(client, short, cache_control=AUTO)) == 0
    assert cache_written(create(client, long, cache_control=AUTO)) > 200
    assert cache_read(create(client, long, cache_control=AUTO)) > 200


def test_lookback_finds_a_prefix_at_most_20_blocks_back(serve: Any) -> None:
    server, client = serve([reply("ok")] * 3)
    convo = [user(*[f"block {k}" for k in range(5)])]
    create(client, convo, cache_control=AUTO)
    near = [user(*[f"block {k}" for k in range(25)])]  # the breakpoint is 20 blocks after the cached one
    assert cache_read(create(client, near, cache_control=AUTO)) == prompt_tokens(body(convo))
    server.cache.clear()
    create(client, convo, cache_control=AUTO)
    far = [user(*[f"block {k}" for k in range(26)])]
    assert cache_read(create(client, far, cache_control=AUTO)) == 0


BAD_BREAKPOINTS = {
    "five-blocks": ([user(*[text(f"b{k}") | {"cache_control": AUTO} for k in range(5)])], {},
                    "A maximum of 4 blocks with cache_control may be provided. Found 5."),
    "four-and-top-level": ([user(*[text(f"b{k}") | {"cache_control": AUTO} for k in range(4)], "last")], {"cache_control": AUTO},
                           "A maximum of 4 blocks with cache_control may be provided. Found 5."),
    "1h-after-5m": ([user(text("a") | {"cache_control": AUTO}, text("b") | {"cache_control": {"type": "ephemeral", "ttl": "1h"}})], {},
                    "messages.0.content.1: a cache_control breakpoint with ttl='1h' cannot come after one with ttl='5m'"),
    "bad-ttl": ([user(text("a") | {"cache_control": {"type": "ephemeral", "ttl": "10m"}})], {},
                "messages.0.content.0.cache_control.ttl: Input should be '5m' or '1h'"),
    "bad-type": ([user("a")], {"cache_control": {"type": "persistent"}}, "cache_control.type: Input should be 'ephemeral'"),
    "empty-text": ([user("a")], {"system": [text("") | {"cache_control": AUTO}]},
                   "system.0: cache_control cannot be set for empty text blocks"),
    "thinking": ([user("a"), {"role": "assistant", "content": [thinking("t", signature="s") | {"cache_control": AUTO}]}, user("b")], {},
                 "messages.1.content.0: `cache_control` cannot be set on `thinking` blocks"),
}


@pytest.mark.parametrize(("messages", "extra", "fragment"), BAD_BREAKPOINTS.values(), ids=BAD_BREAKPOINTS.keys())
def test_400_for_breakpoints_the_api_refuses(serve: Any, messages: list[dict[str, Any]], extra: dict[str, Any], fragment: str) -> None:
    server, client = serve([reply("never")])
    with pytest.raises(anthropic.BadRequestError) as err:
        create(client, messages, **extra)
    assert body_of(err.value)["error"]["message"] == fragment or fragment in body_of(err.value)["error"]["message"]
    with pytest.raises(anthropic.BadRequestError, match="cache_control"):
        counted(client, messages, **extra)
    assert [r.outcome for r in server.requests] == ["rejected", "rejected"] and len(server.cache) == 0


def test_1h_before_5m_and_a_top_level_marker_on_an_already_marked_block_are_fine(serve: Any) -> None:
    _, client = serve([reply("ok")] * 2)
    convo = [user(text("a") | {"cache_control": {"type": "ephemeral", "ttl": "1h"}}, text("b") | {"cache_control": AUTO})]
    assert create(client, convo).usage.cache_creation is not None
    marked = [user(*[text(f"b{k}") | {"cache_control": AUTO} for k in range(4)])]
    assert cache_written(create(client, marked, cache_control=AUTO)) > 0


# --- count_tokens -----------------------------------------------------------------------------


def test_count_tokens_is_validated_recorded_and_kept_out_of_turns(serve: Any) -> None:
    server, client = serve([reply("only reply")])
    n = counted(client, [user("hello")], system=SYSTEM, tools=TOOLS, thinking={"type": "adaptive"})
    assert n == prompt_tokens(body([user("hello")], system=SYSTEM, tools=TOOLS)) and n > 100
    with pytest.raises(anthropic.BadRequestError, match='multiple "user" roles'):
        counted(client, [user("a"), user("b")])
    with pytest.raises(anthropic.BadRequestError, match="Thinking may not be enabled when tool_choice forces tool use"):
        counted(client, [user("a")], tools=TOOLS, thinking={"type": "adaptive"}, tool_choice={"type": "any"})
    msg = create(client, [user("hello")], system=SYSTEM, tools=TOOLS)
    assert msg.usage.input_tokens == n
    records = server.requests
    assert [(r.endpoint, r.outcome, r.attempt) for r in records] == [
        ("count_tokens", "counted", None), ("count_tokens", "rejected", None), ("count_tokens", "rejected", None),
        ("messages", "reply", 1)]
    assert records[0].path == "/v1/messages/count_tokens" and records[0].usage == {"input_tokens": n}
    assert server.requests_to("count_tokens") == records[:3] and server.turn_stats()[0].requests == 1
    assert not [r for r in server.requests_to("count_tokens") if r.outcome == "counted" and r.index > records[-1].index]


def test_count_tokens_rejects_stream_and_needs_no_max_tokens(serve: Any) -> None:
    server, _ = serve([reply("x")])
    import httpx2

    url = f"{server.url}/v1/messages/count_tokens"
    headers = {"x-api-key": "k", "anthropic-version": "2023-06-01"}
    ok = httpx2.post(url, headers=headers, json={"model": MODEL, "messages": [user("hi")]})
    assert ok.status_code == 200 and ok.json() == {"input_tokens": prompt_tokens(body([user("hi")]))}
    bad = httpx2.post(url, headers=headers, json={"model": MODEL, "messages": [user("hi")], "stream": True})
    assert bad.status_code == 400 and "stream" in bad.json()["error"]["message"]


def test_max_tokens_zero_prewarms_the_cache_without_a_turn(serve: Any) -> None:
    server, client = serve([reply("real answer")])
    warm = create(client, [user("big context " * 60)], cache_control=AUTO, max_tokens=0)
    assert warm.content == [] and warm.stop_reason == "max_tokens" and warm.usage.output_tokens == 0
    assert cache_written(warm) > 0
    real = create(client, [user("big context " * 60)], cache_control=AUTO)
    assert cache_read(real) == cache_written(warm)
    assert [(r.outcome, r.attempt) for r in server.requests] == [("prewarm", None), ("reply", 1)]
    assert server.turn_stats()[0].requests == 1


# --- usage and model --------------------------------------------------------------------------


def test_stream_usage_is_split_between_message_start_and_message_delta(serve: Any) -> None:
    server, client = serve([reply(thinking("thinking about it " * 5), "the answer " * 10)])
    create(client, [user("warm " * 40)], cache_control=AUTO, max_tokens=0, thinking={"type": "adaptive"})
    events = raw_events(server, {"model": MODEL, "max_tokens": 2000, "thinking": {"type": "adaptive"},
                                 "cache_control": AUTO, "messages": [user("warm " * 40)]})
    start = events[0][1]["message"]["usage"]
    [delta] = [d["usage"] for n, d in events if n == "message_delta"]
    assert start["output_tokens"] == 1 and start["cache_read_input_tokens"] > 0 and "cache_creation" in start
    assert "output_tokens_details" not in start and "cache_creation" not in delta
    assert delta["output_tokens"] > 20 and delta["output_tokens_details"]["thinking_tokens"] > 0
    assert {k: delta[k] for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")} == {
        k: start[k] for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")}
    final = stream_final(client, [user("warm " * 40)], thinking={"type": "adaptive"}, cache_control=AUTO, max_tokens=2000)[1]
    assert final.usage.output_tokens == delta["output_tokens"] and final.usage.cache_creation is not None


def test_the_answering_model_can_differ_from_the_requested_one(serve: Any) -> None:
    _, client = serve([reply("a"), reply("b", model="claude-scripted-9")], answering_model="claude-test-1-20261201")
    assert create(client, [user("hi")]).model == "claude-test-1-20261201"
    assert stream_final(client, [user("hi")])[1].model == "claude-test-1-20261201"
    assert create(client, [user("x"), {"role": "assistant", "content": "a"}, user("y")]).model == "claude-scripted-9"
    with MessagesAPIServer([reply("c")], answering_model={MODEL: "claude-mapped"}) as mapped:
        resp = raw_post(mapped, body([user("hi")]))
        assert resp.json()["model"] == "claude-mapped"
        other = raw_post(mapped, {**body([user("hi")]), "model": "claude-unmapped"})
        assert other.json()["model"] == "claude-unmapped"


def test_a_change_of_thinking_config_invalidates_the_message_prefix_only(serve: Any) -> None:
    system = [{**SYSTEM[0], "cache_control": AUTO}]
    _, client = serve([reply("ok")] * 3)
    convo = [user("question " * 40)]
    create(client, convo, system=system, cache_control=AUTO, max_tokens=2000, thinking={"type": "adaptive"})
    same = create(client, convo, system=system, cache_control=AUTO, max_tokens=2000, thinking={"type": "adaptive"})
    assert cache_read(same) == prompt_tokens(body(convo, system=SYSTEM))
    changed = create(client, convo, system=system, cache_control=AUTO, max_tokens=2000, thinking={"type": "disabled"})
    assert cache_read(changed) == prompt_tokens({"system": SYSTEM}) and cache_written(changed) == prompt_tokens(body(convo))


def test_a_context_window_refuses_long_prompts_and_stops_long_replies(serve: Any) -> None:
    server, client = serve([reply(thinking("mulling " * 50), "answer " * 50)], context_window={MODEL: 60})
    with pytest.raises(anthropic.BadRequestError, match=r"prompt is too long: \d+ tokens > 60 maximum"):
        create(client, [user("long " * 100)])
    prompt = [user("short")]
    msg = create(client, prompt, thinking={"type": "adaptive"}, max_tokens=4000)
    assert msg.stop_reason == "model_context_window_exceeded" and [b.type for b in msg.content] == ["thinking"]
    assert msg.usage.output_tokens == 60 - prompt_tokens(body(prompt))
    small = create(client, prompt, thinking={"type": "adaptive"}, max_tokens=10)
    assert small.stop_reason == "max_tokens"  # the lower limit names the stop
    assert [r.outcome for r in server.requests] == ["rejected", "reply", "reply"]


def test_usage_totals_over_a_cached_tool_loop(serve: Any) -> None:
    turns = 6
    calls = [tool_use("tool_0", {"step": k}, id=f"toolu_01LOOP{k}") for k in range(turns)]
    server, client = serve([reply(f"step {k}", calls[k]) for k in range(turns)] + [reply("done")])
    convo = [user("do the task")]
    for k in range(turns + 1):
        counted(client, convo, system=SYSTEM, tools=TOOLS, cache_control=AUTO)
        msg = create(client, convo, system=SYSTEM, tools=TOOLS, cache_control=AUTO)
        if k < turns:
            convo += [history(msg), user(tool_result(calls[k]["id"], f"result {k} " * 40))]
    totals = server.usage_totals()
    counts = [r.usage["input_tokens"] for r in server.requests_to("count_tokens") if r.usage]
    assert totals.requests == turns + 1 and len(counts) == turns + 1
    assert totals.input_tokens + totals.cache_read_input_tokens + totals.cache_creation_input_tokens == sum(counts)
    assert totals.cache_creation_input_tokens == counts[-1] and totals.ephemeral_1h_input_tokens == 0
    assert totals.cache_read_input_tokens == sum(counts[:-1])  # each turn read the whole previous prompt
    # At list-price ratios (write 1.25x, read 0.1x), caching cut the input bill by well over half.
    cached = totals.input_tokens + 1.25 * totals.cache_creation_input_tokens + 0.1 * totals.cache_read_input_tokens
    assert cached < 0.5 * sum(counts)
