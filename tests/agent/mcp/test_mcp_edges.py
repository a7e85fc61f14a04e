"""MCP servers that misbehave at the edges, through the interfaces a user has: the CLI and a
background run's Stop. The server is ``raw_server.py`` (JSON-RPC by hand, so each misbehaviour
is exact): a line on stdout that is not JSON-RPC is one line on stderr naming the server and
what it printed (not the SDK's traceback); a result that is not UTF-8 arrives, its bad bytes
replaced; a 50 MB result is cut as it is read (what the run
records and the model gets is capped, and the reading holds a bounded piece at a time); a
100 MB stderr line is kept as its first characters; resources reach the model as their text; Stop cancels an MCP call in flight
(``notifications/cancelled``), the run ends at once, and the step is in doubt.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from nb_durable.agent import ToolRegistry, background, run_agent
from nb_durable.agent.models.anthropic import AnthropicModel
from nb_durable.agent.tools.mcp import mcp_tools, tools_for_run
from nb_durable.agent.tools.mcp._capped import STRING_LIMIT
from nb_durable.core.runs import read_run
from nb_durable.errors import McpServerError
from tests.agent.mcp.conftest import alive, files_containing, lines, stdio_config
from tests.agent.mcp.test_mcp_run import FAST, go
from tests.conftest import subprocess_env
from tests.fakes import MessagesAPIServer, ScriptedScenario, reply, tool_use
from tests.waiting import wait_until

RAW = Path(__file__).with_name("raw_server.py")


def raw_config(folder: Path, *args: str, **server: Any) -> dict[str, Any]:
    return {"mcpServers": {"raw": {"command": sys.executable, "args": [str(RAW), str(folder), *args], **server}}}


def cli_run(tmp: Path, server: MessagesAPIServer, config: dict[str, Any], *args: str) -> subprocess.CompletedProcess[str]:
    path = tmp / "mcp.json"
    path.write_text(json.dumps(config))
    return subprocess.run(
        [sys.executable, "-m", "nb_durable.cli", "run", "Use the raw server.", "--run", "edge", "--model", "claude-test-1",
         "--workspace", ".", "--mcp", str(path), *args],
        cwd=tmp, env=subprocess_env(ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="test-key"),
        capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip


def results_sent(server: MessagesAPIServer) -> dict[str, dict[str, Any]]:
    out = {}
    for request in server.requests:
        for message in request.body.get("messages") or []:
            if message["role"] == "user" and isinstance(message["content"], list):
                out.update({b["tool_use_id"]: b for b in message["content"] if b.get("type") == "tool_result"})
    return out


def test_a_line_that_is_not_json_rpc_is_one_line_naming_the_server_and_what_it_printed(tmp_path: Path) -> None:
    noise = "DEBUG: connecting to the cache at 10.0.0.7"
    scenario = ScriptedScenario([reply(tool_use("echo", {"text": "hi"}, id="toolu_echo")), reply("Echoed.")])
    with MessagesAPIServer(scenario) as server:
        done = cli_run(tmp_path, server, raw_config(tmp_path / "raw", noise))
    assert done.returncode == 0, done.stderr
    assert results_sent(server)["toolu_echo"]["content"] == "hi", "the run handles the line and goes on"
    assert "Traceback" not in done.stderr and "pydantic" not in done.stderr and "ValidationError" not in done.stderr, done.stderr
    said = [line for line in done.stderr.splitlines() if noise in line]
    assert len(said) == 1 and "MCP server 'raw'" in said[0] and "not JSON-RPC" in said[0], done.stderr


def test_a_result_that_is_not_utf_8_reaches_the_model_with_its_bad_bytes_replaced(tmp_path: Path) -> None:
    # The SDK's stdio reader decoded strictly: the bad byte ended its reading, and the call
    # waited out its whole timeout to say the server "did not answer".
    scenario = ScriptedScenario([
        reply(tool_use("latin", {}, id="toolu_latin")), reply(tool_use("echo", {"text": "hi"}, id="toolu_echo")), reply("Done."),
    ])  # fmt: skip
    with MessagesAPIServer(scenario) as server:
        done = cli_run(tmp_path, server, raw_config(tmp_path / "raw", timeout=30))
    assert done.returncode == 0, done.stderr
    sent = results_sent(server)
    assert (sent["toolu_latin"]["content"], sent["toolu_latin"].get("is_error", False)) == ("caf\ufffd", False)
    assert sent["toolu_echo"]["content"] == "hi", "the server's connection goes on"


def test_a_50_mb_result_and_a_100_mb_stderr_line_are_cut_as_they_are_read(tmp_path: Path) -> None:
    size, shout = 50_000_000, 100_000_000
    scenario = ScriptedScenario(
        [reply(tool_use("big", {"size": size}, id="toolu_big")), reply(tool_use("shout", {"size": shout}, id="toolu_shout")), reply("ok")]
    )
    with MessagesAPIServer(scenario) as server, mcp_tools(raw_config(tmp_path / "raw"), retry=FAST) as mcp:
        # What the SDK parsed in this process is the line as the keeper passed it on: cut.
        direct = mcp.connections.call("raw", "big", {"size": size}, key="direct")
        assert len(direct.content[0].text) < STRING_LIMIT + 200
        assert go(server, tmp_path, ToolRegistry(list(mcp))).status == "completed"
    sent = results_sent(server)
    big = sent["toolu_big"]["content"]
    assert big.startswith(f"[this answer was cut as it was read from the MCP server: {size - STRING_LIMIT:,} bytes of its text left out]")
    assert big.count("abcdefghij") > 9_000 and len(big) < 101_000  # the tool output limit applies after
    recorded = next(s for s in read_run("mcp", str(tmp_path / "runs")).steps if s.step_id.endswith("toolu_big"))
    assert recorded.result["content"] == big
    dying = sent["toolu_shout"]["content"]
    assert sent["toolu_shout"]["is_error"] and "its stderr ended with" in dying
    assert f"!!!! [... {shout - 1000:,} more characters of this line not kept]" in dying


def test_stop_cancels_an_mcp_call_in_flight_and_leaves_its_step_in_doubt(tmp_path: Path) -> None:
    folder = tmp_path / "raw"
    scenario = ScriptedScenario([reply(tool_use("slow", {"seconds": 30}, id="toolu_slow")), reply("never asked")])
    (tmp_path / "work").mkdir()
    with MessagesAPIServer(scenario) as server, mcp_tools(raw_config(folder)) as mcp:
        handle = background(
            run_agent, "Wait for the slow call.", run_id="stopped", client=AnthropicModel(api_key="k", base_url=server.url),
            model="claude-test-1", tools=ToolRegistry(list(mcp)), store=str(tmp_path / "runs"), workspace=tmp_path / "work",
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while not (folder / "slow.started").exists():
            assert time.monotonic() < deadline and not handle.done, "the slow call never started"
            time.sleep(0.02)
        handle.stop("stopped by the test (the Stop button's call)")
        with pytest.raises(KeyboardInterrupt):
            handle.wait(timeout=60)
        # The run ended while the call was still going: it was cancelled, not waited for. The
        # cancellation is a notification (no answer), so the server may write it a moment later.
        cancelled = wait_until(lambda: lines(folder / "cancelled.txt"), "the server hearing the cancellation", timeout=20)
        done = lines(folder / "done.txt")
    assert done == [], "the call ran to its end: Stop waited for it"
    assert len(cancelled) == 1 and "\t" in cancelled[0], cancelled
    assert len(server.requests_to("messages")) == 1, "the model was asked again after the stop"
    run = read_run("stopped", str(tmp_path / "runs"))
    assert run.summary.status == "in_doubt", "a run whose external call was cut off reads in doubt, as after run_bash"
    (step,) = [s for s in run.steps if s.step_id == "tool:0:0:toolu_slow"]
    assert step.state == "in_doubt", "an external call cut off by Stop may have had its effect: in doubt"


def test_a_50_mb_result_over_streamable_http_is_cut_as_it_is_read(tmp_path: Path, http_ledger: Any) -> None:
    size = 50_000_000
    scenario = ScriptedScenario([reply(tool_use("big", {"size": size}, id="toolu_big")), reply("ok")])
    with MessagesAPIServer(scenario) as server, mcp_tools(http_ledger().config(), retry=FAST) as mcp:
        direct = mcp.connections.call("ledger", "big", {"size": size}, key="direct")
        assert len(direct.content[0].text) < STRING_LIMIT + 200, "the SDK parsed the whole answer"
        assert go(server, tmp_path, ToolRegistry(list(mcp))).status == "completed"
    big = results_sent(server)["toolu_big"]["content"]
    assert big.startswith(f"[this answer was cut as it was read from the MCP server: {size - STRING_LIMIT:,} bytes of its text left out]")


def test_resources_reach_the_model_as_their_text_and_an_image_or_link_is_named(tmp_path: Path) -> None:
    # A text resource (as file servers answer) was converted to a document block and dropped,
    # a JSON one refused for its MIME type: the model got "not shown" for text it could read.
    scenario = ScriptedScenario([reply(tool_use("attach", {}, id="toolu_attach")), reply("Read.")])
    with MessagesAPIServer(scenario) as server, mcp_tools(raw_config(tmp_path / "raw"), retry=FAST) as mcp:
        assert go(server, tmp_path, ToolRegistry(list(mcp))).status == "completed"
    sent = results_sent(server)["toolu_attach"]
    assert not sent.get("is_error"), sent
    assert sent["content"].splitlines() == [
        "the plan: ship on Friday",
        '{"ship": "Friday"}',
        "caf\ufffd old",
        "[image block (image/png) not shown: a recorded tool result holds text]",
        "[resource link big.csv: file:///notes/big.csv]",
    ]


def test_a_server_that_never_answers_initialize_is_ended_and_asyncio_says_nothing_after(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The loop was closed while the SDK still ended the given-up server: asyncio logged "Loop
    # ... that handles pid N is closed" when it exited, in a notebook's next cell.
    folder = tmp_path / "ledger"
    before = set(threading.enumerate())
    with caplog.at_level(logging.WARNING), pytest.raises(McpServerError, match="did not start within 2s"):
        mcp_tools(stdio_config(folder, env={"LEDGER_START_DELAY": "60"}, startupTimeout=2))
    pids = [int(p) for p in lines(folder / "pids.txt")]
    assert pids
    wait_until(lambda: not any(alive(p) for p in pids), "the server ending", timeout=20)
    loops = [t for t in set(threading.enumerate()) - before if t.name == "nb-durable-mcp"]
    wait_until(lambda: not any(t.is_alive() for t in loops), "the MCP loop's thread ending", timeout=20)
    assert [r.getMessage() for r in caplog.records if r.name == "asyncio"] == []


def test_a_command_not_on_path_a_relative_one_and_a_missing_cwd_each_say_what_to_do(tmp_path: Path) -> None:
    # Each said only "[Errno 2] No such file or directory", the cwd's without naming the setting.
    (tmp_path / "server.sh").write_text("#!/bin/sh\nexec true\n")
    cases = {
        "mcp-server-nowhere": ({"command": "mcp-server-nowhere"}, "it is not on PATH ("),
        "relative": ({"command": "./bin/server.sh"}, "no such file in the server's working directory "),
        "no-exec": ({"command": str(tmp_path / "server.sh")}, "make it executable (chmod +x)"),
        "cwd": ({"command": sys.executable, "cwd": str(tmp_path / "srv")}, f"its cwd {tmp_path / 'srv'} is not a directory"),
    }
    for name, (spec, says) in cases.items():
        with pytest.raises(McpServerError) as failed:
            mcp_tools({"mcpServers": {name: spec}})
        assert f"MCP server {name!r} did not start" in str(failed.value) and says in str(failed.value), str(failed.value)


def test_a_secret_a_server_puts_in_its_tool_descriptions_is_masked_before_the_log_and_the_model(tmp_path: Path) -> None:
    # Only results were masked: the description and schema went to the log and the API whole.
    secret = "postgres://app:pw-5e4d3c2b1a@db.internal/prod"
    config = raw_config(tmp_path / "raw", env={"RAW_NOTE": secret})
    scenario = ScriptedScenario([reply(tool_use("echo", {"text": "hi"}, id="toolu_echo")), reply("Echoed.")])
    with MessagesAPIServer(scenario) as server:
        with mcp_tools(config, retry=FAST) as mcp:
            assert go(server, tmp_path, ToolRegistry(list(mcp)), max_turns=1).status == "interrupted"
        assert [r for r in server.requests if secret in json.dumps(r.body)] == []
        with tools_for_run("mcp", str(tmp_path / "runs"), mcp=config) as tools:  # checked against the server: unchanged
            assert tools.registry is not None
    assert files_containing(tmp_path / "runs", secret) == []
    (echo,) = [t for t in read_run("mcp", str(tmp_path / "runs")).summary.settings["tools"] if t["name"] == "echo"]
    assert "[REDACTED" in echo["description"] and "[REDACTED" in echo["input_schema"]["properties"]["text"]["description"]


def test_a_server_inherits_no_secret_of_the_run_s_environment_only_what_its_config_gives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("ANTHROPIC_API_KEY", "GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "DATABASE_URL"):
        monkeypatch.setenv(name, "secret-value-0a1b2c3d")
    with mcp_tools(raw_config(tmp_path / "raw", env={"RAW_GIVEN": "${GITHUB_TOKEN}"})) as mcp:
        names = mcp.connections.call("raw", "env_names", {}, key="env").content[0].text.splitlines()
    assert "RAW_GIVEN" in names and "PATH" in names
    assert not {"ANTHROPIC_API_KEY", "GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "DATABASE_URL"} & set(names), names


class _Refusing(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.send_response(401)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def test_an_http_server_that_refuses_the_token_says_its_status(tmp_path: Path) -> None:
    # The SDK said only "Server returned an error response": a wrong token read like any failure.
    with ThreadingHTTPServer(("127.0.0.1", 0), _Refusing) as web:
        threading.Thread(target=web.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{web.server_address[1]}/mcp"
        token = "header-token-9d8c7b6a5f"
        try:
            with pytest.raises(McpServerError) as refused:
                mcp_tools({"mcpServers": {"web": {"url": url, "headers": {"Authorization": f"Bearer {token}"}}}})
        finally:
            web.shutdown()
    said = str(refused.value)
    assert said.startswith("MCP server 'web' did not start") and "Check its url and headers in the config." in said, said
    assert said.endswith(f"its last HTTP error:\n401 Unauthorized (to POST {url})"), said
    assert token not in said
