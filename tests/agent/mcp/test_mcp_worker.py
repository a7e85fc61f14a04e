"""``nb-durable worker`` resumes runs with MCP tools, rebuilding them from the record as ``resume`` does.

A run with the ledger server (stdio) is SIGKILLed in its second model turn, after one
``append``; a worker rebuilds its tools from what the run recorded, starts the server and
completes the run, each entry appended once. A second run whose server can no longer start
(its config now names a command that does not exist) is passed over with that reason and
left as it was: interrupted, resumable, never recorded as failed.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from nb_durable.core.runs import read_summary
from tests.agent.mcp.conftest import lines, stdio_config
from tests.conftest import nb_durable_cli
from tests.fakes import MessagesAPIServer, ScriptedScenario, reply, tool_use


def cli(*args: str, cwd: Path, url: str) -> subprocess.CompletedProcess[str]:
    return nb_durable_cli(*args, cwd=cwd, timeout=180, ANTHROPIC_BASE_URL=url, ANTHROPIC_API_KEY="test-key")


def killed_run(run_id: str, config: Path, cwd: Path, url: str) -> None:
    """Run ``run_id`` with the config's servers, SIGKILLed in step 3 (model turn 1)."""
    killed = cli("run", f"Record entries for {run_id}.", "--run", run_id, "--model", "claude-test-1", "--workspace", ".",
                 "--mcp", str(config), "--kill-at", "3", cwd=cwd, url=url)  # fmt: skip
    assert killed.returncode == -9, killed.stdout + killed.stderr
    assert read_summary(run_id, str(cwd / "runs")).status == "interrupted"


@pytest.mark.slow(40)
def test_a_worker_rebuilds_a_run_s_mcp_tools_or_passes_it_over_with_the_reason(tmp_path: Path) -> None:
    folder = tmp_path / "ledger"
    scenario = ScriptedScenario(
        [
            reply(tool_use("append", {"entry": "one"}, id="toolu_1")),
            reply(tool_use("append", {"entry": "two"}, id="toolu_2")),
            reply("Both recorded."),
        ]
    )
    good, broken = tmp_path / "good.json", tmp_path / "broken.json"
    good.write_text(json.dumps(stdio_config(folder)))
    broken.write_text(json.dumps(stdio_config(tmp_path / "other")))
    with MessagesAPIServer(scenario) as server:
        killed_run("kept", good, tmp_path, server.url)
        killed_run("lost", broken, tmp_path, server.url)
        broken.write_text(json.dumps({"mcpServers": {"ledger": {"command": str(tmp_path / "no-such-server")}}}))
        worked = cli("worker", "--once", cwd=tmp_path, url=server.url)
    said = worked.stdout + worked.stderr
    assert worked.returncode == 0, said
    assert "kept: completed" in said, said
    assert read_summary("kept", str(tmp_path / "runs")).status == "completed"
    assert [x.split("\t")[1] for x in lines(folder / "ledger.txt")] == ["one", "two"], "an entry was appended twice"

    assert "lost: passed over: cannot rebuild its MCP tools here" in said and "cannot rebuild its MCP tools here" in said and "no-such-server" in said, said
    assert "failed" not in said, said
    lost = read_summary("lost", str(tmp_path / "runs"))
    assert lost.status == "interrupted" and lost.error is None, (lost.status, lost.error)
