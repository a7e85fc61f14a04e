"""Tools the agent can call: what a tool is, the registry that runs them, and the built-ins.

``definition`` holds ``Tool``, ``ToolResult``, ``ToolContext`` and ``@tool``; ``registry`` runs a
call (never raising for a tool's problem, always redacting and capping); ``schema`` derives
JSON schemas from type hints and checks input against them; ``builtin`` gives read_file,
write_file, list_dir and run_bash, confined to the workspace; ``mcp`` adapts the tools of MCP
servers (imported on its own: it is not loaded with this package).
"""

from __future__ import annotations

from .builtin import builtin_tools
from .definition import ApprovalRule, CheckGuard, Tool, ToolContext, ToolFn, ToolResult, tool
from .registry import ToolRegistry
from .schema import schema_errors

__all__ = [
    "ApprovalRule",
    "CheckGuard",
    "Tool",
    "ToolContext",
    "ToolFn",
    "ToolRegistry",
    "ToolResult",
    "builtin_tools",
    "schema_errors",
    "tool",
]
