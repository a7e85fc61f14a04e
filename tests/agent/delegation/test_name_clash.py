"""A tool of the run's own called ``delegate`` never turns into a child run.

With delegation on, the session answers every call named ``delegate`` by starting a child
run. A Python tool of that name would never run while the model was told it had (and a child
was started and paid for instead): it is refused, saying what to rename. An MCP server's tool
of that name (a real server, over stdio) is renamed ``server__delegate`` and runs as itself.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from nb_durable.agent import ToolRegistry, builtin_tools, run_agent
from nb_durable.agent.tools import Tool, ToolContext, ToolResult
from nb_durable.agent.tools.mcp import mcp_tools
from nb_durable.core.stores import open_store
from nb_durable.testing import ScriptedModel, text_message, tool_use_message

SERVER = '''
import sys
from pathlib import Path
from mcp.server.mcpserver import MCPServer

app = MCPServer("team")

@app.tool()
def delegate(task: str) -> str:
    """Hand a ticket to the team."""
    with open(Path(sys.argv[1]) / "tickets.txt", "a") as f:
        f.write(task + "\\n")
    return "ticket filed: " + task

app.run()
'''


def test_a_python_tool_called_delegate_is_refused_when_the_run_delegates(tmp_path: Path) -> None:
    ran: list[object] = []

    def file_ticket(tool_input: dict[str, object], context: ToolContext) -> ToolResult:
        ran.append(tool_input)
        return ToolResult("ticket filed")

    mine = Tool("delegate", "Hand a ticket to the team.", {"type": "object", "properties": {"task": {"type": "string"}}}, "external", file_ticket)
    registry = ToolRegistry([*builtin_tools(), mine])
    model = ScriptedModel([tool_use_message([("delegate", {"task": "ticket 42"})]), text_message("done")])
    with pytest.raises(ValueError, match="one of its own tools is already called 'delegate'.*Rename that tool"):
        run_agent("file it", client=model, tools=registry, store=str(tmp_path / "runs"), workspace=str(tmp_path), delegate=True)
    assert model.remaining == 2 and not ran

    # Without delegation the tool is the run's like any other.
    result = run_agent("file it", client=model, tools=registry, store=str(tmp_path / "runs"), workspace=str(tmp_path))
    assert (result.status, ran) == ("completed", [{"task": "ticket 42"}])


def test_an_mcp_tool_called_delegate_is_renamed_and_runs_as_itself_beside_delegation(tmp_path: Path) -> None:
    server = tmp_path / "team_server.py"
    server.write_text(SERVER)
    config = {"mcpServers": {"team": {"command": sys.executable, "args": [str(server), str(tmp_path)]}}}
    store = str(tmp_path / "runs")
    with mcp_tools(config) as toolset:
        assert [t.name for t in toolset] == ["team__delegate"]
        registry = ToolRegistry([*builtin_tools(), *toolset])
        model = ScriptedModel([tool_use_message([("team__delegate", {"task": "ticket 42"})]), text_message("filed")])
        result = run_agent("file it", client=model, tools=registry, store=store, workspace=str(tmp_path), delegate=True, run_id="team")
    assert (result.status, result.text) == ("completed", "filed")
    assert (tmp_path / "tickets.txt").read_text() == "ticket 42\n"
    with open_store(store) as opened:
        assert opened.run_ids() == ["team"], "no child run was started"
