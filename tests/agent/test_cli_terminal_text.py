"""Text from outside (a model, an MCP server) reaches the terminal only as terminal text.

Each path that prints such text is driven through the CLI with text that holds an OSC
window title, a clear-screen, an OSC 8 link and Unicode's direction overrides: a refusal's explanation (``run`` and ``show``),
the final text ``wait`` prints for each run of a batch, and a refused resume whose
``ToolsChangedError`` names what a server changed. None of their escape, bell or direction
characters reaches stdout or stderr; the printable rest still says what happened.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import nb_durable_cli
from tests.fakes import MessagesAPIServer, ScriptedScenario, refusal, reply, tool_use

EVIL = "\x1b]0;owned\x07\x1b[2J\x1b]8;;http://evil.example/\x07click\x1b]8;;\x07 here, in \u202etxt.exe\u202c and \u2067gnp\u2069"
BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"  # they reorder how the rest of a line reads
SHOWN = "click"
RAW = Path(__file__).parent / "mcp" / "raw_server.py"


def cli(*args: str, cwd: Path, url: str) -> subprocess.CompletedProcess[str]:
    return nb_durable_cli(*args, cwd=cwd, ANTHROPIC_BASE_URL=url, ANTHROPIC_API_KEY="test-key")


def assert_terminal_text(done: subprocess.CompletedProcess[str]) -> str:
    said = done.stdout + done.stderr
    assert "\x1b" not in said and "\x07" not in said, repr(said)
    assert not set(BIDI) & set(said), repr(said)
    return said


def test_a_refusal_s_explanation_is_terminal_text_in_run_and_show(tmp_path: Path) -> None:
    with MessagesAPIServer(ScriptedScenario([refusal("I won't.", category="cyber", explanation=EVIL)])) as server:
        ran = cli("run", "Do it.", "--run", "r", "--model", "claude-test-1", "--workspace", ".", cwd=tmp_path, url=server.url)
    assert ran.returncode == 6, ran.stdout + ran.stderr
    assert SHOWN in assert_terminal_text(ran)
    shown = cli("show", "r", cwd=tmp_path, url=server.url)
    assert SHOWN in assert_terminal_text(shown), shown.stdout


def test_wait_prints_each_run_s_final_text_as_terminal_text(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"task": "Say it.", "run": "w"}) + "\n")
    with MessagesAPIServer(ScriptedScenario([reply(f"Done: {EVIL}")])) as server:
        queued = cli("run", "--batch", str(tasks), "--model", "claude-test-1", "--workspace", ".", cwd=tmp_path, url=server.url)
        assert queued.returncode == 0, queued.stderr
        assert cli("worker", "--once", cwd=tmp_path, url=server.url).returncode == 0
        waited = cli("wait", "w", cwd=tmp_path, url=server.url)
    assert waited.returncode == 0, waited.stdout + waited.stderr
    assert "w: completed: Done: " in assert_terminal_text(waited) and SHOWN in waited.stdout


@pytest.mark.slow(10)
def test_a_refused_resume_names_a_changed_tool_in_terminal_text(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"

    def serve(**env: str) -> None:
        server = {"command": sys.executable, "args": [str(RAW), str(tmp_path / "raw")], "env": env}
        config.write_text(json.dumps({"mcpServers": {"raw": server}}))

    serve()
    scenario = ScriptedScenario([reply(tool_use("echo", {"text": "hi"}, id="toolu_1")), reply("Said it.")])
    with MessagesAPIServer(scenario) as server:
        first = cli("run", "Echo hi.", "--run", "m", "--model", "claude-test-1", "--workspace", ".", "--max-turns", "1",
                    "--mcp", str(config), cwd=tmp_path, url=server.url)  # fmt: skip
        assert first.returncode == 130, first.stdout + first.stderr
        serve(RAW_EXTRA_PROPERTY=f"mood{EVIL}")
        refused = cli("resume", "m", cwd=tmp_path, url=server.url)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    said = assert_terminal_text(refused)
    assert "tool 'echo' of MCP server 'raw'" in said and SHOWN in said, said


def test_a_path_that_is_not_utf8_is_named_with_the_escapes_the_tools_use(tmp_path: Path) -> None:
    """Python holds such a byte as a lone surrogate, which the terminal got as '\\udce9'."""
    store = os.fsdecode(os.fsencode(tmp_path) + b"/caf\xe9-runs")
    done = nb_durable_cli("show", "x", "--store", store, cwd=tmp_path)
    assert done.returncode == 2
    assert f"there is no store at the folder {tmp_path}/caf\\xe9-runs: that folder does not exist" in done.stderr
    assert "udc" not in done.stderr
