"""The background and foreground cell paths in-process: which buttons are on, and why not.

In the foreground the cell holds the kernel, so the timeline's buttons could not be heard: there
is no bar, and a question asked through ``input()`` shows its row's buttons off with the reason. The flags that choose the place, and the mistakes they refuse, are here too.
An earlier timeline's buttons follow the run as a later cell left it, as its line does, and
a crashed session's step in flight is drawn cut off.
"""

from __future__ import annotations

import builtins
from pathlib import Path
from typing import Any

import ipywidgets
import pytest
from IPython.core.error import UsageError

from nb_durable import read_run
from nb_durable.agent import prepare_demo_workspace
from nb_durable.agent.fleet import background_runs as background_runs_module
from nb_durable.agent.fleet.decisions import who
from nb_durable.agent.models.demo import DEMO_TASK
from nb_durable.agent.run.stopping import RunStopped
from nb_durable.core.runs import read_summary
from nb_durable.core.status import Status
from nb_durable.errors import SimulatedCrash
from nb_durable.jupyter import background
from nb_durable.jupyter.controls import ROW_FOREGROUND_NOTE
from tests.jupyter.test_magics import WIDGET, run
from tests.waiting import wait_until


def widgets_with(css_class: str) -> list[Any]:
    return [w for w in ipywidgets.widgets.widget._instances.values() if css_class in getattr(w, "_dom_classes", ())]


def test_a_foreground_question_shows_its_buttons_off_saying_to_answer_in_the_input_box(
    ip: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[bool, bool, str, str | None]] = []

    def answer(prompt: str = "") -> str:
        approve = widgets_with("nbd-approve")[-1]
        stop = widgets_with("nbd-stop")[-1]
        question = widgets_with("nbd-question")[-1]
        note = question.children[-1].value
        seen.append((approve.disabled, stop.disabled, note, widgets_with("nbd-bar")[-1].layout.display))
        return "y"

    monkeypatch.setattr(builtins, "input", answer)
    ip.run_line_magic("config", 'AgentMagics.approve_bash = "unittest"')
    try:
        done, _ = run(ip, f"%%agent --run fg\n{DEMO_TASK}")
    finally:
        ip.run_line_magic("config", 'AgentMagics.approve_bash = ""')
    assert done.success, done.error_in_exec
    assert seen, "input() was asked"
    approve_off, stop_off, note, bar_shown = seen[0]
    assert approve_off and stop_off
    assert ROW_FOREGROUND_NOTE.split(":")[0] in note
    assert bar_shown == "none", "a foreground run has no bar of buttons it could not hear"
    approved = [d for s in read_run("fg", "runs").steps for d in s.decisions]
    assert {(d.decision, d.by) for d in approved} == {("approved", f"{who()} (input box)")}, "the person's name, not 'person'"


