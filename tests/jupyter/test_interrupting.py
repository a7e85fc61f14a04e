"""The kernel's interrupt button during a ``%%agent`` cell: stopping the run is what the button
is for, so the cell ends in one line that says where the run stopped and how it goes on, not
a traceback through the package; and it still ends in error, so Run All stops there."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from IPython.utils.capture import capture_output

from nb_durable import read_run
from nb_durable.agent.models.demo import DEMO_TASK
from nb_durable.agent.models.demo.model import DemoModel
from tests.fakes import MessagesAPIServer, ScriptedScenario, reply, tool_use
from tests.jupyter.kernels import Kernel
from tests.jupyter.test_magics import interrupt_first_bash
from tests.waiting import wait_until


def shown(ip: Any, cell: str) -> tuple[BaseException | None, str]:
    """The cell's error, and what IPython showed of it."""
    with capture_output() as captured:
        result = ip.run_cell(cell)
    return result.error_in_exec, captured.stdout


def _interrupt_the_second_model_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """The demo model's second call is stopped by Ctrl-C, as a person's interrupt stops it."""
    real = DemoModel.create
    calls: list[int] = []

    def create(self: DemoModel, *args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(self, *args, **kwargs)

    monkeypatch.setattr(DemoModel, "create", create)


def test_an_interrupt_in_a_model_call_ends_the_cell_in_one_line(ip: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    _interrupt_the_second_model_call(monkeypatch)
    error, said = shown(ip, f"%%agent --run i1\n{DEMO_TASK}")
    assert isinstance(error, KeyboardInterrupt)
    assert read_run("i1", "runs").summary.status == "interrupted"
    assert "Traceback" not in said and "nb_durable/" not in said, said
    assert "KeyboardInterrupt: run i1 interrupted at step 3 (model turn 1); %agent_resume i1 goes on\n" in said, said
    assert ip.run_cell("%agent_resume i1").success, "the run goes on as the line says"


def test_a_model_call_interrupted_shows_cut_off_with_its_reason_as_the_log_has_it(
    ip: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The call did not fail: the person stopped it. A red "failed" row disagreed with the log
    # (the step is unfinished: %agent_show draws it cut off) and with the terminal's "interrupted".
    _interrupt_the_second_model_call(monkeypatch)
    with capture_output() as captured:
        ip.run_cell(f"%%agent --run i3\n{DEMO_TASK}")
    page = "".join(o.data.get("text/html", "") for o in captured.outputs)
    assert 'class="nbd-step nbd-failed"' not in page, page
    row = re.search(r'<div class="nbd-step nbd-(\w+)" data-kind="model" data-step="model:1">(.*?)</details></div>', page, re.S)
    assert row is not None and row.group(1) == "cut_off", page
    assert "interrupted; the call is asked again on resume" in row.group(2), "the reason is shown"
    shown_later = ip.run_line_magic("agent_show", "i3")
    assert 'class="nbd-step nbd-cut_off" data-kind="model" data-step="model:1"' in shown_later.html
    # The header counts the step as the log and %agent_runs do: three, one of them cut off.
    assert read_run("i3", "runs").summary.steps == 3
    assert "3 steps (0 replayed, 2 live, 1 cut off)" in page, page


def test_a_crashed_cell_counts_the_step_it_cut_off_as_its_rows_and_the_log_do(ip: Any) -> None:
    # It said "5 steps (0 replayed, 5 live)" over six rows, and %agent_runs said 6 in the next cell.
    with capture_output() as captured:
        ip.run_cell(f"%%agent --run crashed --crash-at 6\n{DEMO_TASK}")
    page = "".join(o.data.get("text/html", "") for o in captured.outputs)
    assert read_run("crashed", "runs").summary.steps == 6
    assert "6 steps (0 replayed, 5 live, 1 cut off)" in page, page
    assert len(re.findall(r'<div class="nbd-step nbd-', page)) == 6


def test_an_interrupt_in_a_command_says_its_outcome_is_unknown(ip: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    interrupt_first_bash(monkeypatch)
    error, said = shown(ip, f"%%agent --run i2\n{DEMO_TASK}")
    assert isinstance(error, KeyboardInterrupt)
    assert read_run("i2", "runs").summary.status == "in_doubt"
    assert "Traceback" not in said, said
    (line,) = error._render_traceback_()  # type: ignore[attr-defined]
    assert line == (
        "KeyboardInterrupt: run i2 interrupted at step 7 (run_bash) while it ran, so whether it took effect is "
        "unknown; %agent_resume i2 goes on, telling the model so (--in-doubt rerun runs it again)"
    )
    assert ip.run_cell("%agent_resume i2").success
    decisions = [e for e in read_run("i2", "runs").events if e.kind == "decision"]
    assert [d.decision for d in decisions] == ["skip"], "the resume told the model, as the line says"  # type: ignore[attr-defined]


def test_the_interrupt_button_in_a_real_kernel_ends_the_cell_in_one_line(
    tmp_path: Path, server: MessagesAPIServer, kernels: Callable[[], Kernel]
) -> None:
    server.scenario = ScriptedScenario([reply(tool_use("run_bash", {"command": "touch began; sleep 60"})), reply("Done.")])
    kernel = kernels()
    cell = kernel.start("%%agent --run ik --model claude-test-1 --workspace .\nDo the work.")
    wait_until((tmp_path / "began").exists, "the command starting", 60, every=0.05)
    kernel.manager.interrupt_kernel()
    done = kernel.collect(cell, timeout=60)
    assert done.status == "error" and done.error is not None, "Run All stops at the cell"
    assert done.error["ename"] == "RunInterrupted"
    assert done.error["traceback"] == [
        "KeyboardInterrupt: run ik interrupted at step 2 (run_bash) while it ran, so whether it took effect is "
        "unknown; %agent_resume ik goes on, telling the model so (--in-doubt rerun runs it again)"
    ]
    assert read_run("ik", str(tmp_path / "runs")).summary.status == "in_doubt"
