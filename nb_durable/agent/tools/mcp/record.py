"""What a run records of its MCP tools, and how a resume checks them against the servers.

Each MCP tool's ``Tool.source`` is recorded in the run's settings (``sources``): its server
(the server's record: names of env variables and headers, never values), its name there,
its effect and why (the server's record says whether its annotations were trusted, so a resume
checks the tools as the run decided their effects). Its schema is recorded with every other tool's, in ``tools``. From those
two a resume rebuilds the tools with no server running, so a finished run replays with every
server down; the first live call to a server (or ``McpToolset.verify``) lists the server's
tools and compares them with the record: a tool that is gone, or whose input schema or
effect changed, is a ``ToolsChangedError`` unless the change is accepted, and then the
acceptance is recorded as a decision on the first step that uses the tool, and the tool is
called with the effect it has now (the model still sees the schema it chose its calls by).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ....core.events import Effect

__all__ = ["MCP_SOURCE", "RecordedTool", "changes", "mcp_source", "recorded_tools", "recorded_trust"]

MCP_SOURCE = "mcp"


@dataclass(frozen=True)
class RecordedTool:
    """One MCP tool as a run recorded it."""

    name: str
    server: str
    remote: str
    effect: Effect
    why: str
    approve: bool
    schema: Mapping[str, Any]
    source: Mapping[str, Any]


def mcp_source(
    *, server: str, server_record: Mapping[str, Any], remote: str, effect: Effect, why: str, approve: bool, config: str | None
) -> dict[str, Any]:
    """The ``Tool.source`` of an MCP tool (recorded with the run)."""
    return {
        "kind": MCP_SOURCE,
        "server": server,
        "tool": remote,
        "effect": effect,
        "why": why,
        "approve": approve,
        "label": f"MCP {server} · {effect}",
        "config": config,
        "server_config": dict(server_record),
    }


def recorded_tools(settings: Mapping[str, Any]) -> list[RecordedTool]:
    """The MCP tools a run's settings (their JSON) recorded, with their schemas."""
    schemas = {t.get("name"): t for t in settings.get("tools") or () if isinstance(t, Mapping)}
    out = []
    for name, source in sorted((settings.get("sources") or {}).items()):
        if not isinstance(source, Mapping) or source.get("kind") != MCP_SOURCE or name not in schemas:
            continue
        out.append(
            RecordedTool(
                name, str(source["server"]), str(source["tool"]), source.get("effect", "external"),
                str(source.get("why", "")), bool(source.get("approve")), schemas[name], source,
            )
        )
    return out


def recorded_trust(recorded: list[RecordedTool]) -> bool:
    """Whether the run trusted the annotations of these tools' server, as it recorded: a run
    recorded before ``trusted`` was a setting took its effects from the annotations."""
    return any(bool(t.source.get("server_config", {}).get("trusted", True)) for t in recorded)


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def changes(recorded: list[RecordedTool], offered: Mapping[str, tuple[Mapping[str, Any], Effect, str]]) -> dict[str, str]:
    """Tool name -> what changed, for the recorded tools of one server against what it offers now
    (remote name -> (input schema, effect, why))."""
    out: dict[str, str] = {}
    for t in recorded:
        now = offered.get(t.remote)
        where = f"tool {t.remote!r} of MCP server {t.server!r}"
        if now is None:
            known = ", ".join(sorted(offered)) or "none"
            out[t.name] = f"{where} is gone (it offers: {known})"
            continue
        schema, effect, why = now
        if _canonical(schema) != _canonical(t.schema.get("input_schema")):
            out[t.name] = f"{where} has another input schema now ({_diff(t.schema.get('input_schema'), schema)})"
        elif effect != t.effect:
            # Either side may be the config's override or the server's annotations: say which.
            was = f" ({t.why})" if t.why else ""
            out[t.name] = f"{where} is {effect} now ({why}), recorded as {t.effect}{was}; accepted, it is called as {effect}"
    return out


def _diff(before: Any, after: Any) -> str:
    """A short account of how two object schemas differ."""
    b = (before or {}).get("properties") or {} if isinstance(before, Mapping) else {}
    a = (after or {}).get("properties") or {} if isinstance(after, Mapping) else {}
    said = []
    if set(a) - set(b):
        said.append("added " + ", ".join(sorted(set(a) - set(b))))
    if set(b) - set(a):
        said.append("removed " + ", ".join(sorted(set(b) - set(a))))
    changed = sorted(k for k in set(a) & set(b) if _canonical(a[k]) != _canonical(b[k]))
    if changed:
        said.append("changed " + ", ".join(changed))
    if not said and isinstance(before, Mapping) and isinstance(after, Mapping):
        said.append("required: " + ", ".join(after.get("required") or []) if before.get("required") != after.get("required") else "other keywords")
    return "; ".join(said) or "other keywords"
