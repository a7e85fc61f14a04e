"""A stop reason this version does not know never ends a run *completed*, through the real SDK
against the loopback Messages API answering ``stop_reason: "some_future_reason"``: the reply is
recorded (it was paid for) and marked, the run ends *unknown_stop* saying why, and a resume
asks the turn again. A log an earlier version recorded, whose run it ended *completed* for
such a reason, still replays, and keeps that outcome.

``tests/fixtures/unknown_stop/unknown-stop.jsonl`` was written by the code before ``models.stops``
(this repository's commit 6087ff3): ``run_agent`` with ``AnthropicModel`` against this loopback
server, one reply ``"The notes are tidy, I think."`` with ``stop_reason: "some_future_reason"``,
workspace ``/tmp``. Never regenerate it.
"""

from __future__ import annotations

import shutil
import typing
from pathlib import Path

import anthropic
import pytest

from nb_durable.agent.display.export import notebook_of
from nb_durable.agent.models.anthropic import AnthropicModel
from nb_durable.agent.models.messages import text_message, tool_use_message
from nb_durable.agent.models.scripted import ScriptedModel
from nb_durable.agent.models.stops import KNOWN_STOPS, UNKNOWN_STOP
from nb_durable.agent.run.loop import resume_agent, run_agent
from nb_durable.agent.run.outcomes import ENDING_STOPS
from nb_durable.core.runs import list_runs, read_run
from nb_durable.errors import EXIT_CODES
from tests.fakes import MessagesAPIServer, reply

MODEL = "claude-test-1"
FUTURE = "some_future_reason"
FIXTURE = Path(__file__).parents[1] / "fixtures" / "unknown_stop" / "unknown-stop.jsonl"

pytestmark = pytest.mark.usefixtures("no_ambient_anthropic")


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "not-streamed"])
def test_an_unknown_stop_reason_ends_the_run_unknown_stop_and_a_resume_asks_the_turn_again(workspace: Path, stream: bool) -> None:
    store = str(workspace.parent / "runs")
    answers = [reply("Maybe done.", stop_reason=FUTURE), reply("Done.")]
    with MessagesAPIServer([answers]) as server:
        client = AnthropicModel(api_key="test-key", base_url=server.url, timeout=10, stream=stream)
        result = run_agent("Say done.", run_id="future", client=client, model=MODEL, store=store, workspace=workspace)
        assert result.status == "unknown_stop" and result.stop_reason == FUTURE
        assert f"stop_reason {FUTURE!r}" in result.detail and "does not know" in result.detail, result.detail
        record = read_run("future", store)
        assert record.summary.status == "unknown_stop" and EXIT_CODES["unknown_stop"] == 11
        (step,) = record.steps
        assert step.result[UNKNOWN_STOP] is True and step.result["message"]["stop_reason"] == FUTURE
        (listed,) = list_runs(store)
        assert listed.figures["tokens"] > 0  # the reply was paid for: the run's figures and budget count it
        resumed = resume_agent("future", client=client, store=store)
        assert [r.outcome for r in server.requests_to("messages")] == ["reply", "reply"]
    assert resumed.status == "completed" and resumed.text == "Done."
    again = resume_agent("future", client=client, store=store)  # the mark replays: the same run, the same turns
    assert again.status == "completed" and again.live_steps == 0


def test_a_scripted_reply_with_an_unknown_stop_reason_ends_as_the_real_one_does(workspace: Path) -> None:
    model = ScriptedModel([text_message("Maybe done.", stop_reason=FUTURE)])
    result = run_agent("Say done.", run_id="scripted-future", client=model, store=str(workspace.parent / "runs"), workspace=workspace)
    assert result.status == "unknown_stop" and result.text == "Maybe done."


def test_the_export_of_an_unknown_stop_run_says_why_it_stopped_and_what_to_do(workspace: Path) -> None:
    """``show`` and the timeline say what to do under the run; its export put the reply under
    "Result" as if it were the finished work, and left the what-to-do out."""
    store = str(workspace.parent / "runs")
    model = ScriptedModel([text_message("Maybe done.", stop_reason=FUTURE)])
    result = run_agent("Say done.", run_id="export-future", client=model, store=store, workspace=workspace)
    last = "".join(notebook_of(read_run("export-future", store)).cells[-1].source)
    assert last.startswith("## Result\n\n**unknown stop:** ") and result.detail in last, last
    assert last.endswith("Maybe done."), last


def test_a_reply_with_tool_calls_and_an_unknown_stop_reason_runs_none_of_them(workspace: Path) -> None:
    """Nobody here can say the model meant its calls to run: a reply stopped short never runs them."""
    model = ScriptedModel([{**tool_use_message([("write_file", {"path": "x.txt", "content": "x"})]), "stop_reason": FUTURE}])
    result = run_agent("Write x.", run_id="tools-future", client=model, store=str(workspace.parent / "runs"), workspace=workspace)
    assert result.status == "unknown_stop" and not (workspace / "x.txt").exists()


@pytest.mark.filterwarnings("ignore::nb_durable.agent.run.session.EndpointChangedWarning")  # its loopback port is gone
def test_a_run_an_earlier_version_ended_completed_for_an_unknown_reason_replays_as_recorded(tmp_path: Path) -> None:
    store = tmp_path / "runs"
    store.mkdir()
    log = store / FIXTURE.name
    shutil.copyfile(FIXTURE, log)
    before = log.read_bytes()
    assert read_run("unknown-stop", str(store)).summary.status == "completed"
    replay = resume_agent("unknown-stop", store=str(store))  # no model: a finished run replays without one
    assert replay.status == "completed" and replay.stop_reason == FUTURE
    assert replay.text == "The notes are tidy, I think." and replay.live_steps == 0
    assert log.read_bytes() == before  # its recorded outcome stands: nothing was written


def test_every_stop_reason_the_sdk_names_is_known_and_every_ending_one_has_an_outcome() -> None:
    # A newer SDK with a new reason fails here: decide its outcome (run.outcomes) before adding it.
    assert frozenset(typing.get_args(anthropic.types.StopReason)) == KNOWN_STOPS
    assert set(ENDING_STOPS) <= KNOWN_STOPS
    assert KNOWN_STOPS - set(ENDING_STOPS) == {"tool_use", "pause_turn"}
