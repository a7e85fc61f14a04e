"""``nb-durable show`` prints every step's title whole, and fills the terminal's width.

The run is recorded here, in this process (a scripted model, the ledger server named ``bank``
over stdio, an approval rule on ``run_bash``), then shown by the CLI in a process of its own
at two terminal widths (``$COLUMNS``). Its titles tell its steps apart: an approval names the
tool it is for, and an MCP step its server and its effect; none is cut, at either width. The
wider terminal shows more of each step's output, the narrow one still a readable part of a
tool's input, an approval's answer is printed whole, and no step line is wider than the terminal.
"""

from __future__ import annotations

import sys
from pathlib import Path

from nb_durable.agent import Approval, RunHooks, run_agent, tools_for_run
from nb_durable.agent.models.messages import text_message, tool_use_message
from nb_durable.agent.models.scripted import ScriptedModel
from tests import forkserver
from tests.agent.mcp.conftest import stdio_config
from tests.conftest import subprocess_env

LONG = "x" * 300


def show(run_id: str, store: Path, columns: int) -> list[str]:
    done = forkserver.run(
        [sys.executable, "-m", "nb_durable.cli", "show", run_id, "--store", str(store)],
        env=subprocess_env(COLUMNS=str(columns)), capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return [line for line in done.stdout.splitlines() if line.startswith("  ")]


def test_show_keeps_every_title_whole_and_uses_the_terminal_s_width(tmp_path: Path) -> None:
    store, ws = tmp_path / "runs", tmp_path / "ws"
    ws.mkdir()
    model = ScriptedModel(
        [
            tool_use_message([("run_bash", {"command": f"echo {LONG}"}), ("lookup", {"word": "durable"})]),
            tool_use_message([("run_bash", {"command": "echo again"})]),
            text_message("Done."),
        ]
    )
    with tools_for_run("w", str(store), mcp=stdio_config(tmp_path / "ledger", name="bank"), approve_bash="echo") as tools:
        result = run_agent(
            "Look a word up.", client=model, run_id="w", store=str(store), workspace=str(ws), tools=tools.registry,
            approve_bash="echo", hooks=RunHooks(approve=lambda name, tool_input, why: Approval(True, by="tester")),
        )  # fmt: skip
    assert result.status == "completed"

    narrow, wide = show("w", store, 80), show("w", store, 200)
    for lines in (narrow, wide):
        said = "\n".join(lines)
        assert said.count("approval for run_bash ") == 2, said
        assert "lookup · MCP bank · external " in said, said
    assert max(map(len, wide)) > 150, "the wide terminal's columns were left unused"
    # At 80 columns a tool's input takes the room the others leave (it was cut to 10 characters).
    bash = [line for line in narrow if line.split()[1:2] == ["run_bash"]]
    assert any(f"$ echo {'x' * 8}" in line for line in bash) and any("$ echo again  -> " in line for line in bash), bash
    for lines, columns in ((narrow, 80), (wide, 200)):
        assert max(map(len, lines)) <= columns, "\n".join(lines)
        assert sum("-> approved by tester" in line for line in lines) == 2, "an approval's answer is printed whole"
