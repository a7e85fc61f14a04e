"""Bad tool input: the package's own tools go out ``strict: true`` in the schema subset strict
mode accepts (the loopback API refuses anything else, as the real one does); input the schema
still refuses goes back to the model as an error result, and a tool called that way
``max_invalid_tool_calls`` times stops the run as ``bad_tool_input`` (exit 10), resumable.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import anthropic
import pytest

from nb_durable.agent.tools import ToolRegistry, builtin_tools
from nb_durable.agent.tools.bad_input import strict_tools
from nb_durable.core.runs import read_run
from nb_durable.errors import EXIT_CODES
from tests.conftest import nb_durable_cli
from tests.fakes import MessagesAPIServer, reply, tool_use

MODEL = "claude-test-1"
RUN = "bad-input"
TOO_LONG = {"command": "sleep 1", "timeout": 9999}  # strict lets it through: maximum is not enforceable


pytestmark = pytest.mark.usefixtures("no_ambient_anthropic")


def cli(server: MessagesAPIServer, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return nb_durable_cli(*args, cwd=cwd, ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="test-key")


def test_the_sdk_takes_strict_and_the_fake_refuses_what_strict_mode_cannot_enforce() -> None:
    assert "strict" in anthropic.types.ToolParam.__annotations__
    loose = {"name": "f", "description": "d", "strict": True,
             "input_schema": {"type": "object", "properties": {"n": {"type": "number", "maximum": 3}}, "additionalProperties": False}}  # fmt: skip
    with MessagesAPIServer([reply("ok")]) as server:
        client = anthropic.Anthropic(api_key="k", base_url=server.url, max_retries=0)
        with pytest.raises(anthropic.BadRequestError, match="`maximum` is not supported in strict mode"):
            client.messages.create(model=MODEL, max_tokens=100, tools=[loose], messages=[{"role": "user", "content": "hi"}])  # type: ignore[list-item]
        ours = strict_tools(ToolRegistry(builtin_tools()).schemas(), ToolRegistry(builtin_tools()).strict_names())
        assert client.messages.create(model=MODEL, max_tokens=100, tools=ours, messages=[{"role": "user", "content": "hi"}]).content  # type: ignore[arg-type]
    bash = next(t for t in ours if t["name"] == "run_bash")
    assert bash["strict"] is True and "maximum" not in bash["input_schema"]["properties"]["timeout"]
    assert "maximum: 600" in bash["input_schema"]["properties"]["timeout"]["description"]  # still said to the model


def test_a_tool_always_given_invalid_input_stops_the_run_with_exit_9_and_a_resume_goes_on(tmp_path: Path) -> None:
    turns: list[Any] = [reply(tool_use("run_bash", TOO_LONG, id=f"toolu_{i}")) for i in range(2)] + [reply("Done.")]
    with MessagesAPIServer(turns) as server:
        first = cli(server, tmp_path, "run", "Wait a while.", "--run", RUN, "--model", MODEL, "--workspace", ".",
                    "--max-invalid-tool-calls", "2")  # fmt: skip
        asked = [r for r in server.requests if r.endpoint == "messages"]
        assert first.returncode == EXIT_CODES["bad_tool_input"] == 10, first.stderr
        assert "bad tool input" in first.stderr and "run_bash 2 times" in first.stderr
        assert not server.rejected
        # The package's own tools went out strict; what the run records (and hashes) did not change.
        assert all(t["strict"] is True for t in asked[0].body["tools"])
        record = read_run(RUN, str(tmp_path / "runs"))
        assert all("strict" not in t for t in record.summary.settings["tools"])
        results = [s.result for s in record.steps if s.step_id.startswith("tool:")]
        assert [r["is_error"] for r in results] == [True, True]
        assert all("Invalid input for run_bash" in r["content"] and "600" in r["content"] for r in results)
        again = cli(server, tmp_path, "resume", RUN)
        assert again.returncode == 0, again.stderr
        count = len(server.requests)
        replay = cli(server, tmp_path, "resume", RUN)
        assert replay.returncode == 0 and len(server.requests) == count
    assert len([r for r in server.requests if r.endpoint == "messages"]) == 3
    decision = next(s for s in read_run(RUN, str(tmp_path / "runs")).steps if s.step_id == "settings:2")
    assert decision.result["action"] == "reask" and decision.result["after"] == "bad_tool_input"


def test_a_scripted_reply_that_breaks_a_strict_schema_is_a_test_mistake(tmp_path: Path) -> None:
    with MessagesAPIServer([reply(tool_use("read_file", {"path": 3}, id="toolu_x"))]) as server:
        done = cli(server, tmp_path, "run", "Read.", "--run", RUN, "--model", MODEL, "--workspace", ".")
    assert done.returncode == 1
    assert "breaks a strict tool's schema: read_file input.path is not string" in done.stderr
