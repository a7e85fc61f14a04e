"""File names that are not UTF-8: tools show them losslessly, take them back, and the run goes on.

A workspace holding the bytes ``caf\\xe9.txt`` (Latin-1, as old archives make them) used to
wedge a run: ``list_dir`` returned a lone surrogate, the record could not be encoded, and every
resume died at the same turn. Here the real CLI runs against the fake Messages API.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from nb_durable import EventLog, read_run, run_step
from nb_durable.errors import StepResultError
from tests import forkserver
from tests.conftest import subprocess_env
from tests.fakes import MessagesAPIServer, ScriptedScenario, reply, tool_use

LATIN1 = b"caf\xe9.txt"
SHOWN = "caf\\xe9.txt"  # what the tools show, and take back


def _workspace(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    (work / os.fsdecode(b"dossier-\xe9t\xe9")).mkdir(parents=True)
    fd = os.open(os.fsencode(work) + b"/" + LATIN1, os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, b"bonjour\n")
    os.close(fd)
    return work


def _cli(tmp_path: Path, server: MessagesAPIServer, *args: str) -> subprocess.CompletedProcess[str]:
    return forkserver.run(
        [sys.executable, "-m", "nb_durable.cli", *args],
        cwd=tmp_path,
        env=subprocess_env(ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="test-key"),
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_a_run_in_a_workspace_with_a_latin1_file_name_goes_on_and_replays(tmp_path: Path) -> None:
    work = _workspace(tmp_path)
    turns = [
        reply(tool_use("list_dir", {"path": "."}, id="toolu_ls")),
        reply(
            tool_use("read_file", {"path": SHOWN}, id="toolu_rd"),
            tool_use("write_file", {"path": "dossier-\\xe9t\\xe9/" + SHOWN, "content": "salut\n"}, id="toolu_wr"),
        ),
        reply("Read it and copied it."),
    ]
    args = ["run", "Read the cafe file.", "--run", "cafe", "--model", "claude-test-1", "--workspace", "work"]
    with MessagesAPIServer(ScriptedScenario(turns)) as server:
        done = _cli(tmp_path, server, *args)
        assert done.returncode == 0, done.stderr
        results = {
            block["tool_use_id"]: block
            for request in server.requests
            for message in request.body["messages"]
            if message["role"] == "user" and isinstance(message["content"], list)
            for block in message["content"]
            if block.get("type") == "tool_result"
        }
        assert results["toolu_ls"]["content"].splitlines() == [SHOWN, "dossier-\\xe9t\\xe9/"]
        assert results["toolu_rd"]["content"] == "bonjour\n"
        assert not results["toolu_wr"].get("is_error"), results["toolu_wr"]
        written = os.fsencode(work) + b"/dossier-\xe9t\xe9/" + LATIN1
        with open(written, "rb") as f:
            assert f.read() == b"salut\n"  # the real bytes name, not a file called 'caf\xe9.txt'
        assert not os.path.exists(work / SHOWN)
        asked = len(server.requests)
        again = _cli(tmp_path, server, *args)  # the same task: replayed from the log
        assert again.returncode == 0, again.stderr
        assert len(server.requests) == asked, "a replay asks the model nothing"
    steps = read_run("cafe", str(tmp_path / "runs")).steps
    assert [s.state for s in steps] == ["completed"] * len(steps)


def test_a_step_returning_a_lone_surrogate_is_a_step_result_error_before_anything_is_written(tmp_path: Path) -> None:
    work = _workspace(tmp_path)
    runs = str(tmp_path / "runs")
    with EventLog("names", runs) as log:
        run_step(log, "before", lambda: "fine")
        size = os.path.getsize(log.location)
        with pytest.raises(StepResultError) as info:
            run_step(log, "ls", lambda: sorted(os.listdir(work)))
        assert os.path.getsize(log.location) == size  # nothing of the step was written
        message = str(info.value)
        assert "'ls'" in message and "'names'" in message and "surrogate" in message
        assert "backslashreplace" in message
        assert run_step(log, "ls", lambda: "fixed") == "fixed"  # the run goes on
    assert [s.result for s in read_run("names", runs).steps] == ["fine", "fixed"]


def test_a_task_that_is_not_utf8_is_a_clear_usage_error(tmp_path: Path) -> None:
    task = os.fsdecode(b"fix caf\xe9")  # what sys.argv holds for a Latin-1 argument
    done = forkserver.run(
        [sys.executable, "-m", "nb_durable.cli", "run", "--demo", task, "--run", "latin1"],
        cwd=tmp_path, env=subprocess_env(NB_DURABLE_DEMO_LATENCY="0"),
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "the task given is not UTF-8 text (byte 0xe9 at offset 7); save or type it as UTF-8" in done.stderr
    assert "Traceback" not in done.stderr and "codec can't encode" not in done.stderr


def test_a_workspace_folder_whose_name_is_not_utf8_is_recorded_as_shown_and_worked_in(tmp_path: Path) -> None:
    """Its path went into run_started as it is: the run was refused before it began, with no way
    around (a symlink with a UTF-8 name is resolved to the same path)."""
    work = os.fsdecode(os.fsencode(tmp_path) + b"/projet-\xe9t\xe9")
    os.mkdir(work)
    with open(os.path.join(work, "notes.txt"), "w") as f:
        f.write("bonjour\n")
    turns = [
        reply(tool_use("read_file", {"path": "notes.txt"}, id="toolu_rd"), tool_use("run_bash", {"command": "pwd"}, id="toolu_pwd")),
        reply("Read it."),
    ]
    args = ["run", "Read the notes.", "--run", "projet", "--model", "claude-test-1", "--workspace", work]
    with MessagesAPIServer(ScriptedScenario(turns)) as server:
        done = _cli(tmp_path, server, *args)
        assert done.returncode == 0, done.stderr
        asked = len(server.requests)
        resumed = _cli(tmp_path, server, "resume", "projet")  # the recorded workspace, taken back
        assert resumed.returncode == 0, resumed.stderr
        assert len(server.requests) == asked
    run = read_run("projet", str(tmp_path / "runs"))
    assert run.summary.settings["workspace"] == f"{tmp_path}/projet-\\xe9t\\xe9"
    results = [s.result["content"] for s in run.steps if s.step_id.startswith("tool:")]
    assert results == ["bonjour\n", f"{tmp_path}/projet-\ufffdt\ufffd\n[exit status 0]"]  # bash's output: bytes not UTF-8 replaced


def test_a_shown_text_and_a_shown_name_say_a_byte_that_is_not_utf8_alike() -> None:
    # One rule (inert_text.escaped_bytes) for a name a tool lists and for any text shown; a lone
    # surrogate no byte makes ("\ud800", from a broken endpoint) is shown too: printing it raised
    # UnicodeEncodeError, and shown_name raised on it.
    from nb_durable.agent.display.inert_text import terminal_text
    from nb_durable.agent.workspace.names import shown_name

    name = os.fsdecode(LATIN1)
    assert shown_name(name) == terminal_text(name) == SHOWN
    assert shown_name("a\ud800b") == terminal_text("a\ud800b") == "a\\ud800b"
    terminal_text("a\ud800b").encode("utf-8")  # printable: no lone surrogate left
