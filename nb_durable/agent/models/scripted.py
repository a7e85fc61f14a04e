"""``ScriptedModel``: a model that answers from a queue, for tests. No key, no network.

Each request takes the next scripted item: a message to return (built with
``text_message``/``tool_use_message`` of ``messages``), an exception to raise
(``api_error(529)``), or a function to call with the request. It keeps every request it
received. A message's gaps are filled per request (input tokens estimated from the request,
a derived tool-use id renamed if the conversation already holds it), so one script serves
any conversation. A script item that could never be served is refused when it is added, not
when it comes due. Nothing here imports ``anthropic``.
"""

from __future__ import annotations

import copy
import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ...errors import ScriptExhaustedError
from .base import TextCallback
from .messages import request_tokens, stable_id, stream_pieces, texts_of

__all__ = ["ScriptExhaustedError", "ScriptItem", "ScriptedModel"]


ScriptItem = Mapping[str, Any] | BaseException | Callable[[dict[str, Any]], Any]


class ScriptedModel:
    """A queue of canned replies, for tests: messages to return, exceptions to raise, functions."""

    name = "scripted"

    def __init__(self, replies: Iterable[ScriptItem] = (), *, latency: float = 0.0, pieces: int = 3) -> None:
        self._script: list[ScriptItem] = []
        self._served = 0
        self.latency = latency
        self.pieces = pieces
        self.requests: list[dict[str, Any]] = []
        """Every request received, in order, including those answered by an error: copies, so what
        the caller changes afterwards is not seen here. A message the previous request already
        sent, unchanged, is that request's copy, not a new one."""
        self.counted: list[dict[str, Any]] = []
        """Every request whose tokens were counted (budgets), in order."""
        self._copies = _Copies()
        self.add(*replies)

    def add(self, *replies: ScriptItem) -> None:
        """Append replies to the script (say, after a run failed because it ran dry)."""
        for item in replies:
            _check_item(item, len(self._script) + 1)
            self._script.append(item)

    @property
    def remaining(self) -> int:
        """How many scripted replies have not been used yet."""
        return len(self._script) - self._served

    def __repr__(self) -> str:
        return f"ScriptedModel(served={self._served}, remaining={self.remaining})"

    def create(
        self,
        request: Mapping[str, Any],
        on_text: TextCallback | None = None,
        on_thinking: TextCallback | None = None,
    ) -> dict[str, Any]:
        """Answer with the next scripted item; raise ``ScriptExhaustedError`` if there is none."""
        number = len(self.requests) + 1
        received, used = self._copies.of(request)
        self.requests.append(received)
        if self._served >= len(self._script):
            raise ScriptExhaustedError(
                f"ScriptedModel received request {number} but only {len(self._script)} replies were "
                f"scripted, all used. Script more (ScriptedModel.add), or find out why the agent made "
                f"another call: the last message it sent was {_last_message_summary(received)}."
            )
        item = self._script[self._served]
        self._served += 1
        if isinstance(item, BaseException):
            raise item
        if not isinstance(item, Mapping):
            item = item(copy.deepcopy(received))
            _check_item(item, self._served, from_function=True)
            if isinstance(item, BaseException):
                raise item
        reply = self._reply(item, received, used, number)
        if self.latency > 0:
            time.sleep(self.latency)
        for kind, callback in (("thinking", on_thinking), ("text", on_text)):
            if callback is None:
                continue
            for text in texts_of(reply["message"], kind):
                for piece in stream_pieces(text, max(1, -(-len(text.split()) // max(1, self.pieces)))):
                    callback(piece)
        return reply

    def count_tokens(self, request: Mapping[str, Any]) -> int:
        """The request's input tokens, by the same estimate scripted usage uses."""
        self.counted.append(self._copies.of(request)[0])
        return request_tokens(request)

    def _reply(
        self, item: Mapping[str, Any], request: Mapping[str, Any], used: frozenset[str], number: int
    ) -> dict[str, Any]:
        """A fresh reply for ``item``: its gaps filled from the request, its ids unique."""
        if "message" in item and "type" not in item:
            message, request_id = item["message"], item.get("request_id")
        else:
            message, request_id = item, None
        result: dict[str, Any] = json.loads(json.dumps(message))
        if getattr(message, "estimate_input", False):
            result["usage"]["input_tokens"] = request_tokens(request)
        auto: frozenset[str] = getattr(message, "auto_tool_ids", frozenset())
        if auto:
            for block in result["content"]:
                if block.get("type") == "tool_use" and block["id"] in auto and block["id"] in used:
                    block["id"] = stable_id("toolu_", block["id"], number)
        if request_id is None:
            request_id = stable_id("req_", number, result.get("id"))
        return {"message": result, "request_id": request_id}


class _Copies:
    """Copies of requests that share what two requests in a row both carry.

    Each request carries the whole conversation, so deep-copying every request copied turn
    n's messages n times: a 1,000-turn run spent most of its time here. The messages a
    request shares with the previous one (equal, from the start) reuse that request's copies;
    only the rest is copied. A message changed in place since is copied afresh, so a record is
    always what was sent. The tool_use ids of the conversation are kept the same way.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()  # children of one run may share a model across threads
        self._messages: list[Any] = []
        self._ids: set[str] = set()

    def of(self, request: Mapping[str, Any]) -> tuple[dict[str, Any], frozenset[str]]:
        """A copy of ``request``, and the tool_use ids its conversation already holds."""
        with self._lock:
            messages = request.get("messages")
            if not isinstance(messages, list):
                copied = copy.deepcopy(dict(request))
                return copied, frozenset(_tool_use_ids(copied.get("messages") or []))
            shared = self._shared(messages)
            return {k: shared if k == "messages" else copy.deepcopy(v) for k, v in request.items()}, frozenset(self._ids)

    def _shared(self, messages: list[Any]) -> list[Any]:
        kept = len(self._messages)
        # Compared as values, in C: this request usually starts with the whole previous one.
        if messages[:kept] != self._messages:
            pairs = enumerate(zip(messages, self._messages, strict=False))
            kept = next((i for i, (new, old) in pairs if new != old), min(kept, len(messages)))
            self._messages = self._messages[:kept]
            self._ids = _tool_use_ids(self._messages)
        tail = copy.deepcopy(messages[kept:])
        self._ids |= _tool_use_ids(tail)
        self._messages = self._messages + tail
        return list(self._messages)


def _check_item(item: Any, position: int, *, from_function: bool = False) -> None:
    """Refuse a script item that could never be served, when it is scripted, not when it is due."""
    where = f"the function for scripted reply {position}" if from_function else f"scripted reply {position}"
    if isinstance(item, type) and issubclass(item, BaseException):
        raise TypeError(f"{where} is an exception class: script an instance, such as api_error(529)")
    if isinstance(item, BaseException) or (
        callable(item) and not from_function and not isinstance(item, Mapping)
    ):
        return
    if not isinstance(item, Mapping):
        raise TypeError(
            f"{where} must be a message (text_message, tool_use_message), a reply, an exception or a function, not {type(item).__name__}"
        )
    message = item["message"] if "message" in item and "type" not in item else item
    if (
        not isinstance(message, Mapping)
        or message.get("type") != "message"
        or not isinstance(message.get("content"), list)
    ):
        raise ValueError(f"{where} is not a message: build it with text_message() or tool_use_message()")
    if not isinstance(message.get("usage"), Mapping):
        raise ValueError(f"{where} has no usage: build it with text_message() or tool_use_message()")


def _tool_use_ids(messages: Iterable[Mapping[str, Any]]) -> set[str]:
    """The tool_use ids in a conversation's messages."""
    return {
        b["id"]
        for m in messages
        if isinstance(m.get("content"), list)
        for b in m["content"]
        if isinstance(b, Mapping) and b.get("type") == "tool_use" and "id" in b
    }


def _last_message_summary(request: Mapping[str, Any]) -> str:
    """A short description of a request's last message, for error messages."""
    messages = request.get("messages") or []
    if not messages:
        return "nothing (an empty conversation)"
    last = messages[-1]
    content = last.get("content")
    if isinstance(content, str):
        return f"{last.get('role')} text {content[:60]!r}"
    kinds = [b.get("type", "?") for b in content or [] if isinstance(b, Mapping)]
    return f"a {last.get('role')} message with {', '.join(kinds) or 'no blocks'}"