def test_who_answers_is_the_jupyterhub_user_when_there_is_one(ip: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUPYTERHUB_USER", "ada")
    monkeypatch.setattr(builtins, "input", lambda prompt="": "no, not before the tests are read")
    ip.run_line_magic("config", 'AgentMagics.approve_bash = "unittest"')
    try:
        run(ip, f"%%agent --run hub\n{DEMO_TASK}")
    finally:
        ip.run_line_magic("config", 'AgentMagics.approve_bash = ""')
    denied = [d for s in read_run("hub", "runs").steps for d in s.decisions]
    first = denied[0]
    assert (first.decision, first.by, first.note) == ("denied", "ada (input box)", "no, not before the tests are read")


def test_the_background_setting_and_the_flags_choose_where_the_run_goes(ip: Any) -> None:
    ip.run_line_magic("config", "AgentMagics.background = True")
    try:
        started, _ = run(ip, f"%%agent --run bgset -o h\n{DEMO_TASK}")
        assert started.success, started.error_in_exec
        handle = ip.user_ns["h"]
        assert type(handle).__name__ == "BackgroundRun"
        ip.run_line_magic("agent_wait", "bgset")
        assert handle.status == "completed"
        with pytest.raises(UsageError, match="has already completed in the background: there is nothing to stop"):
            ip.run_line_magic("agent_stop", "bgset")  # not "resume it to go on": a completed run has nowhere to go
        fore, _ = run(ip, f"%%agent --run bgset --foreground -o r\n{DEMO_TASK}")
        assert fore.success and ip.user_ns["r"].status == "completed" and ip.user_ns["r"].live_steps == 0
    finally:
        ip.run_line_magic("config", "AgentMagics.background = False")
    with pytest.raises(UsageError, match="contradict"):
        ip.run_cell_magic("agent", "--background --foreground", DEMO_TASK)
    with pytest.raises(UsageError, match="cannot run in the background"):
        ip.run_cell_magic("agent", "--run kt --background --kernel-tools", DEMO_TASK)


def test_continue_and_resume_go_in_the_background_too(ip: Any) -> None:
    assert run(ip, f"%%agent --run cont\n{DEMO_TASK}")[0].success
    ip.run_cell_magic("agent", "--continue cont --background -o h", "Now say which file you changed.")
    result = ip.user_ns["h"].wait(60)
    assert result.status == "completed"
    assert any(s.step_id.startswith("user:") for s in read_run("cont", "runs").steps)
    ip.run_line_magic("agent_resume", "cont --background -o again")
    assert ip.user_ns["again"].wait(60).live_steps == 0  # a finished run stays finished


def test_waiting_and_stopping_refuse_what_they_cannot_do(ip: Any) -> None:
    with pytest.raises(UsageError, match="positive number of seconds"):
        ip.run_line_magic("agent_wait", "--timeout 0")
    with pytest.raises(UsageError, match="no background thread") as elsewhere:
        ip.run_line_magic("agent_stop", "nobody-started-this")
    # in the notebook's words: the magics that find and resume it, not the Python calls
    assert str(elsewhere.value).endswith("is listed by %agent_runs and resumed with %agent_resume nobody-started-this")
    with pytest.raises(UsageError, match="no run goes on in the background"):
        ip.run_line_magic("agent_stop", "")


def test_a_wait_naming_no_run_reports_a_run_that_ended_before_it_began(ip: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # Under Run All, a run that failed before the next cell's %agent_wait began passed as
    # "nothing to wait for", and its widget kept, for the saved notebook, the page drawn as it
    # started ("started · 0 steps").
    monkeypatch.setattr(background_runs_module, "_RUNS", [])  # this kernel's runs only
    assert run(ip, f"%%agent --run early --background --crash-at 3 -o h\n{DEMO_TASK}")[0].success
    ip.user_ns["h"].join(60)
    waited, captured = run(ip, "%agent_wait")
    assert isinstance(waited.error_in_exec, SimulatedCrash), "the cell fails, as the run's own cell would have"
    (frozen,) = [o.data for o in captured.outputs]  # the earlier cell's display, replaced
    assert WIDGET not in frozen and frozen["text/plain"].startswith("run early: crashed · 3 steps"), frozen
    again, captured = run(ip, "%agent_wait")
    assert again.success and "nothing to wait for; ended here: early (" in captured.stdout, "said once"


def test_a_wait_naming_no_run_leaves_out_a_session_a_later_cell_went_on_from(ip: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(background_runs_module, "_RUNS", [])
    assert run(ip, f"%%agent --run later --background --crash-at 3 -o h\n{DEMO_TASK}")[0].success
    ip.user_ns["h"].join(60)
    assert run(ip, "%agent_resume later")[0].success  # the run completed: its crash is old news
    waited, captured = run(ip, "%agent_wait")
    assert waited.success and "nothing to wait for" in captured.stdout, waited.error_in_exec


def test_an_earlier_timeline_turns_resume_off_once_a_later_cell_completed_the_run(ip: Any) -> None:
    assert run(ip, f"%%agent --run s --background --crash-at 7 -o h\n{DEMO_TASK}")[0].success
    ip.user_ns["h"].join(60)
    # A crash records no end: the run reads as its log says, in doubt in run_bash (it said failed).
    assert ip.user_ns["h"].status == read_summary("s", "runs").status == "in_doubt"
    first = background._TIMELINES["s"]
    assert not first.bar.resume.disabled, "crashed: Resume goes on from it"
    # The step the crash cut off (run_bash, step 7) is no longer drawn as running.
    assert [v.state for v in first.steps.values()][-1] == "cut_off", first.steps
    assert "in flight" not in first.static().text
    # A row the log holds no result of says so: the header counts one step fewer than its rows.
    assert [v.error for v in first.steps.values()][-1] == "the session stopped here: no result was recorded"
    ip.run_line_magic("agent_resume", "s --background -o h")
    assert ip.user_ns["h"].wait(60).status == "completed"
    assert background._TIMELINES["s"] is not first and first.later == "resumed in a later cell: completed there"
    assert first.bar.resume.disabled, "the run completed in the later cell: nothing to resume"
    assert not first.bar.fork.disabled, "forking a completed run's steps still makes a new run"


def test_an_earlier_timeline_turns_resume_off_while_a_later_cell_goes_on_with_the_run(ip: Any) -> None:
    assert run(ip, f"%%agent --run g --background --crash-at 7 -o h\n{DEMO_TASK}")[0].success
    ip.user_ns["h"].join(60)
    first = background._TIMELINES["g"]
    first.went_on("resumed in a later cell: going on there", Status.RUNNING)  # as displays tells it
    assert first.bar.resume.disabled
    first.went_on("resumed in a later cell: crashed there", Status.CRASHED)
    assert not first.bar.resume.disabled, "crashed again: Resume goes on from there"


def test_waiting_for_a_run_stopped_mid_command_says_it_is_in_doubt_in_words(ip: Any, tmp_path: Path) -> None:
    # It said "was in_doubt": the status's name, where the badge and every line say "in doubt".
    project = prepare_demo_workspace(tmp_path / "slow")
    tests = project / "test_calc.py"
    tests.write_text("import pathlib, time\npathlib.Path('began').touch()\ntime.sleep(30)\n" + tests.read_text())
    assert run(ip, f"%%agent --run slow --background --workspace slow -o h\n{DEMO_TASK}")[0].success
    wait_until((project / "began").exists, "the slow command to start", 60)
    ip.run_line_magic("agent_stop", "slow")
    with pytest.raises(RunStopped) as stopped:
        ip.run_line_magic("agent_wait", "slow")
    assert str(stopped.value).startswith("run slow was in doubt (stopped by "), stopped.value
    assert read_run("slow", "runs").summary.status == "in_doubt"


def test_agent_wait_closes_the_widgets_its_static_form_replaced_with_a_fork_below(ip: Any) -> None:
    # They lived on in the kernel and the browser after the cell showed the static form: every row, again.
    before = len(ipywidgets.widgets.widget._instances)
    assert run(ip, f"%%agent --run shut --background -o h\n{DEMO_TASK}")[0].success
    ip.user_ns["h"].join(60)
    first = background._TIMELINES["shut"]
    first.bar.fork_at.value = 3
    first.bar.fork.click()  # the fork's own timeline goes on below, in the background
    assert [f.run.run_id for f in first._forks] == ["shut-fork3"]
    assert len(ipywidgets.widgets.widget._instances) > before
    first.freeze()  # as %agent_wait does once the run ended; the fork may be going still
    ip.run_line_magic("agent_wait", "shut-fork3")
    assert read_summary("shut-fork3", "runs").status == "completed"
    assert len(ipywidgets.widgets.widget._instances) == before, "the frozen timelines' widgets stay open"
    assert "shut" in first.static().text and first._repr_mimebundle_()["text/html"] == first.static().html
