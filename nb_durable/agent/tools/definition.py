"""What a tool is: a JSON-schema'd, effect-declared function, and ``@tool``, which makes one.

A ``Tool`` carries what the model sees (name, description, input schema) and what the
durable log needs to know: its declared effect, ``pure``, ``idempotent`` or ``external``.
The effect defaults to ``external``: after a crash, a step of unknown outcome is never re-run
silently unless its author declared that running it twice is harmless. ``@tool`` turns a
type-hinted function into a tool (parameters -> JSON schema, docstring -> description); a
parameter typed ``ToolContext`` is injected, never shown to the model.
"""

from __future__ import annotations

import copy
import inspect
import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, get_args, get_origin, get_type_hints, overload

from ...core.events import EFFECTS, Effect
from ..run.stopping import StopSignal
from ..secrets.environment import environment
from ..secrets.redaction import Redactor
from .schema import allows_none, parse_docstring, schema_of

__all__ = ["ApprovalRule", "CheckGuard", "Tool", "ToolContext", "ToolFn", "ToolResult", "tool"]

_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")  # what the Messages API accepts as a tool name


@dataclass(frozen=True)
class ToolResult:
    """What a tool call returned; its JSON form ``{"content", "is_error"}`` is the step result."""

    content: str
    is_error: bool = False

    def to_json(self) -> dict[str, Any]:
        """The result as the step records it."""
        return {"content": self.content, "is_error": self.is_error}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ToolResult:
        """A result back from its recorded JSON."""
        content = data.get("content") if isinstance(data, Mapping) else None
        if not isinstance(content, str):
            raise ValueError(f"a recorded tool result is {{'content': str, 'is_error': bool}}, not {data!r:.200}")
        return cls(content, bool(data.get("is_error", False)))


@dataclass(frozen=True)
class ToolContext:
    """What a running tool may know: its workspace, its step, and its idempotency key.

    ``key`` (``<run_id>:<step_id>``) is the same on every replay: hand it to a service so it
    can deduplicate. ``env`` is the environment for subprocesses. ``redactor`` is filled in by
    the registry; a tool that cuts its own output short uses it so the cut never splits a secret.
    ``stop`` is set when the run is stopped from another thread: a long tool checks it
    (``stop.check()``) and lets the ``RunStopped`` it raises through.
    """

    workspace: Path
    run_id: str
    step_id: str
    key: str
    env: Mapping[str, str] = field(default_factory=environment, repr=False)
    redactor: Redactor | None = field(default=None, repr=False, compare=False)
    stop: StopSignal | None = field(default=None, repr=False, compare=False)

    @classmethod
    def for_step(
        cls, workspace: str | os.PathLike[str], run_id: str, step_id: str, *, env: Mapping[str, str] | None = None
    ) -> ToolContext:
        """A context with the resolved workspace and the standard key ``<run_id>:<step_id>``."""
        return cls(
            Path(os.path.realpath(workspace)), run_id, step_id, f"{run_id}:{step_id}", environment() if env is None else dict(env)
        )


ToolFn = Callable[[dict[str, Any], ToolContext], str | ToolResult]
ApprovalRule = Callable[[dict[str, Any]], str | None]
"""Given a call's input: why a person must approve it first, or None."""
CheckGuard = Callable[[dict[str, Any], ToolContext], ToolResult | None]
"""Given an in-doubt call: its result if the effect happened, None if it did not."""


@dataclass(frozen=True)
class Tool:
    """A tool the model may call: its schema, its declared effect, and the function that runs it.

    ``needs_approval(input)`` returns a reason when a person must approve that input first.
    ``check(input, context)`` is a check-then-act guard for a call whose outcome is in doubt
    after a crash: the result if the effect happened, None if it did not. ``source`` says
    where a tool that is not plain Python comes from (an MCP server, the kernel): JSON the run
    records so a resume can rebuild the tool, never a secret; its ``label`` (such as
    ``"MCP ledger · external"``) is shown beside the tool's name in the timeline. ``strict``:
    the API is asked to hold the model's input to the schema (the package's own tools).
    """

    name: str
    description: str
    input_schema: dict[str, Any]
    effect: Effect
    fn: ToolFn
    needs_approval: ApprovalRule | None = None
    check: CheckGuard | None = None
    source: Mapping[str, Any] | None = field(default=None, compare=False)
    strict: bool = field(default=False, compare=False)
    """The package's own tools: sent with ``strict: true`` (``bad_input``)."""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise ValueError(f"a tool name is 1-64 letters, digits, '_' or '-' (the API's rule), not {self.name!r}")
        if self.effect not in EFFECTS:
            raise ValueError(f"tool {self.name!r}: effect must be 'pure', 'idempotent' or 'external', not {self.effect!r}")
        if not isinstance(self.input_schema, dict) or self.input_schema.get("type") != "object":
            raise ValueError(f"tool {self.name!r}: input_schema must be a JSON schema of type 'object'")

    def schema(self) -> dict[str, Any]:
        """The tool as the Messages API takes it: name, description, input_schema."""
        return {"name": self.name, "description": self.description, "input_schema": copy.deepcopy(self.input_schema)}


