"""MCP tools in durable runs: real ``mcp`` SDK servers (stdio and streamable HTTP on loopback),
the agent on the real anthropic SDK against the loopback Messages API.

Proven here: one run calls a read-only, an idempotent and a destructive tool of a trusted
server; their effects come from the annotations (what the log records for each step), the timeline names server and
effect, and each call carried the step's idempotency key in ``_meta``. A finished run replays
with every server down (no server started, nothing sent to the model). A changed schema is
refused with ``ToolsChangedError`` naming the tool, or accepted with the flag (recorded as a
decision). A server that crashes mid-call: a read-only call is retried (every attempt
recorded) on a restarted server; a destructive one is not retried and the model is told its
outcome is unknown. A server that never starts, and a call that times out, are is_error
results naming the server, in bounded time. The server's secret env value is in no file.
Calls made at once (the children of one turn) share one check of the tools and one start of
the server, and hear the same failure when that start fails.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from nb_durable.agent import Observer, RunHooks, StepView, ToolRegistry, builtin_tools
from nb_durable.agent.models.anthropic import AnthropicModel
from nb_durable.agent.models.retry import RetryPolicy
from nb_durable.agent.run.loop import AgentResult, resume_agent, run_agent
from nb_durable.agent.run.stopping import RunStopped, StopSignal
from nb_durable.agent.tools import ToolContext
from nb_durable.agent.tools.mcp import McpToolset, mcp_tools, tools_for_run
from nb_durable.agent.tools.mcp.config import load_mcp_config
from nb_durable.agent.tools.mcp.connection import McpConnections
from nb_durable.core.events import AttemptFailed, Decision, StepStarted
from nb_durable.core.runs import read_run
from nb_durable.errors import McpConfigError, McpServerError, ToolsChangedError
from tests.agent.mcp.conftest import (
    HEADER_TOKEN,
    TOKEN,
    HttpLedger,
    alive,
    files_containing,
    lines,
    stdio_config,
)
from tests.fakes import MessagesAPIServer, ScriptedScenario, reply, tool_use
from tests.waiting import wait_until

MODEL = "claude-test-1"
TASK = "Look up alpha, label it, and record it in the ledger."
FAST = RetryPolicy(max_attempts=3, base_delay=0.01, jitter=0.0)


class Recorder(Observer):
    def __init__(self) -> None:
        self.steps: list[StepView] = []

    def step_changed(self, step: StepView) -> None:
        self.steps.append(step)


def three_calls() -> ScriptedScenario:
    return ScriptedScenario(
        [
            reply(
                tool_use("lookup", {"word": "alpha"}, id="toolu_look"),
                tool_use("set_label", {"key": "alpha", "value": "seen"}, id="toolu_label"),
                tool_use("append", {"entry": "alpha seen"}, id="toolu_append"),
            ),
            reply("Looked up, labelled and recorded."),
        ]
    )


def go(server: MessagesAPIServer, tmp: Path, tools: ToolRegistry, *, run_id: str = "mcp", observer: Observer | None = None,
       max_turns: int = 20) -> AgentResult:  # fmt: skip
    (tmp / "work").mkdir(exist_ok=True)
    return run_agent(
        TASK,
        run_id=run_id,
        client=AnthropicModel(api_key="test-key", base_url=server.url, timeout=20),
        model=MODEL,
        tools=tools,
        store=str(tmp / "runs"),
        workspace=tmp / "work",
        max_turns=max_turns,
        hooks=RunHooks(observer=observer or Observer(), sleep=lambda s: None),
    )


def results_sent(server: MessagesAPIServer) -> dict[str, dict[str, Any]]:
    """tool_use id -> the tool_result the agent sent back."""
    out = {}
    for request in server.requests:
        for message in request.body.get("messages") or []:
            if message["role"] == "user" and isinstance(message["content"], list):
                for block in message["content"]:
                    if block.get("type") == "tool_result":
                        out[block["tool_use_id"]] = block
    return out


def effects_recorded(run: Any) -> dict[str, str | None]:
    return {s.step_id.split(":")[-1]: s.effect for s in run.steps if s.step_id.startswith("tool:")}


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_run_calls_a_read_only_an_idempotent_and_a_destructive_mcp_tool(
    tmp_path: Path, transport: str, http_ledger: Any
) -> None:
    folder = tmp_path / "ledger"
    http: HttpLedger | None = http_ledger() if transport == "http" else None
    config = http.config(trusted=True) if http is not None else stdio_config(folder, trusted=True)
    recorder = Recorder()
    with MessagesAPIServer(three_calls()) as server, mcp_tools(config) as mcp:
        result = go(server, tmp_path, ToolRegistry([*builtin_tools(), *mcp]), observer=recorder)
    assert result.status == "completed", result
    sent = results_sent(server)
    assert "alpha: a word of the ledger" in sent["toolu_look"]["content"]
    assert sent["toolu_label"]["content"] == "label alpha = seen"
    assert sent["toolu_append"]["content"] == "recorded: alpha seen"
    assert all(not b.get("is_error") for b in sent.values())
    # The effects come from the annotations of a trusted server: pure steps write no intent, the others do.
    run = read_run("mcp", str(tmp_path / "runs"))
    assert effects_recorded(run) == {"toolu_look": None, "toolu_label": "idempotent", "toolu_append": "external"}
    # Each call carried its step's idempotency key in _meta.
    calls = dict(line.split("\t") for line in lines(folder / "calls.txt"))
    assert calls["append"] == "mcp:tool:0:2:toolu_append"
    assert calls["set_label"] == "mcp:tool:0:1:toolu_label"
    assert lines(folder / "ledger.txt") == ["mcp:tool:0:2:toolu_append\talpha seen"]
    # The timeline names each tool's server and effect.
    titles = {s.title for s in recorder.steps if s.kind == "tool"}
    assert {"lookup · MCP ledger · pure", "set_label · MCP ledger · idempotent", "append · MCP ledger · external"} <= titles
    # The server list is recorded with names only; the secret values are in no file at all.
    sources = run.summary.settings["sources"]
    assert sources["append"]["server_config"]["transport"] == transport
    if transport == "stdio":
        assert sources["append"]["server_config"]["env"] == ["LEDGER_TOKEN"]
        assert "[REDACTED:ledger.env.LEDGER_TOKEN]" in sent["toolu_look"]["content"]
    else:
        assert sources["append"]["server_config"]["headers"] == ["Authorization"]
    for secret in (TOKEN, HEADER_TOKEN):
        assert files_containing(tmp_path / "runs", secret) == []
        assert secret not in json.dumps([r.body for r in server.requests])


def test_a_server_s_env_values_are_masked_in_every_tool_s_result_not_only_its_own(tmp_path: Path) -> None:
    """A literal in a server's env was masked in that server's results only: run_bash printing
    the config file (or the server's /proc environ) put it in the log, before any server started."""
    config = stdio_config(tmp_path / "ledger", trusted=True)
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "mcp.json").write_text(json.dumps(config))
    scenario = ScriptedScenario([reply(tool_use("run_bash", {"command": "cat mcp.json"}, id="toolu_cat")), reply("Read it.")])
    with MessagesAPIServer(scenario) as server, mcp_tools(config) as mcp:
        result = go(server, tmp_path, ToolRegistry([*builtin_tools(), *mcp]))
    assert result.status == "completed", result
    assert "[REDACTED:ledger.env.LEDGER_TOKEN]" in results_sent(server)["toolu_cat"]["content"]
    assert files_containing(tmp_path / "runs", TOKEN) == []
    assert TOKEN not in json.dumps([r.body for r in server.requests])


