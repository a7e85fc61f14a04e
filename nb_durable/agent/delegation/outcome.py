"""What a child run's ending returns to its parent, as the delegate call's tool result.

Only the child's final answer returns, as an ordinary result when it completed; any other
ending (refused, truncated, budget exhausted, failed, interrupted, in doubt) returns as an
error result that says what happened and names the child, so the model can decide and a
person can resume the child. Never a hang: a child that cannot go on ends, and says so. (A
child stopped by an outage, or waiting for a person, stops the tree instead: ``spawn``.)
"""

from __future__ import annotations

from typing import Any

from ..tools import ToolResult

__all__ = ["result_of"]


def result_of(child: str, status: str, text: str, detail: str) -> ToolResult:
    """The tool result of a child that ended ``status`` with final ``text`` and ``detail``."""
    if status == "completed":
        return ToolResult(text or "(the child finished without a report)")
    said = f"The child run {child!r} did not complete: it ended {status}"
    if detail:
        said += f" ({detail.rstrip('.')})"
    said += "."
    if text:
        said += f" What it said last: {text}"
    return ToolResult(said, is_error=True)


def summary_result(child: str, status: str, output: Any, error: str | None) -> ToolResult:
    """The tool result of a child from its recorded ``run_finished`` (``RunSummary`` fields)."""
    text = str(output.get("text") or "") if isinstance(output, dict) else ""
    return result_of(child, status, text, error or "")
