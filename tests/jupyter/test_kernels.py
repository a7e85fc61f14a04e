"""Real kernels against the loopback Messages API: kill a kernel mid-run (during a model call,
during a tool call), start a new one, ``%load_ext`` and ``%agent_resume``.

What must hold: the server never gets a second request for a completed turn; effects ran
once; the final answer is shown; the display shows replayed and live steps; re-running a
finished cell sends no request; two kernels resuming one run: one proceeds, one is told
the run is locked.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests import waiting
from tests.fakes import Delay, MessagesAPIServer, ScriptedScenario, reply, tool_use
from tests.jupyter.kernels import Kernel

TASK = "Record what you did in the workspace."
CELL = f"%%agent --run kr --model claude-test-1 --workspace .\n{TASK}"


def wait_until(condition: Callable[[], object], timeout: float = 30) -> None:
    waiting.wait_until(condition, "the condition", timeout, every=0.05)


def no_repeats(server: MessagesAPIServer) -> None:
    stats = server.turn_stats()
    assert all(s.repeats == 0 for s in stats.values()), stats
    assert not server.rejected, [r.error_message for r in server.rejected]


def test_a_kernel_killed_during_a_model_call_resumes_in_a_new_kernel(
    tmp_path: Path, server: MessagesAPIServer, kernels: object
) -> None:
    server.scenario = ScriptedScenario(
        [
            reply("I'll write a note.", tool_use("write_file", {"path": "note.txt", "content": "hello\n"}, id="toolu_w")),
            reply(tool_use("run_bash", {"command": "echo ran >> effects.txt"}, id="toolu_b")),
            [Delay(60, reply("too late")), reply(tool_use("read_file", {"path": "note.txt"}, id="toolu_r"))],
            reply("All done: the note says hello."),
        ]
    )
    first = kernels()  # type: ignore[operator]
    cell = first.start(CELL)
    wait_until(lambda: len(server.requests_at(2)) >= 1, timeout=60)
    first.kill()
    assert (tmp_path / "effects.txt").read_text() == "ran\n"

    second = kernels()  # type: ignore[operator]
    resumed = second.run("%agent_resume kr", timeout=60)
    assert resumed.status == "ok", resumed.text()
    assert "All done: the note says hello." in resumed.text()
    page = resumed.html()
    assert page.count('class="nbd-step nbd-replayed"') == 4, "model turns 0-1 and their two tools came from the log"
    assert page.count('class="nbd-step nbd-live"') == 3
    assert (tmp_path / "effects.txt").read_text() == "ran\n", "the bash effect ran once"
    assert len(server.requests_at(2)) == 2 and len(server.requests_at(0)) == 1
    no_repeats(server)
    del cell

    before = len(server.requests)
    again = second.run(CELL, timeout=60)
    assert again.status == "ok" and "All done" in again.text()
    assert len(server.requests) == before, "re-running the finished cell sends no request"
    assert again.html().count('class="nbd-step nbd-replayed"') == 7


def test_a_kernel_killed_during_a_tool_call_leaves_no_orphan_and_the_model_is_told(
    tmp_path: Path, server: MessagesAPIServer, kernels: object
) -> None:
    # A duration no other test uses: pgrep sees every process on the machine.
    command = "echo start >> effects.txt; sleep 37; echo end >> effects.txt"
    server.scenario = ScriptedScenario(
        [reply("Running it.", tool_use("run_bash", {"command": command}, id="toolu_slow")), reply("I checked the effects file.")]
    )
    first = kernels()  # type: ignore[operator]
    first.start(CELL)
    wait_until((tmp_path / "effects.txt").exists)
    first.kill()
    try:
        wait_until(lambda: subprocess.run(["pgrep", "-f", "sleep 37"], capture_output=True, check=False).returncode != 0, timeout=10)
    except TimeoutError:
        left = subprocess.run(["pgrep", "-af", "sleep 37"], capture_output=True, text=True, check=False).stdout
        raise AssertionError(f"the killed kernel's command outlived it: {left}") from None

    second = kernels()  # type: ignore[operator]
    resumed = second.run("%agent_resume kr", timeout=60)
    assert resumed.status == "ok", resumed.text()
    assert "I checked the effects file." in resumed.text()
    told = server.requests_at(1)[0].messages[-1]["content"][0]
    assert told["tool_use_id"] == "toolu_slow" and told["is_error"] is True
    assert "unknown" in str(told["content"])
    assert (tmp_path / "effects.txt").read_text() == "start\n", "never re-run, and the killed command never finished"
    assert resumed.html().count('class="nbd-step nbd-skipped"') == 1
    no_repeats(server)


def test_two_kernels_resuming_one_run_one_proceeds_one_is_told_it_is_locked(
    tmp_path: Path, server: MessagesAPIServer, kernels: object
) -> None:
    server.scenario = ScriptedScenario(
        [
            reply(tool_use("list_dir", {"path": "."}, id="toolu_l")),
            [Delay(60, reply("never")), Delay(8, reply("finished by one kernel"))],
        ]
    )
    first = kernels()  # type: ignore[operator]
    first.start(CELL)
    wait_until(lambda: len(server.requests_at(1)) >= 1, timeout=60)
    first.kill()

    a, b = kernels(), kernels()  # type: ignore[operator]
    proceeding = a.start("%agent_resume kr")
    wait_until(lambda: len(server.requests_at(1)) >= 2, timeout=60)
    refused = b.run("%agent_resume kr", timeout=60)
    assert refused.status == "error", refused.text()
    assert b.last_error[0] == "UsageError"
    assert "is being written by pid" in refused.text()
    assert "nbd-timeline" not in refused.html(), "a run that never started shows no timeline"
    done = a.collect(proceeding, timeout=60)
    assert done.status == "ok" and "finished by one kernel" in done.text()
    no_repeats(server)


@pytest.mark.kernel
def test_the_extension_loads_from_ipython_config(tmp_path: Path) -> None:
    profile = tmp_path / "ipython" / "profile_default"
    profile.mkdir(parents=True)
    (profile / "ipython_kernel_config.py").write_text('c.InteractiveShellApp.extensions = ["nb_durable"]\n')
    kernel = Kernel(tmp_path, IPYTHONDIR=str(tmp_path / "ipython"))
    try:
        listed = kernel.run("%agent_runs")
        assert listed.status == "ok", listed.text()
        assert "No runs yet." in listed.text()
    finally:
        kernel.close()
