"""What ``nb-durable run`` prints while a step runs, on a real terminal (a pty) and in a pipe.

* On a terminal a long ``run_bash`` (a scripted ``sleep``) has a live line, redrawn in place
  with a growing elapsed time, then its finished line (a model call waiting to retry a 529
  says retrying, its clock still going); in a pipe the same run prints only
  finished lines, with no carriage return.
* Ctrl-C, typed into the terminal (the pty's line discipline sends SIGINT) while a model
  call is in flight, labels the step interrupted, not failed, and exits 130.
* A model turn that fails after its retries is printed once as failed, not twice.
"""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests import forkserver
from tests.conftest import subprocess_env
from tests.fakes import Delay, Error, MessagesAPIServer, ScriptedScenario, reply, tool_use

MODEL = "claude-test-1"


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "nb_durable.cli", "run", *args, "--model", MODEL, "--workspace", "."]


def in_a_terminal(
    argv: list[str], cwd: Path, env: dict[str, str], *, until: Callable[[str], bool] | None = None,
    then: bytes = b"", timeout: float = 60,
) -> tuple[str, int]:
    """Run ``argv`` on a new pty as its controlling terminal; type ``then`` once ``until(output)``.

    Returns everything the terminal showed and the exit code (-signal if killed).
    """
    pid, fd = pty.fork()
    if pid == 0:  # the child: a session leader whose terminal is the pty
        os.chdir(cwd)
        os.execve(argv[0], argv, env)
    output, typed = b"", False
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.1)
            if ready:
                try:
                    chunk = os.read(fd, 4096)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not chunk:
                    break
                output += chunk
            if until is not None and not typed and until(output.decode(errors="replace")):
                os.write(fd, then)
                typed = True
        else:
            os.kill(pid, 9)
            raise AssertionError(f"timed out; the terminal showed {output.decode(errors='replace')!r}")
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    return output.decode(errors="replace"), os.waitstatus_to_exitcode(status)


@pytest.mark.slow(10)
def test_a_long_step_has_a_live_line_on_a_terminal_and_none_in_a_pipe(tmp_path: Path) -> None:
    turns: list[Any] = [
        [
            Error(529, retry_after_ms=1200),
            reply("Waiting for the build.", tool_use("run_bash", {"command": "sleep 2.5; echo built"}, id="toolu_wait")),
        ],
        reply("Built."),
    ]
    with MessagesAPIServer(ScriptedScenario(turns)) as server:
        env = subprocess_env(ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="test-key", COLUMNS="120")
        shown, code = in_a_terminal(command("Build it.", "--run", "tty"), tmp_path, env)
        assert code == 0, shown
        piped = forkserver.run(
            command("Build it.", "--run", "pipe"), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
            check=False,
        )  # fmt: skip
    assert piped.returncode == 0, piped.stderr
    redraws = re.findall(r"\r\x1b\[K  running   run_bash\s+(\d+\.\d)s  \$ sleep 2\.5; echo built", shown)
    elapsed = [float(s) for s in redraws]
    assert len(set(elapsed)) >= 3 and max(elapsed) >= 1.5, f"the live line was redrawn as time went: {shown!r}"
    assert elapsed == sorted(elapsed)
    finished = re.findall(r"\r\x1b\[K  live      run_bash\s+(\d+\.\d\d)s", shown)
    assert finished and float(finished[-1]) >= 2.5, f"then the finished line replaces it: {shown!r}"
    assert re.search(r"\r\x1b\[K  retrying  model turn 0\s+\d+\.\ds", shown), "waiting to retry, the clock goes on"
    # The server asked for 1.2s: the live line counts it down (a model call waiting looks like none running).
    left = [float(s) for s in re.findall(r"\r\x1b\[K  retrying  model turn 0\s+\d+\.\ds  waiting (\d+\.\d)s", shown)]
    assert len(set(left)) >= 2 and left == sorted(left, reverse=True) and left[0] <= 1.2, shown
    assert "\r" not in piped.stdout and "running" not in piped.stdout, "a pipe gets plain finished lines only"
    piped_lines = re.findall(r"^  live      run_bash\s+(\d+\.\d\d)s", piped.stdout, re.M)
    assert piped_lines and float(piped_lines[-1]) >= 2.5, piped.stdout


