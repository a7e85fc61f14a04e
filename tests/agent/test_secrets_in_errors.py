"""Secrets stay out of the errors a run records and shows, not only out of tool results.

A model call that fails carries the SDK's words into the log (``attempt_failed``, the run's
end), the live view, the trace and the exception a notebook cell shows. Those words can hold
a credential: a key read from a file keeps its line break, which ``h11`` refuses, quoting the
whole header (``Illegal header value b'Bearer sk-...\\n'``). Proven with the real SDK against
the loopback Messages API.
"""

from __future__ import annotations

import traceback
from pathlib import Path

import pytest

from nb_durable.agent.display.step_views import StepView
from nb_durable.agent.display.views import RunView
from nb_durable.agent.models.anthropic import AnthropicModel
from nb_durable.agent.models.retry import RetryPolicy
from nb_durable.agent.run.hooks import Observer, RunHooks
from nb_durable.agent.run.loop import run_agent
from nb_durable.errors import ModelError, RunFailedError
from tests.fakes import MessagesAPIServer, ScriptedScenario, reply

pytestmark = pytest.mark.usefixtures("no_ambient_anthropic")

MODEL = "claude-test-1"
KEY = "api03-read-from-a-file-" + "K7" * 12  # no known format: only its being held masks it


def _shown(error: BaseException) -> str:
    """The traceback a notebook cell shows for ``error``, its chain included."""
    return "".join(traceback.format_exception(error))


class Seen(Observer):
    """Every error text the live view is given."""

    def __init__(self) -> None:
        self.errors: list[str] = []

    def run_changed(self, run: RunView) -> None:
        self.errors.append(run.error or "")

    def step_changed(self, step: StepView) -> None:
        self.errors.append(step.error or "")


def test_a_key_the_connection_refuses_is_masked_in_the_log_and_the_error(tmp_path: Path) -> None:
    seen = Seen()
    with MessagesAPIServer(ScriptedScenario([reply("never asked")])) as server:
        model = AnthropicModel(api_key=KEY + "\n", base_url=server.url)
        with pytest.raises(RunFailedError) as failed:
            run_agent(
                "Say hi.", client=model, model=MODEL, run_id="keyfile", store=tmp_path / "runs", workspace=tmp_path,
                retry=RetryPolicy(max_attempts=2, base_delay=0.0, jitter=0.0),
                hooks=RunHooks(observer=seen, sleep=lambda s: None),
            )
        assert server.requests == []  # refused before it left: the key never reached a server
    log = (tmp_path / "runs" / "keyfile.jsonl").read_text()
    assert '"attempt_failed"' in log and "Illegal header value" in log  # the failure is recorded, with its cause
    assert "[REDACTED:api_key]" in log
    shown = _shown(failed.value)
    assert "[REDACTED:api_key]" in shown
    assert any("[REDACTED:api_key]" in error for error in seen.errors)  # the row that says why it retries
    for text in (log, shown, *seen.errors):
        assert KEY not in text and KEY[:12] not in text
    assert isinstance(failed.value.__cause__, ModelError)



class _Gateway:
    """A model of the user's own (the ``Model`` protocol) whose failure quotes the key it used."""

    def create(self, request: dict[str, object], **_: object) -> dict[str, object]:
        raise RuntimeError(f"the gateway refused the key {ENV_KEY}")


ENV_KEY = "sk-ant-api03-" + "Q" * 40 + "AA"


def test_a_models_own_exception_quoting_a_key_is_masked_in_the_log_and_the_live_view(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", ENV_KEY)
    seen = Seen()
    with pytest.raises(RuntimeError):
        run_agent(
            "Say hi.", client=_Gateway(), model=MODEL, run_id="own", store=tmp_path / "runs", workspace=tmp_path,  # type: ignore[arg-type]
            hooks=RunHooks(observer=seen),
        )
    log = (tmp_path / "runs" / "own.jsonl").read_text()
    assert "the gateway refused the key [REDACTED:ANTHROPIC_API_KEY]" in log
    assert ENV_KEY not in log and not [e for e in seen.errors if ENV_KEY in e]
    assert any("[REDACTED:ANTHROPIC_API_KEY]" in e for e in seen.errors), "the live view says what failed"
