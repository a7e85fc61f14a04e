"""A loopback HTTP server that speaks the Anthropic Messages API, for tests.

Design:

* The real ``anthropic`` SDK (2.x, built on httpx2, which respx/pytest-httpx cannot see) talks
  to this server over TCP: in-process (a ``ThreadingHTTPServer`` in a daemon thread), from real
  Jupyter kernels via ``ANTHROPIC_BASE_URL``, or as a separate process
  (``python -m tests.fakes.messages_api --port P --scenario FILE.json --log FILE.jsonl``).
* Replies depend on the conversation, not on a global queue; a scenario maps each request to
  an action (a reply or a fault), by turn and attempt.
* Strict where the real API is strict; refused requests are recorded and never reach the
  scenario.
* Every request is recorded, and the per-turn bookkeeping is a pure function of the records.
* Standard library only: the subprocess starts fast and never imports anthropic.

One concept per module:

* ``content``: building blocks and messages (``text``, ``tool_use``, ``user``, ...);
* ``scenario``: the actions (``Reply``, ``Error``, ``StreamError``, ``Delay``, ``Drop``) and
  the scenarios that choose them, with their JSON form;
* ``validate``: the request rules of the real API;
* ``wire``: message JSON, error bodies and Server-Sent Events;
* ``records``: ``RecordedRequest``, the JSON-lines log, and ``turn_stats`` (what *answered*,
  *completed* and *repeat* mean is written there);
* ``connection``: one HTTP connection (keep-alive, chunked SSE, drops);
* ``server``: ``MessagesAPIServer``, which ties them together;
* ``process`` and ``__main__``: the same server in a child process.
"""

from __future__ import annotations

from tests.fakes.messages_api.content import assistant, text, tool_result, tool_use, usage, user
from tests.fakes.messages_api.process import MessagesAPIProcess
from tests.fakes.messages_api.records import RecordedRequest, TurnStats, read_request_log, turn_stats
from tests.fakes.messages_api.scenario import (
    STOP_REASONS,
    Delay,
    Drop,
    Error,
    FunctionScenario,
    Reply,
    Scenario,
    ScenarioExhausted,
    ScriptedScenario,
    StreamError,
    action_from_json,
    action_to_json,
    reply,
)
from tests.fakes.messages_api.server import MessagesAPIServer

__all__ = [
    "Delay",
    "Drop",
    "Error",
    "FunctionScenario",
    "MessagesAPIProcess",
    "MessagesAPIServer",
    "RecordedRequest",
    "Reply",
    "STOP_REASONS",
    "Scenario",
    "ScenarioExhausted",
    "ScriptedScenario",
    "StreamError",
    "TurnStats",
    "action_from_json",
    "action_to_json",
    "assistant",
    "read_request_log",
    "reply",
    "text",
    "tool_result",
    "tool_use",
    "turn_stats",
    "usage",
    "user",
]