def test_ctrl_c_in_a_terminal_labels_the_step_interrupted(tmp_path: Path) -> None:
    with MessagesAPIServer(ScriptedScenario([Delay(30, reply("Too late."))])) as server:
        env = subprocess_env(ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="test-key", COLUMNS="120")
        shown, code = in_a_terminal(
            command("Think hard.", "--run", "stopped"), tmp_path, env,
            until=lambda out: out.count("running   model turn 0") >= 2, then=b"\x03",  # once it has ticked
        )  # fmt: skip
    assert code == 130, shown
    assert "Exception ignored" not in shown, "one press, even one Python swallowed, stops the run"
    assert re.search(r"^  interrupted model turn 0", shown.replace("\r\x1b[K", "\n"), re.M), shown
    assert "failed" not in shown, shown
    # The command that goes on, named: "resume the run" named neither the run nor the command.
    assert "nb-durable: interrupted; nb-durable resume stopped goes on from where it stopped" in shown, shown
    listed = forkserver.run(
        [sys.executable, "-m", "nb_durable.cli", "runs"], cwd=tmp_path, env=env, capture_output=True, text=True,
        check=False,
    )  # fmt: skip
    assert listed.stdout.splitlines()[1].split()[:2] == ["stopped", "interrupted"]


def test_a_model_turn_that_fails_after_its_retries_is_printed_once(tmp_path: Path) -> None:
    overloaded = [Error(529, retry_after_ms=1)] * 6
    with MessagesAPIServer(ScriptedScenario([overloaded])) as server:
        env = subprocess_env(ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="test-key")
        done = forkserver.run(
            command("Say hi.", "--run", "busy"), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
            check=False,
        )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert len(re.findall(r"^  retrying  model turn 0", done.stdout, re.M)) == 5
    assert len(re.findall(r"^  failed    model turn 0", done.stdout, re.M)) == 1, done.stdout


def run_then_show(
    turns: list[Any], run: str, cwd: Path, columns: int
) -> tuple[subprocess.CompletedProcess[str], subprocess.CompletedProcess[str]]:
    """``nb-durable run`` of ``turns`` through the loopback API, piped, then ``show`` of the run."""
    with MessagesAPIServer(ScriptedScenario(turns)) as server:
        env = subprocess_env(ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="test-key", COLUMNS=str(columns))
        done = forkserver.run(command("Go.", "--run", run), cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=60, check=False)  # fmt: skip
        shown = forkserver.run([sys.executable, "-m", "nb_durable.cli", "show", run], cwd=cwd, env=env,
                               capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    return done, shown


def test_a_turn_answered_after_retries_is_not_printed_as_its_last_failure(tmp_path: Path) -> None:
    # A turn that only calls a tool has no text to show: its finished row (live, and in `show`)
    # said "the Messages API answered 529 (overloaded)", as if that were how the turn ended.
    turns: list[Any] = [
        [Error(529, retry_after_ms=1), Error(529, retry_after_ms=1), reply(tool_use("list_dir", {}, id="toolu_ls"))],
        reply("Listed."),
    ]
    done, shown = run_then_show(turns, "retried", tmp_path, columns=160)
    assert done.returncode == 0, done.stderr
    for out, state in ((done.stdout, "live"), (shown.stdout, "recorded")):
        (row,) = re.findall(rf"^  {state}\s+model turn 0 .*$", out, re.M)
        assert "answered 529" not in row and row.endswith("after 2 retries"), out  # 1 ms waits: nothing to say


def test_a_turn_that_waited_to_retry_says_how_long_live_and_in_show(tmp_path: Path) -> None:
    turns: list[Any] = [
        [Error(529, retry_after_ms=300), Error(529, retry_after=1), reply(tool_use("list_dir", {}, id="toolu_ls"))],
        reply("Listed."),
    ]
    done, shown = run_then_show(turns, "waited", tmp_path, columns=200)
    assert done.returncode == 0, done.stderr
    waits = re.findall(r"^  retrying  model turn 0 +(\d)/6 after .*, waiting (\S+)$", done.stdout, re.M)
    assert waits == [("1", "0.3s"), ("2", "1.0s")], done.stdout
    # Answered, live and read back from the log: the waits its attempts recorded, in all.
    for out, state in ((done.stdout, "live"), (shown.stdout, "recorded")):
        (row,) = re.findall(rf"^  {state}\s+model turn 0 .*$", out, re.M)
        assert row.endswith("after 2 retries (waited 1.3s)"), out
    # show's header names the run's model: a row names one only when another answered it.
    assert f"\nmodel: {MODEL}\n" in shown.stdout and "answered by" not in shown.stdout