def test_a_finished_run_replays_with_every_server_down(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "ledger"
    with MessagesAPIServer(three_calls()) as server:
        with mcp_tools(stdio_config(folder)) as mcp:
            assert go(server, tmp_path, ToolRegistry([*builtin_tools(), *mcp])).status == "completed"
        sent = len(server.requests)
        calls = lines(folder / "calls.txt")
        # The servers are gone, and the recorded command could not even start one now.
        settings = read_run("mcp", str(tmp_path / "runs")).summary.settings
        broken = {"mcpServers": {"ledger": {"command": str(tmp_path / "no-such-server")}}}
        monkeypatch.setitem(sys.modules, "mcp", None)  # not even the SDK is needed to replay
        with McpToolset.from_run(settings, broken, run_id="mcp") as recorded:
            result = resume_agent("mcp", store=str(tmp_path / "runs"), tools=ToolRegistry([*builtin_tools(), *recorded]))
            assert recorded.connections.starts == {}
        # The same through the front ends' rule: a completed run starts nothing.
        with tools_for_run("mcp", str(tmp_path / "runs"), mcp=broken) as tools:
            assert tools.mcp is not None and tools.mcp.connections.starts == {}
        # Accepting changes checks the tools at once (for a follow-up), but a replay needs none.
        with tools_for_run("mcp", str(tmp_path / "runs"), mcp=broken, accept_changes=True) as tools:
            again = resume_agent("mcp", store=str(tmp_path / "runs"), tools=tools.registry)
        assert (again.status, again.live_steps) == ("completed", 0)
    assert result.status == "completed" and result.live_steps == 0 and result.replayed_steps == 5
    assert len(server.requests) == sent
    assert lines(folder / "calls.txt") == calls


def unfinished_run(server: MessagesAPIServer, tmp_path: Path, config: dict[str, Any]) -> None:
    """A run that stopped at its turn limit after the three calls (resumable)."""
    with mcp_tools(config) as mcp:
        result = go(server, tmp_path, ToolRegistry([*builtin_tools(), *mcp]), max_turns=1)
    assert result.status == "interrupted"


def test_a_resume_whose_config_needs_a_variable_nobody_set_is_a_config_error(tmp_path: Path) -> None:
    """The resume's path (tools_for_run before verify) checks the variables as a new run's does:
    without the check, the server's start failed as "did not start (McpConfigError: ...)", exit 1."""
    folder = tmp_path / "ledger"
    with MessagesAPIServer(three_calls()) as server:
        unfinished_run(server, tmp_path, stdio_config(folder))
    unset = stdio_config(folder, env={"LEDGER_TOKEN": "${NOBODY_SET_THIS}"})
    with pytest.raises(McpConfigError, match="MCP server 'ledger' needs the environment variable NOBODY_SET_THIS") as info:
        tools_for_run("mcp", str(tmp_path / "runs"), mcp=unset)
    assert info.value.outcome == "usage"


@pytest.mark.slow(12)
def test_a_changed_schema_is_refused_with_a_named_error_or_accepted_as_a_decision(tmp_path: Path) -> None:
    folder = tmp_path / "ledger"
    scenario = ScriptedScenario(
        [
            reply(tool_use("append", {"entry": "one"}, id="toolu_1")),
            reply(tool_use("append", {"entry": "two", "amount": 2}, id="toolu_2")),
            reply("Done."),
        ]
    )
    with MessagesAPIServer(scenario) as server:
        unfinished_run(server, tmp_path, stdio_config(folder))
        changed = stdio_config(folder, changed=True)
        with pytest.raises(ToolsChangedError) as refused:
            tools_for_run("mcp", str(tmp_path / "runs"), mcp=changed)
        message = str(refused.value)
        assert "tool 'append' of MCP server 'ledger' has another input schema now (added amount)" in message
        assert "Fork the run" in message and "--mcp-accept-changes" in message
        assert refused.value.outcome == "usage" and refused.value.run_id == "mcp"
        with tools_for_run("mcp", str(tmp_path / "runs"), mcp=changed, accept_changes=True) as tools:
            result = resume_agent("mcp", store=str(tmp_path / "runs"), tools=tools.registry, max_turns=5,
                                  client=AnthropicModel(api_key="k", base_url=server.url))  # fmt: skip
    assert result.status == "completed"
    run = read_run("mcp", str(tmp_path / "runs"))
    decisions = [e for e in run.events if isinstance(e, Decision)]
    assert [(d.step, d.decision) for d in decisions] == [("tool:1:0:toolu_2", "accepted tool change")]
    assert "added amount" in decisions[0].note
    assert [line.split("\t")[1] for line in lines(folder / "ledger.txt")] == ["one", "two x2"]


def test_a_server_crash_mid_call_retries_a_read_only_call_and_never_a_destructive_one(tmp_path: Path) -> None:
    folder = tmp_path / "ledger"
    scenario = ScriptedScenario(
        [reply(tool_use("crash_once", {}, id="toolu_count"), tool_use("append", {"entry": "x"}, id="toolu_add")), reply("ok")]
    )
    config = stdio_config(folder, env={"LEDGER_CRASH_APPEND": "1"}, trusted=True)
    with MessagesAPIServer(scenario) as server, mcp_tools(config, retry=FAST) as mcp:
        assert go(server, tmp_path, ToolRegistry(list(mcp))).status == "completed"
        starts = mcp.connections.starts["ledger"]
    sent = results_sent(server)
    assert sent["toolu_count"]["content"] == "0 entries" and not sent["toolu_count"].get("is_error")
    add = sent["toolu_add"]
    assert add["is_error"] and "MCP server 'ledger' closed the connection during append" in add["content"]
    assert "Whether this append call took effect is unknown" in add["content"]
    assert "mcp:tool:0:1:toolu_add" in add["content"]
    calls = [line.split("\t")[0] for line in lines(folder / "calls.txt")]
    assert calls.count("crash_once") == 2 and calls.count("append") == 1  # the read-only call re-ran, the append did not
    assert starts == 2  # started to list, restarted for the retry (the append is not retried)
    run = read_run("mcp", str(tmp_path / "runs"))
    failed = [e for e in run.events if isinstance(e, AttemptFailed)]
    assert [(e.step, e.attempt, e.delay is not None) for e in failed] == [
        ("tool:0:0:toolu_count", 1, True),
        ("tool:0:1:toolu_add", 1, False),
    ]
    assert all("MCP server 'ledger'" in e.message for e in failed)


def test_a_server_that_does_not_start_or_does_not_answer_is_named_in_bounded_time(tmp_path: Path) -> None:
    missing = {"mcpServers": {"gone": {"command": str(tmp_path / "no-such-server"), "startupTimeout": 5}}}
    with pytest.raises(McpServerError) as no_start:
        mcp_tools(missing)
    assert "MCP server 'gone' did not start" in str(no_start.value) and no_start.value.server == "gone"
    # The advice ends the sentence; the server's own last words follow on lines of their own
    # (they came mid-sentence, and ". Check its command" began a line).
    said, _, stderr = str(no_start.value).partition("\nits stderr ended with:\n")
    assert said.endswith(". Check its command, args, env and cwd in the config."), str(no_start.value)
    assert "no-such-server" in stderr and not stderr.endswith("\n"), str(no_start.value)
    # One that never answers is given up at its startupTimeout: its stop waited 10 s more for a
    # session that was never made (12.7 s for "did not start within 2s").
    mute = {"mcpServers": {"mute": {"command": "sleep", "args": ["60"], "startupTimeout": 2}}}
    started = time.monotonic()
    with pytest.raises(McpServerError, match="MCP server 'mute' did not start within 2s"):
        mcp_tools(mute)
    assert time.monotonic() - started < 6

    folder = tmp_path / "ledger"
    scenario = ScriptedScenario([reply(tool_use("append", {"entry": "slow"}, id="toolu_slow")), reply("ok")])
    config = stdio_config(folder, env={"LEDGER_APPEND_DELAY": "30"}, timeout=1)
    started = time.monotonic()
    with MessagesAPIServer(scenario) as server, mcp_tools(config, retry=FAST) as mcp:
        assert go(server, tmp_path, ToolRegistry(list(mcp))).status == "completed"
        pids = [int(p) for p in lines(folder / "pids.txt")]
    assert time.monotonic() - started < 25
    slow = results_sent(server)["toolu_slow"]
    assert slow["is_error"] and "MCP server 'ledger' did not answer append within 1s" in slow["content"]
    assert lines(folder / "ledger.txt") == []
    from tests.agent.mcp.conftest import alive

    deadline = time.monotonic() + 10
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(p) for p in pids)  # the timed-out server was stopped, not left running


