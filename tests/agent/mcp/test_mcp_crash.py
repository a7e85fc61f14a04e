"""SIGKILL during a destructive MCP call, then resume, with real processes throughout.

A worker process runs the agent (real SDK, loopback Messages API) with the ledger server over
stdio; it is SIGKILLed while ``append`` runs, either before the server's effect or after it
(but before the step's result is recorded). Then: the server process is gone too (it dies with
the run, through its keeper), and a resumed run follows the in-doubt policy: ``skip`` tells
the model the outcome is unknown and appends nothing; ``rerun`` calls again with the same
idempotency key in ``_meta``, so the server's ledger holds the entry exactly once.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from nb_durable.core.runs import read_run
from tests import forkserver
from tests.agent.mcp.conftest import alive, files_containing, lines, stdio_config
from tests.conftest import subprocess_env
from tests.fakes import MessagesAPIServer, ScriptedScenario, reply, tool_use

WORKER = Path(__file__).with_name("mcp_worker.py")


def worker(tmp: Path, server: MessagesAPIServer, config: Path, in_doubt: str = "skip") -> subprocess.Popen[str]:
    (tmp / "work").mkdir(exist_ok=True)
    env = subprocess_env(ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="test-key")
    cmd = [sys.executable, str(WORKER), str(tmp / "runs"), str(tmp / "work"), str(config), "run", in_doubt]
    return forkserver.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for(path: Path, proc: subprocess.Popen[str], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None:
            raise AssertionError(f"the worker ended first: {proc.communicate()}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path.name} never appeared")
        time.sleep(0.02)


def killed(proc: subprocess.Popen[str]) -> None:
    """SIGKILL ``proc`` and reap it; its pipes are closed unread (what it printed is not wanted)."""
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()


def write_config(tmp: Path, folder: Path, **env: str) -> Path:
    path = tmp / "mcp.json"
    path.write_text(json.dumps(stdio_config(folder, env=env)))
    return path


@pytest.mark.parametrize(
    ("kill_after_effect", "policy", "entries"),
    [(False, "skip", 0), (True, "rerun", 1)],
    ids=["killed-before-the-effect-skip", "killed-after-the-effect-rerun"],
)
@pytest.mark.slow(20)
def test_sigkill_during_a_destructive_call_then_resume_follows_the_in_doubt_policy(
    tmp_path: Path, kill_after_effect: bool, policy: str, entries: int
) -> None:
    folder = tmp_path / "ledger"
    scenario = ScriptedScenario([reply(tool_use("append", {"entry": "delivered"}, id="toolu_pay")), reply("Recorded.")])
    marker = "append.done" if kill_after_effect else "append.started"
    delays = {"LEDGER_AFTER_DELAY": "60"} if kill_after_effect else {"LEDGER_APPEND_DELAY": "60"}
    with MessagesAPIServer(scenario) as server:
        config = write_config(tmp_path, folder, **delays)
        first = worker(tmp_path, server, config)
        wait_for(folder / marker, first)
        server_pid = int((folder / "append.started").read_text())
        killed(first)
        # The server dies with the run, although it runs in a session of its own.
        deadline = time.monotonic() + 10
        while alive(server_pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(server_pid), "the MCP server outlived the run that started it"
        assert len(lines(folder / "ledger.txt")) == (1 if kill_after_effect else 0)
        # Resume without the delays; the run's recorded config file gives the servers again.
        write_config(tmp_path, folder, LEDGER_APPEND_DELAY="0", LEDGER_AFTER_DELAY="0")
        second = worker(tmp_path, server, config, policy)
        out, err = second.communicate(timeout=120)
        assert second.returncode == 0, err
        assert json.loads(out.splitlines()[-1])["status"] == "completed"
        sent = _results(server.requests)
    ledger = lines(folder / "ledger.txt")
    assert len(ledger) == entries
    if entries:
        assert ledger == ["run:tool:0:0:toolu_pay\tdelivered"]
        assert sent["toolu_pay"]["content"].startswith("already recorded")  # deduplicated by the key in _meta
    else:
        assert sent["toolu_pay"]["is_error"] and "whether it took effect is unknown" in sent["toolu_pay"]["content"]
    run = read_run("run", str(tmp_path / "runs"))
    step = next(s for s in run.steps if s.step_id == "tool:0:0:toolu_pay")
    assert step.state == ("completed" if policy == "rerun" else "skipped")
    assert files_containing(tmp_path / "runs", "ledger-secret-7f3a9c2e41") == []


def _results(requests: Any) -> dict[str, dict[str, Any]]:
    out = {}
    for request in requests:
        for message in request.body.get("messages") or []:
            if message["role"] == "user" and isinstance(message["content"], list):
                for block in message["content"]:
                    if block.get("type") == "tool_result":
                        out[block["tool_use_id"]] = block
    return out


@pytest.mark.slow(11)
def test_no_server_process_survives_a_killed_run(tmp_path: Path) -> None:
    """Every process of the server's tree, even one it detached, ends when the run dies."""
    folder = tmp_path / "ledger"
    scenario = ScriptedScenario([reply(tool_use("append", {"entry": "x"}, id="toolu_x")), reply("ok")])
    with MessagesAPIServer(scenario) as server:
        first = worker(tmp_path, server, write_config(tmp_path, folder, LEDGER_APPEND_DELAY="60", LEDGER_SPAWN_CHILD="1"))
        wait_for(folder / "append.started", first)
        pids = [int(p) for p in lines(folder / "pids.txt")]
        assert len(pids) == 2 and all(alive(p) for p in pids)
        keepers = [p for p in _children(first.pid)]
        killed(first)
    deadline = time.monotonic() + 10
    while any(alive(p) for p in pids + keepers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert keepers and not [p for p in pids + keepers if alive(p)]
    assert os.path.exists(folder / "append.started")


def _children(pid: int) -> list[int]:
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(name))
            except OSError:
                continue
    return out
