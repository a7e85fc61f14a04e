"""``nb-durable run --mcp FILE`` and ``resume`` as a user runs them: a subprocess per command.

A run with the ledger server stops at its turn limit; the server changes ``append``'s schema;
``resume`` refuses (exit 2) naming the tool and what to do; ``resume --mcp-accept-changes``
completes and records the decision; resuming the finished run with a config whose server
cannot start replays it (exit 0) starting nothing; a broken config is exit 2 with its reason.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from nb_durable.core.events import Decision
from nb_durable.core.runs import read_run
from tests.agent.mcp.conftest import lines, stdio_config
from tests.conftest import nb_durable_cli, subprocess_env
from tests.fakes import MessagesAPIServer, ScriptedScenario, reply, tool_use


def cli(*args: str, cwd: Path, url: str) -> subprocess.CompletedProcess[str]:
    return nb_durable_cli(*args, cwd=cwd, timeout=180, ANTHROPIC_BASE_URL=url, ANTHROPIC_API_KEY="test-key")


@pytest.mark.slow(45)
def test_run_with_mcp_then_resume_refuses_a_changed_tool_accepts_it_on_request_and_replays_serverless(tmp_path: Path) -> None:
    folder = tmp_path / "ledger"
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps(stdio_config(folder)))
    scenario = ScriptedScenario(
        [
            reply(tool_use("append", {"entry": "one"}, id="toolu_1")),
            reply(tool_use("append", {"entry": "two", "amount": 2}, id="toolu_2")),
            reply("Both recorded."),
        ]
    )
    with MessagesAPIServer(scenario) as server:
        first = cli("run", "Record two entries.", "--run", "c1", "--model", "claude-test-1", "--workspace", ".",
                    "--max-turns", "1", "--mcp", str(config), cwd=tmp_path, url=server.url)  # fmt: skip
        assert first.returncode == 130, first.stderr
        assert "append" in first.stdout and [x.split("\t")[1] for x in lines(folder / "ledger.txt")] == ["one"]

        config.write_text(json.dumps(stdio_config(folder, changed=True)))
        refused = cli("resume", "c1", cwd=tmp_path, url=server.url)
        assert refused.returncode == 2
        assert "tool 'append' of MCP server 'ledger' has another input schema now (added amount)" in refused.stderr
        assert "--mcp-accept-changes" in refused.stderr and "Fork the run" in refused.stderr

        accepted = cli("resume", "c1", "--mcp-accept-changes", "--max-turns", "5", cwd=tmp_path, url=server.url)
        assert accepted.returncode == 0, accepted.stderr
        assert "Both recorded." in accepted.stdout
        requests = len(server.requests)

        starts = lines(folder / "pids.txt")
        broken = tmp_path / "broken.json"
        broken.write_text(json.dumps({"mcpServers": {"ledger": {"command": str(tmp_path / "no-such-server")}}}))
        replayed = cli("resume", "c1", "--mcp", str(broken), "--max-turns", "5", cwd=tmp_path, url=server.url)
        assert replayed.returncode == 0, replayed.stderr
        assert "0 live" in replayed.stdout
        assert lines(folder / "pids.txt") == starts and len(server.requests) == requests

        bad = tmp_path / "bad.json"
        bad.write_text('{"mcpServers": {"x": {"args": []}}}')
        wrong = cli("run", "Anything.", "--mcp", str(bad), cwd=tmp_path, url=server.url)
        assert wrong.returncode == 2 and "MCP server 'x': a stdio server needs a command" in wrong.stderr
    run = read_run("c1", str(tmp_path / "runs"))
    assert [d.decision for d in run.events if isinstance(d, Decision)] == ["accepted tool change"]
    assert [x.split("\t")[1] for x in lines(folder / "ledger.txt")] == ["one", "two x2"]


def test_the_help_names_the_mcp_flags(tmp_path: Path) -> None:
    run = subprocess.run([sys.executable, "-m", "nb_durable.cli", "run", "--help"], capture_output=True, text=True,
                         env=subprocess_env(), check=True)  # fmt: skip
    resume = subprocess.run([sys.executable, "-m", "nb_durable.cli", "resume", "--help"], capture_output=True, text=True,
                            env=subprocess_env(), check=True)  # fmt: skip
    assert "--mcp FILE" in run.stdout and "mcpServers" in run.stdout
    assert "--mcp-accept-changes" in resume.stdout