def _is_context(name: str, hint: Any) -> bool:
    """Whether a parameter asks for the ToolContext (``ToolContext``, optional or not, or ``context``)."""
    if get_origin(hint) is Annotated:
        hint = get_args(hint)[0]
    options = [a for a in get_args(hint) if a is not type(None)] if allows_none(hint) else [hint]
    return options == [ToolContext] or (name == "context" and hint in (inspect.Parameter.empty, Any))


@overload
def tool(
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    effect: Effect = "external",
    description: str | None = None,
    needs_approval: ApprovalRule | None = None,
    check: CheckGuard | None = None,
) -> Tool: ...
@overload
def tool(
    fn: None = None,
    *,
    name: str | None = None,
    effect: Effect = "external",
    description: str | None = None,
    needs_approval: ApprovalRule | None = None,
    check: CheckGuard | None = None,
) -> Callable[[Callable[..., Any]], Tool]: ...
def tool(
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    effect: Effect = "external",
    description: str | None = None,
    needs_approval: ApprovalRule | None = None,
    check: CheckGuard | None = None,
) -> Any:
    """Make a ``Tool`` of a type-hinted function (``@tool`` or ``@tool(effect="pure", ...)``).

    Parameters become the input schema (defaults and Optional: not required; Literal: enum;
    Annotated[T, "text"] or a docstring ``Args:`` entry: the field's description); the
    docstring's first paragraph is the description. A parameter ``context: ToolContext`` is
    injected, not shown to the model. The default effect is ``external``: after a crash a
    call of unknown outcome is never re-run silently; declare ``pure`` or ``idempotent`` when
    running it twice is harmless.
    """

    def make(func: Callable[..., Any]) -> Tool:
        tool_name = name or func.__name__
        where = f"tool {tool_name!r}"
        try:
            hints = get_type_hints(func, include_extras=True)
        except Exception as e:
            raise TypeError(f"{where}: cannot read the type hints of {func.__qualname__}: {e}") from e
        summary, param_docs = parse_docstring(inspect.getdoc(func) or "")
        properties: dict[str, Any] = {}
        required: list[str] = []
        context_name: str | None = None
        for param in inspect.signature(func).parameters.values():
            hint = hints.get(param.name, inspect.Parameter.empty)
            if _is_context(param.name, hint):
                context_name = param.name
                continue
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
                raise TypeError(f"{where}: parameter {param.name!r} must be an ordinary named parameter (no *args, **kwargs or /)")
            if hint is inspect.Parameter.empty:
                raise TypeError(f"{where}: parameter {param.name!r} has no type hint; add one (str, int, ...) so the model knows what to send")
            prop = schema_of(hint, f"{where}, parameter {param.name!r}")
            if param_docs.get(param.name) and "description" not in prop:
                prop["description"] = param_docs[param.name]
            optional = allows_none(hint)
            if param.default is not inspect.Parameter.empty:
                try:
                    json.dumps(param.default)
                    if param.default is not None:
                        prop["default"] = param.default
                except (TypeError, ValueError):
                    pass
            elif not optional:
                required.append(param.name)
            properties[param.name] = prop
        schema: dict[str, Any] = {"type": "object", "properties": properties}
        if required:
            schema["required"] = required
        schema["additionalProperties"] = False
        accepted = frozenset(properties)

        def call(tool_input: dict[str, Any], context: ToolContext) -> Any:
            kwargs = {k: v for k, v in tool_input.items() if k in accepted}
            if context_name is not None:
                kwargs[context_name] = context
            return func(**kwargs)

        call.__wrapped__ = func  # type: ignore[attr-defined]
        return Tool(tool_name, description if description is not None else summary, schema, effect, call, needs_approval, check)

    return make if fn is None else make(fn)
