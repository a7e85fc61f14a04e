"""Tools the agent can call: a registry of JSON-schema'd, effect-declared tools, and the built-ins.

The agent loop runs every tool_use block through ``ToolRegistry.run`` inside a step, with the
tool's declared effect (``pure``, ``idempotent`` or ``external``), and records the returned
``ToolResult`` as JSON. Invariants:

* ``run`` never raises for a tool's problem. An unknown name, input that fails the schema,
  or an exception inside the tool becomes an ``is_error`` result that tells the model what
  went wrong and what to do; only KeyboardInterrupt (a person) gets through.
* Every result's content (error messages too) is redacted (secrets of ``os.environ`` and
  of the context's ``env``) and capped before it is returned, so no secret reaches the model
  or the log, and no step result grows without bound.
* A tool's effect defaults to ``external``: after a crash, a step of unknown outcome is never
  re-run silently unless its author declared that running it twice is harmless.

``@tool`` turns a type-hinted function into a tool (parameters -> JSON schema, docstring ->
description); ``builtin_tools`` gives read_file, write_file, list_dir and run_bash, confined
to the workspace (see ``sandbox``).
"""

from __future__ import annotations

import copy
import inspect
import json
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any, get_args, get_origin, get_type_hints, overload

from ..core.events import Effect
from . import sandbox
from .schema import allows_none, parse_docstring, schema_errors, schema_of
from .secrets import Redactor, is_secret_name

__all__ = [
    "ApprovalRule",
    "CheckGuard",
    "Tool",
    "ToolContext",
    "ToolRegistry",
    "ToolFn",
    "ToolResult",
    "builtin_tools",
    "schema_errors",
    "tool",
]

_EFFECTS = ("pure", "idempotent", "external")
_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")  # what the Messages API accepts as a tool name
NO_OUTPUT = "(no output)"  # the API refuses an empty is_error result; an empty success reads badly


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
    """

    workspace: Path
    run_id: str
    step_id: str
    key: str
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ), repr=False)
    redactor: Redactor | None = field(default=None, repr=False, compare=False)

    @classmethod
    def for_step(
        cls, workspace: str | os.PathLike[str], run_id: str, step_id: str, *, env: Mapping[str, str] | None = None
    ) -> ToolContext:
        """A context with the resolved workspace and the standard key ``<run_id>:<step_id>``."""
        return cls(
            Path(os.path.realpath(workspace)), run_id, step_id, f"{run_id}:{step_id}", dict(os.environ if env is None else env)
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
    after a crash: the result if the effect happened, None if it did not.
    """

    name: str
    description: str
    input_schema: dict[str, Any]
    effect: Effect
    fn: ToolFn
    needs_approval: ApprovalRule | None = None
    check: CheckGuard | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise ValueError(f"a tool name is 1-64 letters, digits, '_' or '-' (the API's rule), not {self.name!r}")
        if self.effect not in _EFFECTS:
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


# --- the registry ----------------------------------------------------------------------------


