"""``mcp_tools``: the tools of an MCP config, for a ``ToolRegistry``; each call a durable step.

``mcp_tools(config)`` starts the servers, lists their tools and adapts each (``adapter``);
``McpToolset.from_run(settings)`` rebuilds the tools a run recorded without starting
anything (``record``). Either way a call goes through ``McpConnections.call`` with the step's
idempotency key in ``_meta``. Transient failures (a server that did not start, died, or timed
out) are tried again per the retry policy with every failed attempt recorded on the step,
like a model call's, but only when that is safe: a call that may have reached the server is
retried only for pure and idempotent tools. Every other failure becomes an ``is_error``
result naming the server, so the model can act on it; only a changed tool (``ToolsChangedError``)
stops the run, and a stop of the run, which cancels a call in flight (``RunStopped``: the step
of an external tool is then in doubt). Values of the servers' env and headers are masked in
every result.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from ....core.context import current_step
from ....core.events import Effect
from ....errors import McpServerError, ToolsChangedError
from ...delegation.tool import DELEGATE
from ...models.retry import RetryPolicy
from ..definition import Tool, ToolContext, ToolResult
from .adapter import api_names, described, effect_from, result_text
from .config import McpConfig, McpServerConfig, load_mcp_config
from .connection import IDEMPOTENCY_META_KEY, McpConnections, require_mcp
from .record import RecordedTool, changes, mcp_source, recorded_tools, recorded_trust

__all__ = ["ACCEPT_FLAG", "DEFAULT_MCP_RETRY", "McpToolset", "mcp_example_config", "mcp_tools"]

DEFAULT_MCP_RETRY = RetryPolicy(max_attempts=3, base_delay=0.5, max_delay=5.0)
ACCEPT_FLAG = "accept_changes=True (--mcp-accept-changes)"
_BUILTIN_NAMES = ("list_dir", "read_file", "run_bash", "write_file")


class McpToolset:
    """The tools of an MCP config; iterate it into a ``ToolRegistry``, ``close()`` it after the run."""

    def __init__(
        self,
        connections: McpConnections,
        *,
        run_id: str = "",
        retry: RetryPolicy = DEFAULT_MCP_RETRY,
        accept_changes: bool = False,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.connections = connections
        self.run_id = run_id
        self.retry = retry
        self.accept_changes = accept_changes
        self.sleep = sleep
        self._tools: list[Tool] = []
        self._recorded: dict[str, list[RecordedTool]] = {}  # server -> tools to check on first use
        self._accepted: dict[str, str] = {}  # tool name -> the accepted change, until recorded
        # Tool name -> its effect now: an accepted change replaces the recorded one here, which a
        # registry built before a first call's check (a follow-up's) still holds in its tool.
        self._effects: dict[str, Effect] = {}
        # Children of one turn call their parent's tools from threads of their own: one checks.
        self._checking = threading.Lock()

    # -- building ----------------------------------------------------------------------------

    def _make(self, name: str, description: str, schema: dict[str, Any], server: McpServerConfig, remote: str,
              effect: Effect, why: str, approve: bool) -> Tool:  # fmt: skip
        config = self.connections.config
        source = mcp_source(
            server=server.name, server_record=server.record(self.connections.redactor()), remote=remote,
            effect=effect, why=why, approve=approve, config=config.path,
        )

        def call(tool_input: dict[str, Any], context: ToolContext) -> ToolResult:
            return self._call(name, server.name, remote, tool_input, context)

        def approval(tool_input: dict[str, Any]) -> str | None:
            return f"the MCP config asks for a person's approval of every {remote} call on server {server.name!r}"

        self._effects[name] = effect
        return Tool(name, description, schema, effect, call, needs_approval=approval if approve else None, source=source)

    def _add_listed(self, listed: Mapping[str, list[Any]], reserved: Iterable[str]) -> None:
        config = self.connections.config
        # ``delegate`` is the name of the run's own delegate tool: a server's tool of that name
        # would be taken for it (a child run started instead of the call), so it is renamed.
        names = api_names(((s, t.name) for s, tools in listed.items() for t in tools), [*reserved, DELEGATE])
        redactor = self.connections.redactor()
        for server_name, tools in listed.items():
            server = config.server(server_name)
            for t in tools:
                override = server.tools.get(t.name)
                effect, why = effect_from(t.annotations, override, server.trusted)
                description, schema = described(t, server_name, redactor)
                approve = bool(override and override.approve)
                self._tools.append(self._make(names[(server_name, t.name)], description, schema, server, t.name, effect, why, approve))

    def _rebuilt(self, t: RecordedTool, server: McpServerConfig, effect: Effect, why: str) -> Tool:
        schema = t.schema
        return self._make(t.name, str(schema.get("description", "")), dict(schema["input_schema"]), server, t.remote,
                          effect, why, t.approve)  # fmt: skip

    @classmethod
    def from_run(
        cls,
        settings: Mapping[str, Any],
        config: str | os.PathLike[str] | Mapping[str, Any] | McpConfig | None = None,
        *,
        run_id: str = "",
        accept_changes: bool = False,
        environ: Mapping[str, str] | None = None,
        retry: RetryPolicy = DEFAULT_MCP_RETRY,
    ) -> McpToolset:
        """The MCP tools a run recorded (its settings' JSON), rebuilt without starting a server.

        ``config`` gives the values of env and headers (by default the config file the run
        recorded, if it is still there; otherwise each comes from the environment variable
        of its name). Servers start on the first live call, which checks the tools first.
        """
        recorded = recorded_tools(settings)
        loaded = _config_for(recorded, config)
        toolset = cls(McpConnections(loaded, environ=environ), run_id=run_id, retry=retry, accept_changes=accept_changes)
        for t in recorded:
            toolset._tools.append(toolset._rebuilt(t, loaded.server(t.server), t.effect, t.why))
            toolset._recorded.setdefault(t.server, []).append(t)
        return toolset

    # -- the collection ----------------------------------------------------------------------

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools)

    def __len__(self) -> int:
        return len(self._tools)

    @property
    def names(self) -> list[str]:
        """The tools' names as the model sees them."""
        return [t.name for t in self._tools]

    def servers(self) -> list[dict[str, Any]]:
        """The servers as the run records them (names of env variables and headers only)."""
        redactor = self.connections.redactor()
        return [s.record(redactor) for s in self.connections.config.servers]

    def __enter__(self) -> McpToolset:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop every server this toolset started."""
        self.connections.close()

    # -- checking ----------------------------------------------------------------------------

    def verify(self, servers: Iterable[str] | None = None) -> None:
        """Start the servers the run used and check its tools against them (ToolsChangedError)."""
        for name in list(servers if servers is not None else self._recorded):
            self._verify(name)

    def _verify(self, server_name: str) -> None:
        with self._checking:
            self._verify_held(server_name)

    def _verify_held(self, server_name: str) -> None:
        recorded = self._recorded.get(server_name)
        if not recorded:
            return
        server = self.connections.config.server(server_name)
        trusted = recorded_trust(recorded)
        redactor = self.connections.redactor()
        offered = {
            t.name: (described(t, server_name, redactor)[1], *effect_from(t.annotations, server.tools.get(t.name), trusted))
            for t in self.connections.list_tools(server_name)
        }
        found = changes(recorded, offered)
        if found and not self.accept_changes:
            raise ToolsChangedError(run_id=self.run_id, changes=list(found.values()), accept_flag=ACCEPT_FLAG)
        self._accepted.update(found)
        for t in recorded:
            now = offered.get(t.remote)
            if t.name in found and now is not None and now[1] != t.effect:
                # Accepted: called as what it is now (a tool the config now calls external is
                # never again retried as the pure one it was recorded as).
                adopted = self._rebuilt(t, server, now[1], now[2])
                self._tools = [adopted if old.name == t.name else old for old in self._tools]
        del self._recorded[server_name]

    # -- calling -----------------------------------------------------------------------------

    def _call(self, name: str, server: str, remote: str, tool_input: dict[str, Any], context: ToolContext) -> ToolResult:
        step = current_step()
        self.run_id = self.run_id or context.run_id
        redactor = self.connections.redactor()
        attempt = 1
        while True:
            try:
                self._verify(server)  # a recorded run's first call to a server checks its tools
                accepted = self._accepted.pop(name, None)
                if accepted is not None and step is not None:
                    step.log.record_decision(step.step_id, "accepted tool change", by="accept_changes", note=accepted)
                result = self.connections.call(server, remote, tool_input, key=context.key, stop=context.stop)
                text, is_error = result_text(result)
                return ToolResult(redactor.redact(text), is_error)
            except McpServerError as e:
                message = redactor.redact(str(e))
                effect = self._effects[name]
                retry = e.transient and (not e.ran or effect != "external")
                last = not retry or attempt >= self.retry.max_attempts
                wait = None if last else self.retry.delay(attempt, e)
                if step is not None:
                    step.record_attempt_failed(attempt, type(e).__name__, message=message, delay=wait)
                if wait is None:
                    return ToolResult(_failure(name, message, e, effect, context.key, attempt), True)
                self.sleep(wait)
                attempt += 1


def _failure(name: str, message: str, error: McpServerError, effect: Effect, key: str, attempts: int) -> str:
    tried = f" (tried {attempts} times)" if attempts > 1 else ""
    if error.ran and effect == "external":
        return (
            f"{message}{tried}. Whether this {name} call took effect is unknown: it was not retried, because "
            f"it is not declared idempotent. It carried the idempotency key {key!r} in _meta "
            f"({IDEMPOTENCY_META_KEY}), so a server that deduplicates will not repeat it. Check before calling it again."
        )
    if not error.transient:
        return f"{message}. The {name} call did not run: check its input against the tool's schema, or use another tool."
    return f"{message}{tried}. The {name} call did not complete; try again later or use another tool."


def _config_for(recorded: list[RecordedTool], config: str | os.PathLike[str] | Mapping[str, Any] | McpConfig | None) -> McpConfig:
    """The config a resumed run's servers start from: the given one, else the recorded file,
    else the recorded servers (values from the environment); recorded servers fill any gap."""
    loaded: McpConfig | None = None
    if config is not None:
        loaded = load_mcp_config(config)
    else:
        paths = {t.source.get("config") for t in recorded} - {None}
        path = next(iter(paths)) if len(paths) == 1 else None
        if path and Path(str(path)).is_file():
            loaded = load_mcp_config(str(path))
    servers = list(loaded.servers) if loaded is not None else []
    have = {s.name for s in servers}
    for t in recorded:
        if t.server not in have:
            servers.append(McpServerConfig.from_record(t.source["server_config"]))
            have.add(t.server)
    return McpConfig(tuple(servers), loaded.path if loaded is not None else None)


def mcp_tools(
    config: str | os.PathLike[str] | Mapping[str, Any] | McpConfig,
    *,
    reserved: Iterable[str] = _BUILTIN_NAMES,
    environ: Mapping[str, str] | None = None,
    retry: RetryPolicy = DEFAULT_MCP_RETRY,
) -> McpToolset:
    """Start the servers of an ``mcpServers`` config (a JSON file or a dict) and adapt their tools.

    ``reserved`` are names already taken (the built-ins by default; ``delegate`` always): a
    clash becomes ``server__tool``. Use the result in a registry and close it after the run::

        with mcp_tools("mcp.json") as mcp:
            run_agent(task, client=..., tools=ToolRegistry([*builtin_tools(), *mcp]))
    """
    require_mcp()
    loaded = load_mcp_config(config)
    toolset = McpToolset(McpConnections(loaded, environ=environ), retry=retry)
    try:
        toolset.connections.check_variables()
        listed = {s.name: toolset.connections.list_tools(s.name) for s in loaded.servers}
        toolset._add_listed(listed, reserved)
    except BaseException:
        toolset.close()
        raise
    return toolset


def mcp_example_config(folder: str | os.PathLike[str], *, name: str = "notes") -> dict[str, Any]:
    """An ``mcpServers`` config for the small notes server bundled for the tutorial (stdio),
    marked trusted: it is nb_durable's own, so its tool annotations decide effects."""
    server = Path(__file__).with_name("example_server.py")
    args = [str(server), str(Path(folder).resolve())]
    return {"mcpServers": {name: {"command": sys.executable, "args": args, "trusted": True}}}
