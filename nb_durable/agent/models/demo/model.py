"""``DemoModel``: a scripted agent that fixes the bundled demo project with the real tools, offline.

``DemoModel`` is an agent, not a queue. To answer a request it reads the conversation in the
request (the task, and each assistant turn's tool calls with the results recorded for them)
and lets the scenario (``scenario.next_turn``) decide the next turn. So it reacts to what the
tools really returned and keeps no state between calls (a resumed run in a new process gets
the same answer), and the same tool results always give the same transcript: ids, text and
token counts derive from the conversation, never from a clock or a random source. Only its
latency is simulated, and even that is seeded by the turn, so replays look alike.
"""

from __future__ import annotations

import math
import os
import random
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ....errors import SettingError
from ..base import TextCallback
from ..messages import make_message, request_tokens, stable_id, stream_pieces
from .delegating import pick_scenario
from .reading import Outcome
from .scenario import Context, next_turn, this_python

__all__ = ["LATENCY_ENV", "DemoModel"]

LATENCY_ENV = "NB_DURABLE_DEMO_LATENCY"
LATENCY_MAX = 1000.0
"""The slowest pace, ~20 minutes a call: past it no wait is meant (inf overflowed ``time.sleep``
at the run's first model call, after the run had started)."""


def _latency(given: float | None) -> float:
    """The latency scale given, else ``$NB_DURABLE_DEMO_LATENCY``, else 1; ``SettingError`` in the
    words it was given in, before any run starts."""
    raw: object = given
    spelled = "latency"
    if given is None:
        raw, spelled = os.environ.get(LATENCY_ENV, "").strip() or 1.0, LATENCY_ENV
    try:
        scale = float(raw)  # type: ignore[arg-type]  # what a caller or the environment gave, checked here
    except (TypeError, ValueError):
        scale = math.nan
    if not 0 <= scale <= LATENCY_MAX:  # nan too
        reason = f"must be a number from 0 to {LATENCY_MAX:g} (the demo's pace: 1 is about a real model's, 0 no waiting)"
        raise SettingError(setting="latency", value=raw, reason=reason, spelled=spelled)
    return scale


def _default_python() -> str:
    """The shell's name for Python: ``python3``, else ``python``, else this interpreter's path."""
    for name in ("python3", "python"):
        if shutil.which(name):
            return name
    return this_python()


def _blocks(content: Any) -> list[Mapping[str, Any]]:
    """A message's content as a list of blocks (a plain string is one text block)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, Mapping)]


def _result_text(block: Mapping[str, Any]) -> str:
    """A tool_result's content as text: a string, or text blocks joined."""
    content = block.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(str(b.get("text", "")) for b in _blocks(content) if b.get("type") == "text")


def _history(messages: Sequence[Mapping[str, Any]]) -> tuple[str, list[list[Outcome]], bool]:
    """The task, each assistant turn's tool calls with their results, and whether a turn ended."""
    task = ""
    turns: list[list[Outcome]] = []
    ended = False
    for index, message in enumerate(messages):
        if message.get("role") == "user" and not task and not turns:
            task = "\n".join(
                str(b.get("text", "")) for b in _blocks(message.get("content")) if b.get("type") == "text"
            )
        if message.get("role") != "assistant":
            continue
        calls = [b for b in _blocks(message.get("content")) if b.get("type") == "tool_use"]
        if not calls:
            ended = True
            continue
        following = messages[index + 1] if index + 1 < len(messages) else {}
        results = {
            b.get("tool_use_id"): b
            for b in _blocks(following.get("content"))
            if following.get("role") == "user" and b.get("type") == "tool_result"
        }
        turns.append(
            [
                Outcome(
                    str(c.get("name")),
                    c.get("input") or {},
                    _result_text(results[c.get("id")])
                    if c.get("id") in results
                    else "(no result was returned for this call)",
                    bool(results[c.get("id")].get("is_error")) if c.get("id") in results else True,
                )
                for c in calls
            ]
        )
    return task, turns, ended


