"""Reading ``mcpServers`` configs, mapping annotations to effects, naming tools, and the
messages a person gets for each mistake (no server is started here)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from nb_durable.agent.tools.mcp import McpServerConfig, ToolOverride, effect_from, load_mcp_config, mcp_tools
from nb_durable.agent.tools.mcp.adapter import api_names
from nb_durable.errors import McpConfigError, McpNotInstalledError


class Hints:
    def __init__(self, **hints: Any) -> None:
        self.read_only_hint = hints.get("read_only")
        self.idempotent_hint = hints.get("idempotent")
        self.destructive_hint = hints.get("destructive")


def test_claude_desktop_and_vs_code_configs_are_read(tmp_path: Path) -> None:
    desktop = tmp_path / "claude_desktop_config.json"
    desktop.write_text(json.dumps({"mcpServers": {
        "files": {"command": "npx", "args": ["-y", "server-files", "."], "env": {"API_TOKEN": "abc12345678"}, "cwd": "sub"},
        "notes": {"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer xyz"}},
        "off": {"command": "x", "disabled": True},
    }}))  # fmt: skip
    config = load_mcp_config(desktop)
    files, notes = config.servers
    assert (files.transport, files.command, files.args, files.cwd) == ("stdio", "npx", ("-y", "server-files", "."), str(tmp_path / "sub"))
    assert (notes.transport, notes.url) == ("http", "http://127.0.0.1:9/mcp")
    assert config.path == str(desktop.resolve())
    vscode = load_mcp_config({"servers": {"web": {"type": "http", "url": "http://h/mcp"}}})
    assert vscode.servers[0].transport == "http"


def test_the_record_has_names_of_env_and_headers_never_values() -> None:
    config = load_mcp_config({"mcpServers": {
        "a": {"command": "run", "args": ["--key", "${A_KEY}"], "env": {"A_KEY": "super-secret-value"}},
        "b": {"url": "http://h/mcp?k=${B_TOKEN}", "headers": {"Authorization": "Bearer header-secret-1"}},
    }})  # fmt: skip
    records = json.dumps([s.record(config.secrets({"B_TOKEN": "url-secret-99"})) for s in config.servers])
    for value in ("super-secret-value", "header-secret-1", "url-secret-99"):
        assert value not in records
    assert '"env": ["A_KEY"]' in records and '"headers": ["Authorization"]' in records
    assert "${A_KEY}" in records  # templates stay as written; values come from the environment
    rebuilt = McpServerConfig.from_record(json.loads(records)[0])
    assert rebuilt.resolved_env({"A_KEY": "from-env-1"}) == {"A_KEY": "from-env-1"}
    assert "super-secret-value" not in repr(config)


def test_an_env_value_holding_spaces_is_masked_as_one_and_its_words_are_not_secrets() -> None:
    """Each word of such a value was a secret of its own: a word of it anywhere (here a
    server's argument, recorded in the run's settings, or a tool's output) was masked."""
    config = load_mcp_config({"mcpServers": {
        "db": {"command": "run", "args": ["report", "--role=reporting-admin"],
               "env": {"PGOPTIONS": "--search-path=warehouse-reporting --role=reporting-admin"}},
        "web": {"url": "http://h/mcp", "headers": {"Authorization": "Bearer header-secret-1"}},
    }})  # fmt: skip
    secrets = config.secrets({})
    assert config.servers[0].record(secrets)["args"] == ["report", "--role=reporting-admin"]
    value = "--search-path=warehouse-reporting --role=reporting-admin"
    assert secrets.redact(f"PGOPTIONS={value};") == "PGOPTIONS=[REDACTED:db.env.PGOPTIONS];"
    assert secrets.redact("--role=reporting-admin") == "--role=reporting-admin"
    # An Authorization value's credential is the secret people paste alone: it stays masked.
    assert secrets.redact("token header-secret-1") == "token [REDACTED:web.header.Authorization]"


def test_a_key_written_into_a_server_s_url_is_not_recorded_but_a_reference_to_one_is() -> None:
    """Remote servers often take their key in the URL (``?api_key=``): written there as is, it
    is in no variable and no header, so only the rule the endpoint URL follows can hide it."""
    config = load_mcp_config({"mcpServers": {
        "web": {"url": "https://mcp.example.com/mcp?api_key=lit-7f3a9c21d4&team=blue&token=${WEB_TOKEN}"},
    }})  # fmt: skip
    record = config.servers[0].record(config.secrets({"WEB_TOKEN": "from-env-5e6f7a8b"}))
    assert record["url"] == "https://mcp.example.com/mcp?api_key=***&team=blue&token=${WEB_TOKEN}"
    rebuilt = McpServerConfig.from_record(record)  # a resume without the config: the key comes from the environment
    assert rebuilt.expand(rebuilt.url, {"WEB_TOKEN": "t-1"}).endswith("&token=t-1")


def test_variables_expand_from_the_environment_and_an_unset_one_is_named() -> None:
    server = load_mcp_config({"mcpServers": {"s": {"command": "x", "env": {"T": "${TOK}", "D": "${DEF:-fallback}"}}}}).servers[0]
    assert server.resolved_env({"TOK": "v"}) == {"T": "v", "D": "fallback"}
    with pytest.raises(McpConfigError, match="MCP server 's' needs the environment variable TOK, which is not set"):
        server.resolved_env({})


def test_a_variable_nobody_set_is_a_config_error_before_any_server_starts(tmp_path: Path) -> None:
    """It was wrapped as a server that "did not start" (exit 1), advising to check the command."""
    started = tmp_path / "started"
    config = {"mcpServers": {
        "first": {"command": sys.executable, "args": ["-c", f"open({str(started)!r}, 'w')"]},
        "second": {"command": "echo", "env": {"K": "${NOBODY_SET_THIS}"}},
    }}  # fmt: skip
    with pytest.raises(McpConfigError, match="MCP server 'second' needs the environment variable NOBODY_SET_THIS") as info:
        mcp_tools(config, environ={})
    assert info.value.outcome == "usage" and not started.exists()


@pytest.mark.parametrize(
    "spec",
    [
        {"command": "${NOBODY_SET_THIS}"},
        {"command": "node", "args": ["${NOBODY_SET_THIS}/server.js"]},
        {"command": "node", "cwd": "${NOBODY_SET_THIS}"},
        {"url": "https://${NOBODY_SET_THIS}/mcp"},
    ],
    ids=["command", "args", "cwd", "url"],
)
def test_a_variable_nobody_set_anywhere_in_a_server_is_a_config_error(spec: dict[str, Any]) -> None:
    # Only env and headers were checked: one in the command failed the start instead, "did not
    # start (McpConfigError: ...)", exit 1, and a resume tried it three times.
    with pytest.raises(McpConfigError) as info:
        mcp_tools({"mcpServers": {"s": spec}}, environ={})
    assert str(info.value).startswith("MCP server 's' needs the environment variable NOBODY_SET_THIS"), str(info.value)
    assert info.value.outcome == "usage"


@pytest.mark.parametrize(
    ("config", "says"),
    [
        ({"servers2": {}}, '"mcpServers"'),
        ({"mcpServers": {"s": {"args": []}}}, "a stdio server needs a command"),
        ({"mcpServers": {"s": {"type": "http"}}}, "an HTTP server needs a url"),
        ({"mcpServers": {"s": {"type": "sse", "url": "http://h"}}}, "SSE transport is not supported"),
        ({"mcpServers": {"s": {"command": "x", "timeout": -1}}}, "positive number of seconds"),
        ({"mcpServers": {"s": {"command": "x", "tools": {"t": {"effect": "maybe"}}}}}, "effect must be 'pure'"),
        ({"mcpServers": {"s": {"command": "x", "comand": "y"}}}, "unknown keys comand"),
        ({"mcpServers": {"bad name!": {"command": "x"}}}, "a server name is"),
        ({"mcpServers": {"s": {"command": "x", "disabled": "true"}}}, "MCP server 's': disabled is true or false, not 'true'"),
    ],
)
def test_a_bad_config_says_what_is_wrong(config: dict[str, Any], says: str) -> None:
    with pytest.raises(McpConfigError, match=None) as e:
        load_mcp_config(config)
    assert says in str(e.value) and e.value.outcome == "usage"


def test_a_missing_or_broken_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(McpConfigError, match="no MCP config at"):
        load_mcp_config(tmp_path / "nope.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(McpConfigError, match="is not JSON"):
        load_mcp_config(tmp_path / "bad.json")


def test_annotations_map_to_effects_only_for_a_trusted_server_and_the_config_overrides_them() -> None:
    assert effect_from(Hints(read_only=True), None, trusted=True) == ("pure", "readOnlyHint")
    assert effect_from(Hints(idempotent=True, destructive=True), None, trusted=True) == ("idempotent", "idempotentHint")
    assert effect_from(Hints(destructive=True), None, trusted=True) == ("external", "destructiveHint")
    assert effect_from(None, None, trusted=True)[0] == "external"
    assert effect_from(Hints(read_only=False, idempotent=False), None, trusted=True)[0] == "external"
    # By default a server's hints are not believed: every tool is external, and says why.
    assert effect_from(Hints(read_only=True), None) == (
        "external", 'readOnlyHint not trusted (the server\'s config does not say "trusted": true)'
    )
    assert effect_from(Hints(idempotent=True), None)[0] == "external"
    assert effect_from(Hints(destructive=True), ToolOverride("idempotent")) == ("idempotent", "set in the config")
    assert effect_from(Hints(read_only=True), ToolOverride("external"), trusted=True) == ("external", "set in the config")
    servers = load_mcp_config({"mcpServers": {"t": {"command": "x", "trusted": True}, "u": {"command": "x"}}}).servers
    assert [(s.trusted, s.record()["trusted"]) for s in servers] == [(True, True), (False, False)]
    assert McpServerConfig.from_record(servers[0].record()).trusted is True
    with pytest.raises(McpConfigError, match="MCP server 'v': trusted is true or false"):
        load_mcp_config({"mcpServers": {"v": {"command": "x", "trusted": "yes"}}})


def test_names_are_namespaced_by_server_only_when_they_clash() -> None:
    names = api_names([("a", "search"), ("b", "search"), ("a", "read_file"), ("b", "get.page")], reserved=["read_file"])
    assert names == {("a", "search"): "a__search", ("b", "search"): "b__search", ("a", "read_file"): "a__read_file",
                     ("b", "get.page"): "get_page"}  # fmt: skip


def test_without_the_mcp_package_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mcp", None)  # import mcp now raises ImportError
    with pytest.raises(McpNotInstalledError) as e:
        mcp_tools({"mcpServers": {"s": {"command": "x"}}})
    assert "pip install 'nb-durable[mcp]'" in str(e.value) and isinstance(e.value, ImportError)
