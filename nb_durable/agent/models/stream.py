"""A streamed Messages API reply, read as its raw server-sent events and accumulated here.

The SDK's stream helper builds a typed object for every event and then for the message it
accumulates: a fifth of a worker's CPU a run, for an answer that is recorded as JSON anyway.
This reads the events the SDK decodes (its ``SSEDecoder`` over the body's bytes, as
``Stream.raw_events`` offers for reading a body oneself; its call span still ends with the
body) as JSON and applies the
rules of the SDK's ``accumulate_event``: text, tool input JSON, citations, thinking and its
signature; a ``message_delta`` sets the stop fields and overwrites the usage counts it
carries, and the counts it omits keep ``message_start``'s. The message then gets the SDK's
shape once, so a recorded reply is what the SDK's ``model_dump`` gives: validated by the
SDK's types (pydantic's compiled validator: under a third of the CPU of the SDK's
``construct``, which rebuilds every field in Python), or, for a reply those types refuse (a block type newer than
this SDK, a count the stream left out), built by ``construct`` as the SDK's stream builds it.
An ``error`` event raises the SDK's own status error, as its stream does.

A stream that breaks after ``message_start`` has been paid for as far as it got: the message
begun (its ``model`` and the ``usage`` its ``message_start`` and any ``message_delta`` reported)
is left in the caller's ``reported``, for the failure to carry (``broken_usage``).

A stall limit is counted from the last event that carries progress: the API keeps a stuck
generation's connection alive with ``ping`` events, and each ping resets the read timeout
(which catches silence only), so the bytes themselves are watched too.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator
from typing import Any

from ...errors import TransientModelError
from .base import TextCallback

__all__ = ["broken_usage", "read_message", "sdk_shape", "stalled"]

_TRACKS_INPUT = frozenset({"tool_use", "server_tool_use"})
"""The blocks whose ``input`` arrives as ``input_json_delta`` pieces (the SDK's ``TRACKS_TOOL_INPUT``)."""

_RUNNING_TOTALS = (
    "input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "server_tool_use", "output_tokens_details"
)
"""The usage a ``message_delta`` may carry besides ``output_tokens``, as the SDK takes it."""


def read_message(
    stream: Any, on_text: TextCallback | None = None, on_thinking: TextCallback | None = None, *, stall: float | None = None,
    reported: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The message an SDK ``Stream`` (``messages.create(stream=True)``) carries, as the SDK
    dumps it to JSON; ``TransientModelError`` when the stream ends before ``message_stop``, or
    (``stalled``) when ``stall`` seconds pass with nothing but pings. ``reported["message"]``
    is the message as far as it came, from its ``message_start`` on, whatever then fails."""
    from anthropic._streaming import SSEDecoder

    chunks: Iterable[bytes] = stream.response.iter_bytes()  # what ``Stream.raw_events`` decodes
    events: Iterable[Any]
    if stall is None:
        events = SSEDecoder().iter_bytes(iter(chunks))
    else:
        watch = _StallWatch(stall)
        events = watch.events(SSEDecoder().iter_bytes(watch.chunks(chunks)))
    message = accumulate(events, stream, on_text, on_thinking, reported)
    return sdk_shape(message)


def broken_usage(reported: dict[str, Any], asked: str) -> dict[str, Any] | None:
    """What a stream that broke had reported using (``AttemptFailed.usage``): its usage counts,
    the model that answered and the one ``asked``; None if it broke before ``message_start``."""
    message = reported.get("message")
    if not isinstance(message, dict) or not isinstance(message.get("usage"), dict):
        return None
    return {**message["usage"], "model": str(message.get("model") or ""), "asked_model": asked}


def sdk_shape(message: dict[str, Any]) -> dict[str, Any]:
    """``message`` (the JSON a stream accumulated) as the SDK's ``Message.model_dump(mode="json")`` gives it."""
    from anthropic.types import Message
    from pydantic import ValidationError

    try:
        return dict(Message.model_validate(message).model_dump(mode="json"))
    except ValidationError:
        # Dumped without pydantic's serializer warnings: a block type newer than this SDK is no
        # fault of the run's, and a notebook would show one warning for every type it is not.
        return dict(Message.construct(**message).model_dump(mode="json", warnings=False))


def stalled(seconds: float) -> TransientModelError:
    """The failure of an attempt whose stream made no progress for ``seconds`` (``stall_timeout``)."""
    return TransientModelError(
        f"the Messages API stream stalled: no event for {seconds:g} s (stall_timeout)", error_type="stalled_stream"
    )


class _StallWatch:
    """A stall limit counted from the last event that is not a ping.

    Every chunk of bytes is checked against the limit before it is decoded: a ping, an SSE
    comment or any other keep-alive arrives as bytes, and a chunk that carries progress after
    the limit came too late (the stream had stalled by then). The read timeout still catches
    a silent stream between chunks.
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.progress = time.monotonic()  # the response's headers: the stream has begun

    def chunks(self, chunks: Iterable[bytes]) -> Iterator[bytes]:
        for chunk in chunks:
            if time.monotonic() - self.progress > self.seconds:
                raise stalled(self.seconds)
            yield chunk

    def events(self, events: Iterable[Any]) -> Iterator[Any]:
        for sse in events:
            if sse.event != "ping":
                self.progress = time.monotonic()
            yield sse


def accumulate(
    events: Iterable[Any], stream: Any, on_text: TextCallback | None, on_thinking: TextCallback | None,
    reported: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The message that ``events`` (server-sent events: ``.event``, ``.data``) build, as JSON;
    ``reported`` gets it at its ``message_start`` (``read_message``)."""
    message: dict[str, Any] | None = None
    inputs: dict[int, str] = {}
    events = iter(events)
    for sse in events:
        name = sse.event
        if name == "error":
            raise _error_event(sse, stream)
        if name is None or name == "ping" or not sse.data:
            continue
        event = json.loads(sse.data)
        kind = event.get("type")
        if kind == "message_start":
            message = event["message"]
            message["content"] = list(message.get("content") or [])
            if reported is not None:
                reported["message"] = message  # its usage is updated in place by each message_delta
            continue
        if message is None:
            raise TransientModelError(
                f"the Messages API stream sent {kind!r} before 'message_start'", error_type="incomplete_stream"
            )
        if kind == "content_block_start":
            message["content"].append(event["content_block"])
        elif kind == "content_block_delta":
            _add_delta(message["content"][event["index"]], event["index"], event["delta"], inputs, on_text, on_thinking)
        elif kind == "content_block_stop":
            pieces = inputs.pop(event["index"], "")
            if pieces:  # none: the block keeps the input it started with
                message["content"][event["index"]]["input"] = _tool_input(pieces)
        elif kind == "message_delta":
            _add_message_delta(message, event)
        elif kind == "message_stop":
            for index, pieces in inputs.items():  # a block the stream never stopped
                if pieces:
                    message["content"][index]["input"] = _tool_input(pieces)
            for _ in events:
                pass  # to the body's end: a connection closed with a body unread is not reused
            return message
    # An empty stream, or one cut before message_stop, holds a fragment at best: never a
    # finished answer to record.
    raise TransientModelError(
        "the Messages API stream ended before the answer was complete (no message_stop event)",
        error_type="incomplete_stream",
    )


def _add_delta(
    block: dict[str, Any], index: int, delta: dict[str, Any], inputs: dict[int, str],
    on_text: TextCallback | None, on_thinking: TextCallback | None,
) -> None:  # fmt: skip
    kind, block_type = delta.get("type"), block.get("type")
    if kind == "text_delta" and block_type == "text":
        block["text"] += delta["text"]
        if on_text is not None:
            on_text(delta["text"])
    elif kind == "input_json_delta" and block_type in _TRACKS_INPUT:
        inputs[index] = inputs.get(index, "") + delta["partial_json"]
    elif kind == "citations_delta" and block_type == "text":
        block["citations"] = [*(block.get("citations") or []), delta["citation"]]
    elif kind == "thinking_delta" and block_type == "thinking":
        block["thinking"] += delta["thinking"]
        if on_thinking is not None:
            on_thinking(delta["thinking"])
    elif kind == "signature_delta" and block_type == "thinking":
        block["signature"] = delta["signature"]


def _add_message_delta(message: dict[str, Any], event: dict[str, Any]) -> None:
    delta = event.get("delta") or {}
    for name in ("stop_reason", "stop_sequence", "stop_details"):
        message[name] = delta.get(name)
    if delta.get("container") is not None:
        message["container"] = delta["container"]
    usage = event.get("usage") or {}
    counts = message.setdefault("usage", {})
    counts["output_tokens"] = usage.get("output_tokens")
    # A message_delta's counts are running totals: they overwrite, and one it omits keeps
    # message_start's value.
    for name in _RUNNING_TOTALS:
        if usage.get(name) is not None:
            counts[name] = usage[name]


def _tool_input(pieces: str) -> Any:
    try:
        return json.loads(pieces)
    except ValueError:
        pass
    # A reply cut off (max_tokens, a full window) stops a tool call's input mid-JSON: take what
    # it holds, as the SDK's own stream does, so the loop can see the cut and say so.
    from jiter import from_json

    try:
        return from_json(pieces.encode(), partial_mode=True)
    except ValueError as e:
        raise ValueError(
            f"Unable to parse tool parameter JSON from model. Please retry your request or adjust your prompt. "
            f"Error: {e}. JSON: {pieces}"
        ) from None


def _error_event(sse: Any, stream: Any) -> Exception:
    """The SDK's status error for an ``error`` event, made as its own stream makes it."""
    body: object = sse.data
    try:
        body = json.loads(sse.data)
        message = f"{body}"
    except ValueError:
        message = sse.data or f"Error code: {stream.response.status_code}"
    return stream._client._make_status_error(message, body=body, response=stream.response)  # type: ignore[no-any-return]