class DemoModel:
    """A scripted agent that fixes the bundled demo project with the real tools, offline."""

    name = "demo"

    def __init__(
        self,
        *,
        latency: float | None = None,
        sleep: Callable[[float], None] = time.sleep,
        python: str | None = None,
    ) -> None:
        """``latency`` scales the simulated delays (1 = ~0.4-1.2 s a call, 0 = none); when it is
        None, ``NB_DURABLE_DEMO_LATENCY`` sets it, else 1. ``python`` is the command the demo
        runs the tests with (``python3`` or ``python`` from PATH by default)."""
        self.latency = _latency(latency)
        self._sleep = sleep
        self.python = python or _default_python()

    def __repr__(self) -> str:
        return f"DemoModel(latency={self.latency})"

    def count_tokens(self, request: Mapping[str, Any]) -> int:
        """The request's input tokens, by the estimate the demo's usage figures use."""
        return request_tokens(request)

    def endpoint(self) -> dict[str, str]:
        """The demo answers in this process, with no credentials."""
        return {"url": "demo (offline)", "credential": "none"}

    def create(
        self,
        request: Mapping[str, Any],
        on_text: TextCallback | None = None,
        on_thinking: TextCallback | None = None,
    ) -> dict[str, Any]:
        """Decide the next turn from the conversation so far, and say it at a human pace."""
        messages = list(request.get("messages") or [])
        task, turns, ended = _history(messages)
        tools = request.get("tools")
        offered = (
            None if tools is None else frozenset(str(t.get("name")) for t in tools if isinstance(t, Mapping))
        )
        schemas: dict[str, Mapping[str, Any]] = {}
        for t in tools or []:
            if isinstance(t, Mapping):
                schema = t.get("input_schema")
                schemas[str(t.get("name"))] = schema if isinstance(schema, Mapping) else {}
        ctx = Context(task, offered, self.python, schemas)
        turn = next_turn(ctx, turns, ended, pick_scenario(ctx))
        content: list[dict[str, Any]] = [{"type": "text", "text": turn.text}] if turn.text else []
        position = len(turns)
        for index, (name, args) in enumerate(turn.calls):
            content.append(
                {
                    "type": "tool_use",
                    "id": stable_id("toolu_", messages, position, index, name, args),
                    "name": name,
                    "input": args,
                }
            )
        message_id = stable_id("msg_", messages, content)
        message = make_message(
            content,
            stop_reason="tool_use" if turn.calls else "end_turn",
            model="demo",
            input_tokens=request_tokens(request),
            id=message_id,
        )
        _account_cache(message["usage"], request)
        self._speak(message_id, turn.text, len(turn.calls), message["usage"]["output_tokens"], on_text)
        return {"message": dict(message), "request_id": stable_id("req_", message_id)}

    def _speak(
        self, seed: str, text: str, calls: int, output_tokens: int, on_text: TextCallback | None
    ) -> None:
        """Stream ``text`` in small pieces, spending ~0.4-1.2 s (times the latency scale) in all."""
        rng = random.Random(seed)  # the same turn takes the same time: replays look alike
        total = min(1.2, 0.4 + output_tokens * 0.002 + rng.uniform(0.0, 0.3)) * self.latency
        pieces = stream_pieces(text, 3) if text else []
        # Time to the first token, then the text as it streams, then the tool inputs.
        first, streaming, tools = (0.45, 0.4, 0.15) if calls else (0.5, 0.5, 0.0)
        if not pieces:
            first += streaming
        self._wait(total * first)
        for piece in pieces:
            self._wait(total * streaming / len(pieces))
            if on_text is not None:
                on_text(piece)
        self._wait(total * tools)

    def _wait(self, seconds: float) -> None:
        """Sleep, unless there is nothing to wait for (latency 0 never calls sleep)."""
        if seconds > 0:
            self._sleep(seconds)


def _account_cache(usage: dict[str, Any], request: Mapping[str, Any]) -> None:
    """Report the prompt cache as the API would for a request marked with ``cache_control``.

    The whole prompt is written to the cache; the part the previous turn wrote (everything
    up to this turn's new user message) is read back. Simulated, like all the demo's figures.
    """
    marker = request.get("cache_control")
    if not isinstance(marker, Mapping):
        return
    total = int(usage["input_tokens"])
    messages = list(request.get("messages") or [])
    read = request_tokens({**request, "messages": messages[:-1]}) if len(messages) > 1 else 0
    read = min(read, total)
    written = total - read
    ttl = "1h" if marker.get("ttl") == "1h" else "5m"
    usage.update(
        input_tokens=0,
        cache_read_input_tokens=read,
        cache_creation_input_tokens=written,
        cache_creation={
            "ephemeral_1h_input_tokens": written if ttl == "1h" else 0,
            "ephemeral_5m_input_tokens": written if ttl == "5m" else 0,
        },
    )
