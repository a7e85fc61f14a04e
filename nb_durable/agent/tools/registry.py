"""The tools offered to the model, and the one way a call is run: ``ToolRegistry.run``.

The agent loop runs every tool_use block through ``ToolRegistry.run`` inside a step, with the
tool's declared effect, and records the returned ``ToolResult`` as JSON. Invariants:

* ``run`` never raises for a tool's problem. An unknown name, input that fails the schema,
  or an exception inside the tool becomes an ``is_error`` result that tells the model what
  went wrong and what to do; only KeyboardInterrupt (a person) and a ``RunError`` (the run
  itself cannot go on, such as a tool that changed on its server) get through.
* Every result's content (error messages too) is redacted (secrets of ``os.environ``, of
  the context's ``env`` and those a model holds, see ``secrets``) and capped before it is
  returned, so no secret reaches the model or the log, and no step result grows without bound.
* A tool sees the context's ``env`` without its secret variables (``secrets.tool_environment``),
  except those passed through by name (``pass_env``, ``$NB_DURABLE_PASS_ENV``).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import replace
from typing import Any, overload

from ...core.events import Effect
from ...errors import RunError
from ..secrets.environment import secrets_in
from ..secrets.redaction import Redactor, held_secrets, tool_environment
from .definition import ApprovalRule, CheckGuard, Tool, ToolContext, ToolResult, tool
from .schema import schema_errors

__all__ = ["NO_OUTPUT", "ToolRegistry"]

NO_OUTPUT = "(no output)"  # the API refuses an empty is_error result; an empty success reads badly


class ToolRegistry:
    """The tools offered to the model; runs a call and always returns a ``ToolResult``.

    ``redactor`` masks secrets in every result; by default it is built from ``os.environ`` at
    call time, and the secrets of each call's ``context.env`` and the credentials models hold
    are always added. Every result is capped at ``output_limit`` characters. ``pass_env``
    names secret variables a tool may see all the same (by default it sees none of them).
    """

    def __init__(
        self,
        tools: Iterable[Tool] = (),
        *,
        redactor: Redactor | None = None,
        output_limit: int = 100_000,
        pass_env: str | Iterable[str] = (),
    ) -> None:
        self._tools: dict[str, Tool] = {}
        self.redactor = redactor
        self.output_limit = output_limit
        self.pass_env = (pass_env,) if isinstance(pass_env, str) else tuple(pass_env)
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

    def strict_names(self) -> frozenset[str]:
        """The tools sent with ``strict: true`` (the package's own)."""
        return frozenset(t.name for t in self if t.strict)

    def sources(self) -> dict[str, dict[str, Any]]:
        """Tool name -> where it comes from, for every tool that has a ``source`` (JSON, recorded)."""
        return {t.name: copy.deepcopy(dict(t.source)) for t in self if t.source}

    def label_of(self, name: str) -> str:
        """What the timeline shows beside a tool's name (its server and effect), or ''."""
        t = self._tools.get(name)
        return str(t.source.get("label", "")) if t is not None and t.source else ""

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
        found = (*(secrets_in() if self.redactor is None else ()), *(secrets_in(env) if env else ()))
        pairs = frozenset(pair for pair in found if len(pair[1]) >= 8) | held_secrets()
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
            out = t.fn(copy.deepcopy(tool_input), self._context_for(context, redactor))
        except RunError:
            raise
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
        found = t.check(copy.deepcopy(tool_input or {}), self._context_for(context, redactor))
        return None if found is None else self._finish(self._as_result(name, found), redactor)

    def _context_for(self, context: ToolContext, redactor: Redactor) -> ToolContext:
        """What the tool sees: its redactor, and the environment without credentials."""
        return replace(context, redactor=redactor, env=tool_environment(context.env, self.pass_env))

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
