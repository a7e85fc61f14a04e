"""The loopback Messages API as the browser tests share it: one script per model name.

A Lab server knows one ``ANTHROPIC_BASE_URL``, so every kernel of every Lab server in the
session talks to one server; each test names its own model and sees only its own requests.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from tests.fakes import (
    MessagesAPIServer,
    RecordedRequest,
    Scenario,
    ScenarioExhausted,
    ScriptedScenario,
    turn_stats,
)


class ByModel(Scenario):
    """One script per model name, with attempts counted per model and turn, so that tests
    sharing one server (the Lab server knows one ``ANTHROPIC_BASE_URL``) never mix."""

    def __init__(self) -> None:
        self.scripts: dict[str, ScriptedScenario] = {}
        self.attempts: dict[tuple[str, int], int] = {}

    def action(self, request: RecordedRequest) -> Any:
        model = str(request.body.get("model")) if isinstance(request.body, dict) else ""
        if model not in self.scripts:
            raise ScenarioExhausted(f"no script for model {model!r}")
        key = (model, request.turn or 0)
        self.attempts[key] = self.attempts.get(key, 0) + 1
        return self.scripts[model].action(dataclasses.replace(request, attempt=self.attempts[key]))


@dataclass
class Script:
    """A test's view of the shared server: its own script, its own requests."""

    server: MessagesAPIServer
    model: str

    def requests(self) -> list[RecordedRequest]:
        return [r for r in self.server.requests if isinstance(r.body, dict) and r.body.get("model") == self.model]

    def requests_at(self, turn: int) -> list[RecordedRequest]:
        return [r for r in self.requests() if r.turn == turn]

    def assert_no_repeats(self) -> None:
        """No completed turn was asked again, and no request was refused as malformed."""
        records = self.requests()
        stats = turn_stats(records)
        assert all(s.repeats == 0 for s in stats.values()), stats
        assert not [r for r in records if r.rejected], [r.error_message for r in records if r.rejected]