class ToolRegistry:
    """The tools offered to the model; runs a call and always returns a ``ToolResult``.

    ``redactor`` masks secrets in every result; by default it is built from ``os.environ`` at
    call time, and the secrets of each call's ``context.env`` are always added. Every result
    is capped at ``output_limit`` characters.
    """

    def __init__(self, tools: Iterable[Tool] = (), *, redactor: Redactor | None = None, output_limit: int = 100_000) -> None:
        self._tools: dict[str, Tool] = {}
        self.redactor = redactor
        self.output_limit = output_limit
        self._cached: tuple[frozenset[tuple[str, str]], Redactor] | None = None
        for t in tools:
            self.add(t)

    def add(self, tool: Tool) -> Tool:
        """Register ``tool``; a second tool of the same name is an error."""
        if not isinstance(tool, Tool):
            raise TypeError(f"expected a Tool (make one with @tool), not {type(tool).__name__}")
        if tool.name in self._tools:
            raise ValueError(f"a tool named {tool.name!r} is already registered; give the new one another name")
        self._tools[tool.name] = tool
        return tool

    @overload
    def tool(
        self,
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
        self,
        fn: None = None,
        *,
        name: str | None = None,
        effect: Effect = "external",
        description: str | None = None,
        needs_approval: ApprovalRule | None = None,
        check: CheckGuard | None = None,
    ) -> Callable[[Callable[..., Any]], Tool]: ...
    def tool(
        self,
        fn: Callable[..., Any] | None = None,
        *,
        name: str | None = None,
        effect: Effect = "external",
        description: str | None = None,
        needs_approval: ApprovalRule | None = None,
        check: CheckGuard | None = None,
    ) -> Any:
        """Like ``@tool``, and register the tool here."""
        make = tool(name=name, effect=effect, description=description, needs_approval=needs_approval, check=check)
        return self.add(make(fn)) if fn is not None else (lambda f: self.add(make(f)))

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(sorted(self._tools.values(), key=lambda t: t.name))

    def __len__(self) -> int:
        return len(self._tools)

    def get(self, name: str) -> Tool | None:
        """The tool of that name, or None."""
        return self._tools.get(name)

    def schemas(self) -> list[dict[str, Any]]:
        """Every tool's API schema, sorted by name (the request, and its hash, stay stable)."""
        return [t.schema() for t in self]

    def effect_of(self, name: str) -> Effect:
        """The declared effect; an unknown tool is ``pure`` (its error result is harmless to re-run)."""
        t = self._tools.get(name)
        return t.effect if t is not None else "pure"

    def needs_approval(self, name: str, tool_input: Any) -> str | None:
        """Why a person must approve this call first, or None; a failing rule asks, to be safe."""
        t = self._tools.get(name)
        if t is None or t.needs_approval is None or not isinstance(tool_input, dict):
            return None
        try:
            return t.needs_approval(tool_input) or None
        except Exception as e:
            return f"the approval rule of {name} failed ({type(e).__name__}: {e}); approve only if the input looks right"

    def redactor_for(self, env: Mapping[str, str] | None = None) -> Redactor:
        """The redactor for a call whose subprocesses see ``env``."""
        sources = ((os.environ if self.redactor is None else {}), env or {})
        pairs = frozenset(
            (k, v) for source in sources for k, v in source.items() if isinstance(v, str) and len(v) >= 8 and is_secret_name(k)
        )
        if self._cached is None or self._cached[0] != pairs:
            extra = Redactor(pairs)
            self._cached = (pairs, self.redactor.merged(extra) if self.redactor is not None else extra)
        return self._cached[1]

    def run(self, name: str, tool_input: Any, context: ToolContext) -> ToolResult:
        """Run a call; never raises for a tool's problem (see the module docstring)."""
        redactor = self.redactor_for(context.env)
        t = self._tools.get(name)
        if t is None:
            known = ", ".join(sorted(self._tools)) or "none"
            return self._finish(ToolResult(f"There is no tool named {name!r}. The available tools are: {known}.", True), redactor)
        if tool_input is None:
            tool_input = {}
        errors = schema_errors(tool_input, t.input_schema)
        if errors:
            text = f"Invalid input for {name}: {'; '.join(errors)}. Fix the input and call {name} again."
            return self._finish(ToolResult(text, True), redactor)
        try:
            out = t.fn(copy.deepcopy(tool_input), replace(context, redactor=redactor))
        except (Exception, SystemExit) as e:
            return self._finish(ToolResult(f"{name} failed: {type(e).__name__}: {e}", True), redactor)
        return self._finish(self._as_result(name, out), redactor)

    def check(self, name: str, tool_input: Any, context: ToolContext) -> ToolResult | None:
        """Run the tool's check-then-act guard: the (redacted) result if the effect happened, else None.

        A guard that raises propagates: "could not tell" must not read as "did not happen".
        """
        t = self._tools.get(name)
        if t is None or t.check is None:
            return None
        redactor = self.redactor_for(context.env)
        found = t.check(copy.deepcopy(tool_input or {}), replace(context, redactor=redactor))
        return None if found is None else self._finish(self._as_result(name, found), redactor)

    @staticmethod
    def _as_result(name: str, out: Any) -> ToolResult:
        if isinstance(out, ToolResult):
            return out
        if isinstance(out, str):
            return ToolResult(out)
        if out is None:
            return ToolResult(NO_OUTPUT)
        try:
            return ToolResult(json.dumps(out, ensure_ascii=False, allow_nan=False))
        except (TypeError, ValueError):
            return ToolResult(f"{name} returned a {type(out).__name__}, which is not JSON; a tool returns a str or a ToolResult", True)

    def _finish(self, result: ToolResult, redactor: Redactor) -> ToolResult:
        content = result.content if isinstance(result.content, str) else str(result.content)
        content = redactor.redact(content)  # before the cap: the cap must not split a secret
        if len(content) > self.output_limit:
            omitted = len(content) - self.output_limit
            content = f"{content[: self.output_limit]}\n[... {omitted} more characters cut: the tool output limit is {self.output_limit}]"
        return ToolResult(content or NO_OUTPUT, bool(result.is_error))


# --- the built-ins ---------------------------------------------------------------------------


