"""Tools from MCP servers, each call a durable step: external, unless the server is trusted.

``config`` reads the ``mcpServers`` JSON people already have; ``connection`` holds the live
servers (an event loop in a thread, started on first use, stopped with the run; a stdio
server under ``_keeper``, which cuts long strings out of its stdout with ``_capped``);
``adapter`` maps a tool's annotations (a trusted server's) to our effect kinds and its
results to text; ``record`` is what a run records of its MCP tools and how a resume checks
them; ``toolset`` ties them together in ``mcp_tools(config)`` and
``McpToolset.from_run(settings)``. ``mcp`` (the official SDK, the
``nb-durable[mcp]`` extra) is imported only when a server is actually needed, so a finished
run replays with no server, and without the SDK installed.

We never use the Messages API's server-side MCP connector: its tool calls would happen inside
the model step, unrecorded, and be repeated whenever that (at-least-once) step is.
"""

from __future__ import annotations

from .adapter import effect_from
from .config import McpConfig, McpServerConfig, ToolOverride, load_mcp_config
from .connection import IDEMPOTENCY_META_KEY, McpConnections
from .run_tools import RunTools, tools_for_run
from .toolset import ACCEPT_FLAG, McpToolset, mcp_example_config, mcp_tools

__all__ = [
    "ACCEPT_FLAG",
    "IDEMPOTENCY_META_KEY",
    "McpConfig",
    "McpConnections",
    "McpServerConfig",
    "McpToolset",
    "RunTools",
    "ToolOverride",
    "effect_from",
    "load_mcp_config",
    "mcp_example_config",
    "mcp_tools",
    "tools_for_run",
]
