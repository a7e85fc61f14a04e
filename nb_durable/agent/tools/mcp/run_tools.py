"""The tools of one run as a front end (a cell, the CLI) builds them: built-ins, MCP, extras.

One rule for starting and resuming: a run that already recorded MCP tools gets them back
from its record (``McpToolset.from_run``), so re-running a finished cell or command replays
with every server down; only a run that will go on live (it is not completed, or changes are
accepted) starts its servers at once and checks its tools against them. A new run starts the config's servers
and lists their tools.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ....core.runs import read_summary
from ....core.stores import StoreSpec
from ....errors import McpConfigError, McpNotInstalledError, McpServerError, RunNotFoundError
from ..builtin import builtin_tools
from ..definition import Tool
from ..registry import ToolRegistry
from .config import McpConfig
from .connection import require_mcp
from .record import recorded_tools
from .toolset import McpToolset, mcp_tools

__all__ = ["RunTools", "recorded_settings", "tools_for_run"]


@dataclass
class RunTools:
    """A run's registry (None: the default built-ins) and the MCP servers to stop after it."""

    registry: ToolRegistry | None
    mcp: McpToolset | None = None
    notes: list[str] = field(default_factory=list)

    def close(self) -> None:
        """Stop the run's MCP servers."""
        if self.mcp is not None:
            self.mcp.close()

    def __enter__(self) -> RunTools:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def recorded_settings(run_id: str, store: StoreSpec) -> tuple[dict[str, Any], str] | None:
    """(settings, status) of a recorded run, or None if there is no such run."""
    try:
        summary = read_summary(run_id, store)
    except RunNotFoundError:
        return None
    return summary.settings, summary.status


def tools_for_run(
    run_id: str,
    store: StoreSpec,
    *,
    mcp: str | os.PathLike[str] | Mapping[str, Any] | McpConfig | None = None,
    accept_changes: bool = False,
    approve_bash: str | None = None,
    extra: Iterable[Tool] = (),
    recorded: tuple[dict[str, Any], str] | None = None,
) -> RunTools:
    """The tools for starting or resuming ``run_id``: the built-ins, its MCP tools, and ``extra``
    (``recorded``: its settings and status when the caller has just read them, as a worker has)."""
    extra = list(extra)
    if recorded is None:
        recorded = recorded_settings(run_id, store)
    toolset: McpToolset | None = None
    if recorded is not None and recorded_tools(recorded[0]):
        settings, status = recorded
        toolset = McpToolset.from_run(settings, mcp, run_id=run_id, accept_changes=accept_changes)
        if status != "completed":
            try:
                toolset.connections.check_variables()
                toolset.verify()
            except BaseException:
                toolset.close()
                raise
        elif accept_changes:
            # Accepting changes means a follow-up, most likely: checked now, the registry holds each
            # tool with the effect it has now, as its steps record it. A replay needs no server,
            # so one that cannot be checked now is checked on its first live call instead.
            with contextlib.suppress(McpServerError, McpNotInstalledError, McpConfigError):
                require_mcp()
                toolset.verify()
    elif mcp is not None:
        toolset = mcp_tools(mcp, reserved=[t.name for t in [*builtin_tools(), *extra]])
    if toolset is None and not extra:
        return RunTools(None)
    approve = approve_bash if recorded is None else recorded[0].get("approve_bash")
    registry = ToolRegistry([*builtin_tools(approve_bash=approve), *(toolset or ()), *extra])
    return RunTools(registry, toolset)