def builtin_tools(
    *,
    bash_timeout: float = 60,
    output_limit: int = 20_000,
    approve_bash: str | None = None,
    bash_max_timeout: float = 600,
) -> list[Tool]:
    """read_file, write_file, list_dir and run_bash, confined to the context's workspace.

    ``bash_timeout`` is run_bash's default timeout in seconds; the model may ask for up to
    ``bash_max_timeout`` (at least the default). ``output_limit`` caps each result in characters.
    ``approve_bash`` is a regex: commands it matches (``re.search``) need a person's approval first.
    """
    max_timeout = max(bash_timeout, bash_max_timeout)
    rule = re.compile(approve_bash) if approve_bash else None
    path_field = {"type": "string", "description": "A path relative to the workspace root, such as 'src/app.py'."}

    def read_file(inp: dict[str, Any], ctx: ToolContext) -> str:
        return sandbox.read_text(ctx.workspace, inp["path"], limit=output_limit, redactor=ctx.redactor)

    def write_file(inp: dict[str, Any], ctx: ToolContext) -> str:
        return sandbox.write_text(ctx.workspace, inp["path"], inp["content"])

    def list_dir(inp: dict[str, Any], ctx: ToolContext) -> str:
        return sandbox.list_entries(ctx.workspace, inp.get("path", "."), limit=output_limit)

    def run_bash(inp: dict[str, Any], ctx: ToolContext) -> ToolResult:
        timeout = float(inp.get("timeout", bash_timeout))
        done = sandbox.run_command(
            inp["command"], cwd=ctx.workspace, env=dict(ctx.env), timeout=timeout, output_limit=output_limit, redactor=ctx.redactor
        )
        out = done.output if done.output.endswith("\n") or not done.output else done.output + "\n"
        if done.timed_out:
            return ToolResult(
                f"{out}[timed out after {timeout:g}s: the command and every process it started were stopped; "
                f"pass a larger timeout (at most {max_timeout:g}) or make the command faster]",
                True,
            )
        status = done.exit_status
        if status is None:
            return ToolResult(f"{out}[stopped from outside before it finished (signal to its supervisor); its effects are unknown]", True)
        ending = f"exit status {status}" if status >= 0 else f"killed by signal {-status}"
        if done.leftovers:
            ending += f"; {done.leftovers} background process(es) still running at the end were stopped"
        return ToolResult(f"{out}[{ending}]")

    def bash_approval(inp: dict[str, Any]) -> str | None:
        command = inp.get("command") if isinstance(inp, dict) else None  # the loop may ask before validating
        if rule is None or not isinstance(command, str):
            return None
        m = rule.search(command)
        return f"the command matches the approval rule {rule.pattern!r} (at {m.group(0)!r})" if m else None

    return [
        Tool(
            "list_dir",
            f"List a folder of the workspace: one entry per line, sorted, folders ending in '/', symlinks as "
            f"'name -> target'. Up to {output_limit} characters.",
            {
                "type": "object",
                "properties": {"path": {"type": "string", "description": "A folder relative to the workspace root ('.', the default).", "default": "."}},
                "additionalProperties": False,
            },
            "pure",
            list_dir,
        ),
        Tool(
            "read_file",
            f"Read a UTF-8 text file of the workspace. Shows at most {output_limit} characters and says so when "
            "it cuts; read further with run_bash (sed -n, grep). Binary files are refused.",
            {"type": "object", "properties": {"path": path_field}, "required": ["path"], "additionalProperties": False},
            "pure",
            read_file,
        ),
        Tool(
            "run_bash",
            f"Run a bash command with the workspace as the working folder; stdout and stderr come back interleaved, "
            f"with the exit status. It is stopped after `timeout` seconds (default {bash_timeout:g}, at most "
            f"{max_timeout:g}); every process it starts ends with it (background processes do not outlive the "
            f"command). There is no stdin: prompts read end-of-file. Output over {output_limit} characters keeps "
            "its head and tail.",
            {
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "The bash command (run with bash -c)."},
                    "timeout": {"type": "number", "exclusiveMinimum": 0, "maximum": max_timeout, "default": bash_timeout,
                                "description": f"Seconds before the command is stopped (default {bash_timeout:g}, at most {max_timeout:g})."},
                },
                "required": ["command"],
                "additionalProperties": False,
            },
            "external",
            run_bash,
            needs_approval=bash_approval if rule is not None else None,
        ),
        Tool(
            "write_file",
            "Create or overwrite a workspace file with exactly `content` (UTF-8), creating parent folders. "
            "Writing the same content again changes nothing.",
            {
                "type": "object",
                "properties": {"path": path_field, "content": {"type": "string", "description": "The whole new text of the file."}},
                "required": ["path", "content"],
                "additionalProperties": False,
            },
            "idempotent",
            write_file,
        ),
    ]

