"""Fakes for tests: a loopback server that speaks the Anthropic Messages API.

``from tests.fakes import MessagesAPIServer, ScriptedScenario, reply, tool_use, Error`` works;
the fake itself is the package :mod:`tests.fakes.messages_api`.
"""

from __future__ import annotations

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
    Scenario,
    ScenarioExhausted,
    ScriptedScenario,
    StreamError,
    TurnStats,
    assistant,
    read_request_log,
    reply,
    text,
    tool_result,
    tool_use,
    turn_stats,
    usage,
    user,
)

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
