"""A server's annotations decide effects only when its config says the server is trusted.

The ledger server's ``charge`` moves money but is annotated ``readOnlyHint``. By default (the
MCP specification: annotations are untrusted unless the server is) the tool is external, so
a server that dies right after the charge is not called again, and a run SIGKILLed after the
charge does not charge again on resume: its step is in doubt and the in-doubt policy decides.
With ``"trusted": true`` in the server's config the annotation is believed (pure: retried,
which charges again: that is what trusting a server means). The trust is recorded with the
run, so a resume decides the same way; a run recorded before the setting existed (its effects
taken from annotations) resumes live with those effects, not refused as changed. A tool whose
effect changed since the run (its annotations, or the config's override) is refused, saying
what decided each effect; once the change is accepted, its calls take the effect it has now.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nb_durable.agent import ToolRegistry, continue_agent, resume_agent
from nb_durable.agent.models.anthropic import AnthropicModel
from nb_durable.agent.tools.mcp import McpServerConfig, mcp_tools, tools_for_run
from nb_durable.core.runs import read_run
from nb_durable.errors import ToolsChangedError
from tests.agent.mcp.conftest import lines, stdio_config
from tests.agent.mcp.test_mcp_crash import killed, wait_for, worker
from tests.agent.mcp.test_mcp_run import FAST, effects_recorded, go, results_sent, unfinished_run
from tests.fakes import MessagesAPIServer, ScriptedScenario, reply, tool_use


def charge_once() -> ScriptedScenario:
    return ScriptedScenario([reply(tool_use("charge", {"amount": 40}, id="toolu_pay")), reply("Paid.")])


@pytest.mark.parametrize(("trusted", "charges"), [(None, 1), (True, 3)], ids=["by-default", "trusted"])
def test_a_read_only_annotation_is_believed_only_from_a_trusted_server(tmp_path: Path, trusted: bool | None, charges: int) -> None:
    folder = tmp_path / "ledger"
    extra: dict[str, Any] = {} if trusted is None else {"trusted": trusted}
    config = stdio_config(folder, env={"LEDGER_CRASH_AFTER_CHARGE": "1"}, **extra)
    with MessagesAPIServer(charge_once()) as server, mcp_tools(config, retry=FAST) as mcp:
        [tool] = [t for t in mcp if t.name == "charge"]
        assert go(server, tmp_path, ToolRegistry(list(mcp))).status == "completed"
    assert len(lines(folder / "charges.txt")) == charges
    pay = results_sent(server)["toolu_pay"]
    assert pay["is_error"]
    recorded = read_run("mcp", str(tmp_path / "runs"))
    if trusted:
        assert (tool.effect, tool.source and tool.source["why"]) == ("pure", "readOnlyHint")
        assert effects_recorded(recorded)["toolu_pay"] is None
    else:
        assert tool.effect == "external"
        assert tool.source is not None and "not trusted" in tool.source["why"]
        assert "Whether this charge call took effect is unknown" in pay["content"]
        assert effects_recorded(recorded)["toolu_pay"] == "external"
        assert recorded.summary.settings["sources"]["charge"]["server_config"]["trusted"] is False


def test_a_run_killed_after_an_untrusted_read_only_charge_does_not_charge_again_on_resume(tmp_path: Path) -> None:
    folder = tmp_path / "ledger"
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps(stdio_config(folder, env={"LEDGER_AFTER_DELAY": "60"})))
    with MessagesAPIServer(charge_once()) as server:
        first = worker(tmp_path, server, config)
        wait_for(folder / "charge.done", first)
        killed(first)
        config.write_text(json.dumps(stdio_config(folder)))
        second = worker(tmp_path, server, config, "skip")
        out, err = second.communicate(timeout=120)
        assert second.returncode == 0, err
        sent = results_sent(server)
    assert json.loads(out.splitlines()[-1])["status"] == "completed"
    assert len(lines(folder / "charges.txt")) == 1, "the resume charged again"
    assert sent["toolu_pay"]["is_error"] and "whether it took effect is unknown" in sent["toolu_pay"]["content"]
    step = next(s for s in read_run("run", str(tmp_path / "runs")).steps if s.step_id == "tool:0:0:toolu_pay")
    assert step.state == "skipped"


def test_a_run_recorded_before_trust_was_a_setting_resumes_with_the_effects_it_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "ledger"
    scenario = ScriptedScenario(
        [reply(tool_use("lookup", {"word": "a"}, id="toolu_a")), reply(tool_use("lookup", {"word": "b"}, id="toolu_b")), reply("ok")]
    )
    record = McpServerConfig.record

    def as_before(self: McpServerConfig, *args: Any, **kwargs: Any) -> dict[str, Any]:
        out = record(self, *args, **kwargs)
        out.pop("trusted")  # what an earlier nb_durable recorded: no trust, effects from annotations
        return out

    with MessagesAPIServer(scenario) as server:
        with monkeypatch.context() as old:
            old.setattr(McpServerConfig, "record", as_before)
            old.setattr("nb_durable.agent.tools.mcp.toolset.effect_from", _annotations_decide)
            unfinished_run(server, tmp_path, stdio_config(folder))
        settings = read_run("mcp", str(tmp_path / "runs")).summary.settings
        assert "trusted" not in settings["sources"]["lookup"]["server_config"]
        assert settings["sources"]["lookup"]["effect"] == "pure"
        with tools_for_run("mcp", str(tmp_path / "runs"), mcp=stdio_config(folder)) as tools:  # verified live: no ToolsChangedError
            result = resume_agent("mcp", store=str(tmp_path / "runs"), tools=tools.registry, max_turns=5,
                                  client=AnthropicModel(api_key="k", base_url=server.url))  # fmt: skip
    assert result.status == "completed"
    assert effects_recorded(read_run("mcp", str(tmp_path / "runs"))) == {"toolu_a": None, "toolu_b": None}


def test_an_accepted_effect_change_gives_the_tool_its_effect_from_then_on(tmp_path: Path) -> None:
    # Accepted, the change was recorded as a decision but the tool kept its recorded effect: a
    # tool the config now calls external went on being retried and re-run as pure.
    folder = tmp_path / "ledger"
    scenario = ScriptedScenario(
        [reply(tool_use("lookup", {"word": "a"}, id="toolu_a")), reply(tool_use("lookup", {"word": "b"}, id="toolu_b")), reply("ok")]
    )
    now_external = stdio_config(folder, trusted=True, tools={"lookup": {"effect": "external"}})
    with MessagesAPIServer(scenario) as server:
        unfinished_run(server, tmp_path, stdio_config(folder, trusted=True))
        with pytest.raises(ToolsChangedError) as refused:
            tools_for_run("mcp", str(tmp_path / "runs"), mcp=now_external)
        assert (
            "tool 'lookup' of MCP server 'ledger' is external now (set in the config), recorded as pure (readOnlyHint)"
            in str(refused.value)
        ), str(refused.value)
        with tools_for_run("mcp", str(tmp_path / "runs"), mcp=now_external, accept_changes=True) as tools:
            assert tools.registry is not None and tools.registry.effect_of("lookup") == "external"
            result = resume_agent("mcp", store=str(tmp_path / "runs"), tools=tools.registry, max_turns=5,
                                  client=AnthropicModel(api_key="k", base_url=server.url))  # fmt: skip
    assert result.status == "completed"
    assert effects_recorded(read_run("mcp", str(tmp_path / "runs"))) == {"toolu_a": None, "toolu_b": "external"}


def test_a_follow_up_after_an_accepted_effect_change_does_not_retry_a_call_now_external(tmp_path: Path) -> None:
    # A finished run's tools were checked on their first live call (replay starts no server): the
    # registry held the recorded tool, whose pure effect the step recorded and the retry rule
    # read, so a charge the config now calls external was charged again after the server died.
    folder, runs = tmp_path / "ledger", str(tmp_path / "runs")
    scenario = ScriptedScenario([
        reply(tool_use("charge", {"amount": 5}, id="toolu_first")), reply("Paid."),
        reply(tool_use("charge", {"amount": 7}, id="toolu_again")), reply("Tried."),
    ])  # fmt: skip
    now_external = stdio_config(folder, trusted=True, env={"LEDGER_CRASH_AFTER_CHARGE": "1"}, tools={"charge": {"effect": "external"}})
    with MessagesAPIServer(scenario) as server:
        with mcp_tools(stdio_config(folder, trusted=True)) as mcp:
            assert go(server, tmp_path, ToolRegistry(list(mcp))).status == "completed"
        with tools_for_run("mcp", runs, mcp=now_external, accept_changes=True) as tools:
            result = continue_agent("mcp", "Charge 7 too.", store=runs, tools=tools.registry,
                                    client=AnthropicModel(api_key="k", base_url=server.url))  # fmt: skip
        again = results_sent(server)["toolu_again"]
    assert result.status == "completed"
    assert [line.split("\t")[1] for line in lines(folder / "charges.txt")] == ["5", "7"], "charged again after the change was accepted"
    assert again["is_error"] and "Whether this charge call took effect is unknown" in again["content"]
    assert effects_recorded(read_run("mcp", runs)) == {"toolu_first": None, "toolu_again": "external"}, "no intent before the charge"


def _annotations_decide(annotations: Any, override: Any, trusted: bool = True) -> Any:
    """How effects were decided before trust was a setting: from the annotations, always."""
    from nb_durable.agent.tools.mcp.adapter import effect_from

    return effect_from(annotations, override, trusted=True)

