"""Helpers of the fake's tests: requests through the real SDK, and reading its answers."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import httpx2

from tests.fakes import MessagesAPIServer

MODEL = "claude-test-1"  # made up: real names near end of life raise DeprecationWarning
HEADERS = {"x-api-key": "test-key", "anthropic-version": "2023-06-01"}


def create(client: anthropic.Anthropic, messages: list[dict[str, Any]], **kw: Any) -> anthropic.types.Message:
    """A non-streaming request with the test model (``max_tokens`` 100 unless given)."""
    kw.setdefault("max_tokens", 100)
    return client.messages.create(model=MODEL, messages=messages, **kw)  # type: ignore[arg-type]


def stream_final(client: anthropic.Anthropic, messages: list[dict[str, Any]], **kw: Any) -> tuple[list[str], Any]:
    """A streaming request: the text pieces as they arrived, and the final message."""
    kw.setdefault("max_tokens", 100)
    with client.messages.stream(model=MODEL, messages=messages, **kw) as stream:  # type: ignore[arg-type]
        pieces = list(stream.text_stream)
        return pieces, stream.get_final_message()


def raw_events(server: MessagesAPIServer, body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """A streaming request outside the SDK: the (event name, data) pairs exactly as sent."""
    with httpx2.stream("POST", f"{server.url}/v1/messages", headers=HEADERS, json={**body, "stream": True}) as resp:
        assert resp.status_code == 200, resp.read()
        raw = resp.read().decode()
    events = [chunk.split("\n") for chunk in raw.strip().split("\n\n")] if raw.strip() else []
    assert all(len(e) == 2 and e[0].startswith("event: ") and e[1].startswith("data: ") for e in events), raw
    return [(e[0][len("event: "):], json.loads(e[1][len("data: "):])) for e in events]


def history(message: Any) -> dict[str, Any]:
    """The assistant message to send back, as DESIGN.md stores it."""
    return {"role": "assistant", "content": [b.model_dump(mode="json", exclude_none=True) for b in message.content]}


def raw_post(server: MessagesAPIServer, body: Any, headers: dict[str, str] | None = None) -> httpx2.Response:
    """A request outside the SDK (no client-side checks, exact headers)."""
    return httpx2.post(f"{server.url}/v1/messages", json=body, headers=HEADERS if headers is None else headers)


def text_of(message: anthropic.types.Message, index: int = 0) -> str:
    """The text of block ``index`` of a reply, which must be a text block."""
    block = message.content[index]
    assert isinstance(block, anthropic.types.TextBlock), block
    return block.text


def tool_of(message: anthropic.types.Message, index: int = 0) -> anthropic.types.ToolUseBlock:
    """Block ``index`` of a reply, which must be a tool_use block."""
    block = message.content[index]
    assert isinstance(block, anthropic.types.ToolUseBlock), block
    return block


def thinking_of(message: anthropic.types.Message, index: int = 0) -> anthropic.types.ThinkingBlock:
    """Block ``index`` of a reply, which must be a thinking block."""
    block = message.content[index]
    assert isinstance(block, anthropic.types.ThinkingBlock), block
    return block


def cache_read(message: anthropic.types.Message) -> int:
    """``usage.cache_read_input_tokens`` of a reply, which must be reported."""
    assert message.usage.cache_read_input_tokens is not None, message.usage
    return message.usage.cache_read_input_tokens


def cache_written(message: anthropic.types.Message) -> int:
    """``usage.cache_creation_input_tokens`` of a reply, which must be reported."""
    assert message.usage.cache_creation_input_tokens is not None, message.usage
    return message.usage.cache_creation_input_tokens


def body_of(error: anthropic.APIStatusError) -> dict[str, Any]:
    """The JSON body of an error the SDK raised."""
    assert isinstance(error.body, dict), error.body
    return error.body
