"""``%%agent --mcp FILE`` and ``AgentMagics.mcp_config`` in a real InteractiveShell, the model on
the real SDK against the loopback Messages API, the tools from a real stdio MCP server.

A run calls the server's tools and the timeline names server and effect; re-running the
finished cell replays it although its config now names a server that cannot start (nothing
starts, nothing is sent); the traitlet gives every cell the servers; a broken config is a
UsageError saying what is wrong; ``%agent?`` names the flags."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

from tests.agent.mcp.conftest import lines, stdio_config
from tests.fakes import MessagesAPIServer, ScriptedScenario, reply, tool_use

CELL_TASK = "Look up alpha and record it."


def scenario() -> ScriptedScenario:
    return ScriptedScenario(
        [
            reply(tool_use("lookup", {"word": "alpha"}, id="toolu_l"), tool_use("append", {"entry": "alpha"}, id="toolu_a")),
            reply("Recorded alpha."),
        ]
    )


def test_agent_cell_with_mcp_runs_then_replays_with_the_server_unable_to_start(
    ip: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "ledger"
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps(stdio_config(folder)))
    with MessagesAPIServer(scenario()) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        line = "--run m1 --model claude-test-1 --workspace . --mcp mcp.json -o res"
        with capture_output() as shown:
            ip.run_cell_magic("agent", line, CELL_TASK)
        assert ip.user_ns["res"].status == "completed"
        assert "append · MCP ledger · external" in shown.stdout + "".join(str(o.data) for o in shown.outputs)
        assert [x.split("\t")[1] for x in lines(folder / "ledger.txt")] == ["alpha"]
        requests, starts = len(server.requests), lines(folder / "pids.txt")
        config.write_text(json.dumps({"mcpServers": {"ledger": {"command": str(tmp_path / "no-such-server")}}}))
        ip.run_cell_magic("agent", line, CELL_TASK)
        assert ip.user_ns["res"].live_steps == 0 and ip.user_ns["res"].replayed_steps == 4
        assert len(server.requests) == requests and lines(folder / "pids.txt") == starts

        config.write_text(json.dumps(stdio_config(folder)))
        ip.run_line_magic("config", f"AgentMagics.mcp_config = {str(config)!r}")
        try:
            ip.run_cell_magic("agent", "--run m2 --model claude-test-1 --workspace . -o res", CELL_TASK)
        finally:
            ip.run_line_magic("config", "AgentMagics.mcp_config = ''")
        assert ip.user_ns["res"].status == "completed" and len(lines(folder / "ledger.txt")) == 2


def test_a_broken_mcp_config_is_a_usage_error(ip: Any, tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text('{"mcpServers": {"x": {"command": 3}}}')
    with pytest.raises(UsageError, match="MCP server 'x': a stdio server needs a command"):
        ip.run_cell_magic("agent", "--run bad --mcp bad.json --workspace .", "Anything.")


def test_help_names_the_mcp_and_kernel_flags(ip: Any) -> None:
    agent = ip.magics_manager.magics["cell"]["agent"].__doc__
    resume = ip.magics_manager.magics["line"]["agent_resume"].__doc__
    assert "--mcp FILE" in agent and "--kernel-tools" in agent
    assert "--mcp-accept-changes" in resume and "--rerun-python" in resume