def test_a_recorded_run_whose_server_cannot_start_gets_an_error_result_naming_it(tmp_path: Path) -> None:
    folder = tmp_path / "ledger"
    scenario = ScriptedScenario(
        [reply(tool_use("lookup", {"word": "a"}, id="toolu_a")), reply(tool_use("lookup", {"word": "b"}, id="toolu_b")), reply("ok")]
    )
    with MessagesAPIServer(scenario) as server:
        unfinished_run(server, tmp_path, stdio_config(folder, trusted=True))
        settings = read_run("mcp", str(tmp_path / "runs")).summary.settings
        broken = {"mcpServers": {"ledger": {"command": str(tmp_path / "no-such-server"), "startupTimeout": 5}}}
        with McpToolset.from_run(settings, broken, run_id="mcp", retry=FAST) as recorded:
            result = resume_agent("mcp", store=str(tmp_path / "runs"), tools=ToolRegistry([*builtin_tools(), *recorded]),
                                  max_turns=5, client=AnthropicModel(api_key="k", base_url=server.url))  # fmt: skip
            assert recorded.connections.starts == {"ledger": 3}  # every attempt restarted it
    assert result.status == "completed"
    b = results_sent(server)["toolu_b"]
    assert b["is_error"] and "MCP server 'ledger' did not start" in b["content"] and "tried 3 times" in b["content"]
    run = read_run("mcp", str(tmp_path / "runs"))
    assert [e.attempt for e in run.events if isinstance(e, AttemptFailed)] == [1, 2, 3]
    assert not [e for e in run.events if isinstance(e, StepStarted) and e.step == "tool:1:0:toolu_b"]  # pure: no intent


