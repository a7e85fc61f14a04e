"""The ``delegate`` tool, and what a child run gets from its parent.

The model is offered ``delegate(task, model?, tools?, max_tokens?)`` only when the run's
``delegate`` setting is on, so the tool list of a run without it never changes. The tool's
call is answered by the session's ``Delegation`` (``spawn``), never by the registry: what it
does needs the run itself (its store, its model, its budget). A child gets at most what the
parent allows: a subset of the parent's tools, no higher ``max_tokens``, what remains of the
parent's budgets, and the delegate tool itself only while the depth limit allows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..settings import AgentSettings
from ..tools import Tool, ToolContext, ToolRegistry, ToolResult

__all__ = ["DELEGATE", "child_registry", "child_settings", "delegate_tool", "with_delegate"]

DELEGATE = "delegate"
"""The tool's name, as the model calls it."""

_DESCRIPTION = (
    "Hand one well-defined piece of work to a sub-agent: a child run with its own log and tools, "
    "working in the same workspace. It returns the child's final report (or, as an error, why it "
    "stopped short). Several delegate calls in one turn run at the same time. Give the child a "
    "complete, self-contained task: it does not see this conversation."
)

_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "task": {"type": "string", "description": "what the child should do, self-contained"},
        "model": {"type": "string", "description": "the Claude model of the child (default: this run's)"},
        "tools": {
            "type": "array",
            "items": {"type": "string"},
            "description": "names of the tools the child may use (default: all of this run's)",
        },
        "max_tokens": {"type": "integer", "minimum": 1, "description": "max_tokens of each of the child's model calls"},
    },
    "required": ["task"],
    "additionalProperties": False,
}


def _unreachable(tool_input: dict[str, Any], context: ToolContext) -> ToolResult:
    return ToolResult(
        f"the {DELEGATE} tool runs only inside an agent run whose delegate setting is on (run {context.run_id!r})",
        is_error=True,
    )


def delegate_tool() -> Tool:
    """The delegate tool: idempotent, as running its step again resumes the same child."""
    return Tool(DELEGATE, _DESCRIPTION, _SCHEMA, "idempotent", _unreachable)


def with_delegate(registry: ToolRegistry, settings: AgentSettings) -> ToolRegistry:
    """``registry`` with the delegate tool added when ``settings`` turn delegation on."""
    if not settings.delegate:
        return registry
    known = registry.get(DELEGATE)
    if known is not None:
        if known.fn is _unreachable:
            return registry
        # The session answers every call of that name by starting a child run: the
        # registry's own tool would never run, and the model would be told it did.
        raise ValueError(
            f"this run delegates (delegate=True, --delegate), and one of its own tools is already called {DELEGATE!r}: "
            "the model's calls to it would start child runs instead. Rename that tool, or run without delegation."
        )
    out = _copy(registry, list(registry))
    out.add(delegate_tool())
    return out


def child_registry(registry: ToolRegistry, names: list[str] | None) -> ToolRegistry:
    """The parent's tools a child may use: those ``names`` (all if None), never the delegate tool."""
    allowed = set(names) if names is not None else None
    return _copy(registry, [t for t in registry if t.name != DELEGATE and (allowed is None or t.name in allowed)])


def _copy(registry: ToolRegistry, tools: list[Tool]) -> ToolRegistry:
    return ToolRegistry(tools, redactor=registry.redactor, output_limit=registry.output_limit, pass_env=registry.pass_env)


def child_settings(parent: AgentSettings, request: Mapping[str, Any], budget: Mapping[str, Any]) -> AgentSettings:
    """The settings of a child asked for with ``request`` (the tool's input), within ``parent``'s.

    ``budget`` holds what remains of the parent's budgets (``max_usd``, ``max_run_tokens``).
    """
    depth = parent.delegate_depth - 1
    max_tokens = parent.max_tokens
    if isinstance(request.get("max_tokens"), int) and request["max_tokens"] >= 1:
        max_tokens = min(max_tokens, int(request["max_tokens"]))
    model = request.get("model")
    return parent.but(
        task=str(request.get("task") or ""),
        model=str(model) if isinstance(model, str) and model.strip() else parent.model,
        max_tokens=max_tokens,
        delegate=depth >= 1,
        delegate_depth=max(depth, 1),
        max_usd=budget.get("max_usd", parent.max_usd),
        max_run_tokens=budget.get("max_run_tokens", parent.max_run_tokens),
        queued=False,
        batch=None,
        priority=0,
        tags=(),
    )


def asked_tools(request: Mapping[str, Any]) -> list[str] | None:
    """The tool names a delegate call asked for, or None for all of the parent's."""
    names = request.get("tools")
    if not isinstance(names, list):
        return None
    return [str(n) for n in names]
