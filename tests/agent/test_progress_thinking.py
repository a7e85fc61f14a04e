"""The terminal shows a model step's thinking apart from its answer (dimmed on a terminal,
prefixed ``thinking:`` on a pipe), follow-ups and settings changes as what they say, and, when
a run ends, what it paid, what replay and caching saved and what to do: live (``TextProgress``)
and for a recorded run (``nb-durable show``).
"""

from __future__ import annotations

import io
import os
import pty
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from nb_durable.agent import RunHooks, run_agent
from nb_durable.agent.display.progress import TextProgress, cost_line
from nb_durable.agent.display.views import RunView, StepView
from nb_durable.agent.models.messages import text_message, tool_use_message
from nb_durable.agent.models.retry import RetryPolicy
from nb_durable.agent.models.scripted import ScriptedModel
from nb_durable.agent.money.cost import Cost, Usage
from nb_durable.core.status import Status
from tests import forkserver
from tests.conftest import subprocess_env

THOUGHT = "I should list the folder first.\nThen read the notes.\x1b]0;owned\x07"
FAST = RetryPolicy(max_attempts=2, base_delay=0.0, jitter=0.0)
DIM = "\x1b[2m"


def drain(master: int) -> str:
    """All a pty's other end wrote, once that end is closed."""
    said = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: every writer has closed the other end
            break
        if not chunk:
            break
        said += chunk
    return said.decode()


def model_step() -> StepView:
    return StepView("model:0", "model", 0, "live", "model turn 0", output="Listing.", thinking=THOUGHT)


def test_on_a_pty_thinking_is_dimmed_and_its_escape_codes_are_dropped() -> None:
    master, slave = pty.openpty()
    try:
        with os.fdopen(slave, "w", closefd=True) as out:
            TextProgress(out).step_changed(model_step())
        said = drain(master).replace("\r\n", "\n")
    finally:
        os.close(master)
    lines = said.splitlines()
    assert lines[:2] == [f"{DIM}    I should list the folder first.\x1b[0m", f"{DIM}    Then read the notes.]0;owned\x1b[0m"]
    assert "\x07" not in said and "\x1b]" not in said
    assert lines[2].startswith("  live      model turn 0") and lines[2].endswith("Listing.")


def test_on_a_pipe_thinking_lines_are_prefixed_and_carry_no_escape_codes() -> None:
    read, write = os.pipe()
    with os.fdopen(write, "w") as out:
        TextProgress(out).step_changed(model_step())
    with os.fdopen(read) as pipe:
        lines = pipe.read().splitlines()
    assert lines[:2] == ["    thinking: I should list the folder first.", "    thinking: Then read the notes.]0;owned"]
    assert "\x1b" not in "".join(lines)
    assert lines[2].startswith("  live      model turn 0")


def test_a_model_steps_tokens_count_the_whole_prompt_and_say_what_the_cache_served() -> None:
    out = io.StringIO()
    usage = Usage(input_tokens=200, output_tokens=50, cache_creation_input_tokens=100, cache_read_input_tokens=1700)
    TextProgress(out).step_changed(model_step().but(usage=usage, thinking=""))
    assert "2,000 in (1,700 cached) / 50 out" in out.getvalue()


def test_settings_and_follow_up_steps_print_what_they_say() -> None:
    out = io.StringIO()
    progress = TextProgress(out)
    progress.step_changed(StepView("settings:1", "settings", 1, "live", "settings changed before turn 1", output="max_tokens=32000 by resume"))
    progress.step_changed(StepView("user:2", "user", 2, "live", "follow-up before turn 2", output="now sort them"))
    lines = out.getvalue().splitlines()
    assert lines[0].split(None, 2)[2].endswith("max_tokens=32000 by resume") and "null" not in lines[0]
    assert lines[1].endswith("now sort them") and "->" not in lines[1]


def test_the_end_of_a_run_prints_paid_replay_saved_caching_saved_and_what_to_do_once() -> None:
    out = io.StringIO()
    progress = TextProgress(out)
    cost = Cost(Usage(100, 20), Usage(300, 50), 0.0123, 0.0456, 0.0089)
    progress.run_changed(RunView("r", Status.RUNNING, cost=cost))
    assert out.getvalue() == ""
    stopped = RunView("r", Status.BUDGET_EXHAUSTED, cost=replace(cost, simulated=True), detail="raise max_usd on resume")
    progress.run_changed(stopped)
    progress.run_changed(stopped)
    assert out.getvalue().splitlines() == [
        "run r budget exhausted · paid 120 tokens (simulated $0.0123) · replay saved 350 tokens (simulated $0.0456) "
        "· caching saved simulated $0.0089 (the demo model's figures are simulated, not a bill)",
        "what to do: raise max_usd on resume",
    ]