def test_a_tool_error_from_the_server_is_an_error_result_for_the_model_not_retried(tmp_path: Path) -> None:
    folder = tmp_path / "ledger"
    scenario = ScriptedScenario([reply(tool_use("audit", {}, id="toolu_audit")), reply("The audit failed.")])
    with MessagesAPIServer(scenario) as server, mcp_tools(stdio_config(folder), retry=FAST) as mcp:
        assert go(server, tmp_path, ToolRegistry(list(mcp))).status == "completed"
    audit = results_sent(server)["toolu_audit"]
    assert audit["is_error"] and "Error executing tool audit" in audit["content"]
    assert [line.split("\t")[0] for line in lines(folder / "calls.txt")] == ["audit"]


def test_the_config_overrides_an_effect_and_asks_for_approval(tmp_path: Path) -> None:
    from nb_durable.agent import Approval

    folder = tmp_path / "ledger"
    config = stdio_config(folder, tools={"append": {"effect": "idempotent", "approve": True}})
    scenario = ScriptedScenario(
        [reply(tool_use("append", {"entry": "a"}, id="toolu_a")), reply(tool_use("append", {"entry": "b"}, id="toolu_b")), reply("ok")]
    )
    asked: list[str] = []

    def approve(name: str, tool_input: Any, reason: str) -> Approval:
        asked.append(reason)
        return Approval(tool_input["entry"] == "a", "test", "" if tool_input["entry"] == "a" else "not b")

    (tmp_path / "work").mkdir()
    with MessagesAPIServer(scenario) as server, mcp_tools(config) as mcp:
        [append] = [t for t in mcp if t.name == "append"]
        assert (append.effect, append.source["why"] if append.source else None) == ("idempotent", "set in the config")
        result = run_agent(TASK, run_id="mcp", client=AnthropicModel(api_key="k", base_url=server.url), model=MODEL,
                           tools=ToolRegistry(list(mcp)), store=str(tmp_path / "runs"), workspace=tmp_path / "work",
                           hooks=RunHooks(approve=approve))  # fmt: skip
    assert result.status == "completed"
    assert asked == ["the MCP config asks for a person's approval of every append call on server 'ledger'"] * 2
    assert [line.split("\t")[1] for line in lines(folder / "ledger.txt")] == ["a"]
    assert effects_recorded(read_run("mcp", str(tmp_path / "runs")))["toolu_a"] == "idempotent"
    assert "denied" in results_sent(server)["toolu_b"]["content"]


