"""Tools from the notebook itself: the agent may list and inspect the kernel's variables, and
run Python in the user's namespace.

``list_variables`` and ``inspect_variable`` only read (``pure``): replay hands their recorded
answers back. ``run_python`` changes the kernel (``external``) and needs a person's approval
by default. The honest limit, said in the row, in ``%agent_resume``'s output and in the docs:
replay hands back what a ``run_python`` call printed, it does not run it again, so after a
kernel restart the variables it defined are gone. ``rerun_recorded_python`` executes the
recorded code again, in order, and only when the person asks (``%agent_resume --rerun-python``).
"""

from __future__ import annotations

import reprlib
from collections.abc import Iterable
from typing import Any

from IPython.utils.capture import capture_output

from ..agent.display.views import StepId, tool_calls_of
from ..agent.tools import Tool, ToolContext, ToolResult
from ..core.runs import RunRecord

__all__ = ["KERNEL_SOURCE", "RUN_PYTHON", "kernel_tools", "recorded_python", "rerun_recorded_python"]

KERNEL_SOURCE = "kernel"
RUN_PYTHON = "run_python"
REPLAY_NOTE = "replayed, not re-run: after a kernel restart the variables it defined are gone"
_HIDDEN = {"In", "Out", "exit", "quit", "get_ipython", "open"}


def _visible(shell: Any) -> dict[str, Any]:
    hidden = set(getattr(shell, "user_ns_hidden", {}) or {})
    return {
        k: v
        for k, v in shell.user_ns.items()
        if not k.startswith("_") and k not in hidden and k not in _HIDDEN and type(v).__name__ != "module"
    }


def _shape(value: Any) -> str:
    shape = getattr(value, "shape", None)
    if isinstance(shape, tuple):
        return "x".join(str(n) for n in shape) or "scalar"
    try:
        return f"len {len(value)}"
    except Exception:
        return ""


def _source(effect: str, note: str = "", **more: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": KERNEL_SOURCE, "label": f"kernel · {effect}", **more}
    if note:
        out["replay_note"] = note
    return out


def kernel_tools(shell: Any, *, approve_run: bool = True, repr_limit: int = 2000) -> list[Tool]:
    """list_variables, inspect_variable and run_python over ``shell``'s user namespace."""

    def list_variables(tool_input: dict[str, Any], context: ToolContext) -> str:
        rows = [f"{name}\t{type(value).__name__}\t{_shape(value)}".rstrip() for name, value in sorted(_visible(shell).items())]
        return "name\ttype\tshape\n" + "\n".join(rows) if rows else "The namespace has no user variables yet."

    def inspect_variable(tool_input: dict[str, Any], context: ToolContext) -> ToolResult:
        name = tool_input["name"]
        namespace = _visible(shell)
        if name not in namespace:
            known = ", ".join(sorted(namespace)[:50]) or "none"
            return ToolResult(f"There is no variable {name!r} in the notebook. Its variables: {known}.", True)
        value = namespace[name]
        shown = reprlib.Repr()
        shown.maxstring, shown.maxother, shown.maxlist, shown.maxdict = repr_limit, repr_limit, 50, 50
        try:
            text = shown.repr(value)
        except Exception as e:
            text = f"(its repr failed: {type(e).__name__}: {e})"
        if len(text) > repr_limit:
            text = text[:repr_limit] + f"... [{len(text) - repr_limit} more characters]"
        details = [f"type: {type(value).__module__}.{type(value).__qualname__}"]
        if _shape(value):
            details.append(f"shape: {_shape(value)}")
        dtype = getattr(value, "dtype", None)
        if dtype is not None:
            details.append(f"dtype: {dtype}")
        return ToolResult("\n".join([*details, f"repr: {text}"]))

    def run_python(tool_input: dict[str, Any], context: ToolContext) -> ToolResult:
        with capture_output(display=False) as captured:
            result = shell.run_cell(tool_input["code"], store_history=False)
        parts = [captured.stdout, captured.stderr]
        if result.result is not None:
            parts.append(repr(result.result))
        text = "".join(p if p.endswith("\n") or not p else p + "\n" for p in parts if p).strip()
        failed = result.error_before_exec is not None or result.error_in_exec is not None
        return ToolResult(text or "(ran; no output)", failed)

    def approval(tool_input: dict[str, Any]) -> str | None:
        return "run_python changes the notebook's variables"

    name_field = {"type": "string", "description": "The variable's name."}
    return [
        Tool(
            "inspect_variable",
            f"Show one variable of the notebook: its type, shape (or length), dtype, and a repr of at most {repr_limit} characters.",
            {"type": "object", "properties": {"name": name_field}, "required": ["name"], "additionalProperties": False},
            "pure",
            inspect_variable,
            source=_source("pure"),
            strict=True,
        ),
        Tool(
            "list_variables",
            "List the notebook's variables: name, type and shape (or length), one per line.",
            {"type": "object", "properties": {}, "additionalProperties": False},
            "pure",
            list_variables,
            source=_source("pure"),
            strict=True,
        ),
        Tool(
            RUN_PYTHON,
            "Run Python code in the notebook's namespace (the person's own variables), as a cell would. "
            "Returns what it printed and the value of its last expression. Prefer small steps.",
            {
                "type": "object",
                "properties": {"code": {"type": "string", "description": "The Python code to run."}},
                "required": ["code"],
                "additionalProperties": False,
            },
            "external",
            run_python,
            needs_approval=approval if approve_run else None,
            source=_source("external", REPLAY_NOTE, approve=approve_run),
            strict=True,
        ),
    ]


def recorded_python(record: RunRecord) -> list[tuple[str, str]]:
    """(step id, code) of every run_python call the run completed without an error, in order."""
    replies = [s.result.get("message") or {} for s in record.steps if s.step_id.startswith("model:") and isinstance(s.result, dict)]
    calls = tool_calls_of(replies)
    out = []
    for step in record.steps:
        if not step.step_id.startswith("tool:") or step.state != "completed":
            continue
        call = calls.get(StepId.parse(step.step_id).tool_use_id)
        result = step.result if isinstance(step.result, dict) else {}
        if call is not None and call.name == RUN_PYTHON and not result.get("is_error") and isinstance(call.input, dict):
            out.append((step.step_id, str(call.input.get("code", ""))))
    return out


def rerun_recorded_python(shell: Any, calls: Iterable[tuple[str, str]]) -> list[str]:
    """Run the recorded code again in ``shell``, in order; a line per call saying how it went."""
    said = []
    for step_id, code in calls:
        result = shell.run_cell(code, store_history=False)
        ok = result.error_before_exec is None and result.error_in_exec is None
        said.append(f"{step_id}: {'re-ran' if ok else 'failed again'}")
    return said