def test_caching_that_has_cost_more_than_it_saved_so_far_is_said_as_added_not_a_negative_saving() -> None:
    """The first call of a run writes the cache (at 1.25x) and reads nothing: it said "caching saved -$0.0005"."""
    first = Cost(Usage(100, 20), Usage(), 0.0123, 0.0, -0.0005)
    assert cost_line(first) == "paid 120 tokens ($0.0123) · replay saved 0 tokens ($0.0000) · caching added $0.0005"
    assert cost_line(replace(first, cache_saved_dollars=0.0)).endswith("· caching saved $0.0000")


def record_run(tmp_path: Path) -> Path:
    """A run whose model thinks before a tool call and before an answer it cannot finish."""
    workspace = tmp_path / "work"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("milk\n")
    model = ScriptedModel(
        [
            tool_use_message([("list_dir", {"path": "."}, "toolu_1")], thinking="Look at the <folder> first."),
            text_message("Half an ans", stop_reason="max_tokens", thinking="The notes say milk."),
        ]
    )
    store = tmp_path / "runs"
    result = run_agent(
        "list the notes", run_id="thinky", client=model, model="claude-test-1", workspace=workspace, store=str(store),
        max_tokens=64, retry=FAST, hooks=RunHooks(sleep=lambda s: None),
    )  # fmt: skip
    assert result.status == "truncated"
    return store


def show(store: Path, *, stdout: int) -> subprocess.CompletedProcess[str]:
    return forkserver.run(
        [sys.executable, "-m", "nb_durable.cli", "show", "thinky", "--store", str(store)],
        env=subprocess_env(),
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        timeout=60,
        check=False,
    )


def test_show_prints_thinking_before_each_answer_and_what_a_truncated_run_should_do(tmp_path: Path) -> None:
    shown = show(record_run(tmp_path), stdout=subprocess.PIPE)
    lines = shown.stdout.splitlines()
    assert "    thinking: Look at the <folder> first." in lines
    first, second = lines.index("    thinking: Look at the <folder> first."), lines.index("    thinking: The notes say milk.")
    assert lines[first + 1].startswith("  recorded  model turn 0")
    assert lines[second + 1].startswith("  recorded  model turn 1") and lines[second + 1].endswith("Half an ans")
    summary = next(line for line in lines if line.startswith("run thinky truncated · "))
    assert "paid " in summary and " · replay saved " in summary and " · caching saved $" in summary
    todo = [line for line in lines if line.startswith("what to do: ")]
    assert len(todo) == 1 and "max_tokens=64" in todo[0]
    assert not any(line.startswith("error: ") for line in lines)  # the detail is said once
    assert "\x1b" not in shown.stdout


def test_show_on_a_terminal_dims_the_thinking(tmp_path: Path) -> None:
    store = record_run(tmp_path)
    master, slave = pty.openpty()
    try:
        shown = show(store, stdout=slave)
        os.close(slave)
        text = drain(master)
    finally:
        os.close(master)
    assert shown.returncode == 5, shown.stderr  # show exits as the truncated run did: 5
    assert f"{DIM}    Look at the <folder> first.\x1b[0m" in text
    assert "thinking:" not in text


def test_a_listing_says_each_state_in_the_words_of_the_timeline_badge() -> None:
    # `nb-durable show` of a crashed run printed "cut_off" and "in_doubt", the states' names.
    out = io.StringIO()
    progress = TextProgress(out, listing=True)
    progress.step_changed(StepView("model:1", "model", 1, "cut_off", "model turn 1"))
    progress.step_changed(StepView("tool:0:0:t1", "tool", 0, "in_doubt", "run_bash", input={"command": "make"}))
    lines = out.getvalue().splitlines()
    assert [line[2:11] for line in lines] == ["cut off  ", "in doubt "], lines


def test_ctrl_c_labels_the_step_it_cut_off_interrupted() -> None:
    out = io.StringIO()
    progress = TextProgress(out, live=False)
    progress.interrupting()
    progress.step_changed(StepView("model:0", "model", 0, "cut_off", "model turn 0", error="interrupted"))
    assert out.getvalue().startswith("  interrupted model turn 0"), out.getvalue()