def _at_once(call: Any, n: int = 3) -> None:
    """``call(i)`` for i < n, each on a thread of its own, all let go at one moment."""
    together = threading.Barrier(n)

    def go(i: int) -> None:
        together.wait()
        call(i)

    threads = [threading.Thread(target=go, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)


def test_calls_made_at_once_on_a_rebuilt_run_start_its_server_once_and_all_succeed(tmp_path: Path) -> None:
    """The children of one turn share their parent's MCP tools and call them from threads of
    their own: on a run rebuilt from its record (a continued run, whose servers start on the
    first call), three first calls at once each checked the tools against the server; the
    first check to finish took the server off the list to check, and the other two failed
    with KeyError('ledger'), an error result for calls nothing was wrong with."""
    folder = tmp_path / "ledger"
    config = stdio_config(folder)
    with mcp_tools(config) as mcp:
        tools = list(mcp)
    settings = {"tools": [t.schema() for t in tools], "sources": {t.name: t.source for t in tools}}
    started = len(lines(folder / "pids.txt"))
    results: dict[int, Any] = {}

    def call(i: int) -> None:
        context = ToolContext.for_step(tmp_path, "mcp", f"tool:1:{i}:toolu_{i}")
        results[i] = lookup.fn({"word": f"w{i}"}, context)

    with McpToolset.from_run(settings, config, run_id="mcp") as recorded:
        lookup = next(t for t in recorded if t.name == "lookup")
        _at_once(call)
        assert recorded.connections.starts == {"ledger": 1}
    assert [(r.is_error, r.content.split(":")[0]) for _, r in sorted(results.items())] == [(False, "w0"), (False, "w1"), (False, "w2")]
    assert len(lines(folder / "pids.txt")) == started + 1


def test_calls_made_at_once_to_a_stopped_server_start_it_once(tmp_path: Path) -> None:
    """A server that died or timed out is stopped, and the next call starts it again; when the
    children of one turn made that call at once, each started a server process of its own, and
    the calls went to three servers (a server that keeps state, or holds a lock, saw three
    clients), of which the toolset knew only the last."""
    folder = tmp_path / "ledger"
    results: dict[int, Any] = {}

    def call(i: int) -> None:
        context = ToolContext.for_step(tmp_path, "mcp", f"tool:2:{i}:toolu_{i}")
        results[i] = lookup.fn({"word": f"w{i}"}, context)

    with mcp_tools(stdio_config(folder)) as mcp:
        lookup = next(t for t in mcp if t.name == "lookup")
        mcp.connections.stop("ledger")  # as after a call that found it dead
        _at_once(call)
        assert mcp.connections.starts == {"ledger": 2}
    assert [(r.is_error, r.content.split(":")[0]) for _, r in sorted(results.items())] == [(False, "w0"), (False, "w1"), (False, "w2")]
    assert len(lines(folder / "pids.txt")) == 2


def test_calls_made_at_once_to_a_server_that_does_not_start_wait_for_one_start(tmp_path: Path) -> None:
    """Calls that waited for a start that failed are told why, rather than each trying a start
    of its own in turn (three calls to a server that never answers took three startup timeouts)."""
    config = {"mcpServers": {"mute": {"command": "sleep", "args": ["60"], "startupTimeout": 2}}}
    errors: dict[int, McpServerError] = {}
    connections = McpConnections(load_mcp_config(config))

    def call(i: int) -> None:
        try:
            connections.call("mute", "anything", {}, key=f"mcp:tool:2:{i}:toolu_{i}")
        except McpServerError as e:
            errors[i] = e

    began = time.monotonic()
    try:
        _at_once(call)
    finally:
        connections.close()
    assert connections.starts == {"mute": 1}
    assert time.monotonic() - began < 6  # one start that failed, not three in turn
    assert sorted(errors) == [0, 1, 2]
    assert all("MCP server 'mute' did not start within 2s" in str(e) and not e.ran for e in errors.values())


def test_a_stop_while_a_server_starts_ends_that_server_before_the_next_call_starts_one(tmp_path: Path) -> None:
    """A stop that cancelled a call while its server was starting left that start going: the
    next call started a second server, and the first lived on until the process ended."""
    folder = tmp_path / "ledger"
    connections = McpConnections(load_mcp_config(stdio_config(folder, env={"LEDGER_START_DELAY": "3"})))
    stop = StopSignal()
    ended: list[BaseException] = []

    def first() -> None:
        try:
            connections.call("ledger", "lookup", {"word": "w0"}, key="mcp:tool:0:0:toolu_0", stop=stop)
        except BaseException as e:
            ended.append(e)

    try:
        thread = threading.Thread(target=first)
        thread.start()
        wait_until(lambda: lines(folder / "pids.txt"), "the server to begin its start", timeout=30)
        stop.request("stopped by the test")
        thread.join(30)
        assert [type(e) for e in ended] == [RunStopped]
        [starting] = [int(p) for p in lines(folder / "pids.txt")]
        wait_until(lambda: not alive(starting), "the server of the cancelled start to end", timeout=10)
        answer = connections.call("ledger", "lookup", {"word": "w1"}, key="mcp:tool:1:0:toolu_1")
        assert answer.content[0].text.startswith("w1:")
        pids = [int(p) for p in lines(folder / "pids.txt")]
        assert connections.starts == {"ledger": 2} and [alive(p) for p in pids] == [False, True]
    finally:
        connections.close()


def test_a_server_dying_does_not_hold_up_the_calls_of_another(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A server that died had its stderr's last lines gathered (up to a second of waiting for
    them) on the event loop that carries every server's calls, so the others' calls stood still."""
    from nb_durable.agent.tools.mcp import output

    gathering, release = threading.Event(), threading.Event()
    tail = output.StderrTail.text

    def slow_text(self: Any, redactor: Any) -> str:
        gathering.set()
        release.wait(30)
        return tail(self, redactor)

    monkeypatch.setattr(output.StderrTail, "text", slow_text)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    servers = {**stdio_config(tmp_path / "a", name="a")["mcpServers"], **stdio_config(tmp_path / "b", name="b")["mcpServers"]}
    connections = McpConnections(load_mcp_config({"mcpServers": servers}))
    failed: list[McpServerError] = []

    def crash() -> None:
        try:
            connections.call("a", "crash_once", {}, key="mcp:tool:1:0:toolu_a")
        except McpServerError as e:
            failed.append(e)

    answered: list[Any] = []
    other = threading.Thread(target=lambda: answered.append(connections.call("b", "lookup", {"word": "w"}, key="mcp:tool:1:1:toolu_b")))
    try:
        connections.call("b", "lookup", {"word": "warm"}, key="mcp:tool:1:2:toolu_c")  # b is up before a dies
        dying = threading.Thread(target=crash)
        dying.start()
        assert gathering.wait(30), "the dying server's stderr was never gathered"
        other.start()
        other.join(10)
        assert answered, "b's call waited on a's stderr"
    finally:
        release.set()
        dying.join(30)
        other.join(30)
        connections.close()
    assert failed and "closed the connection during crash_once" in str(failed[0])
