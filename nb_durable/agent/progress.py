"""Progress lines for terminals: one line per step as it ends, replayed or live.

    replayed  model turn 0        812 in / 64 out   I'll look at the project first.
    live      run_bash            0.41s             $ python -m unittest  -> exit 1
    retrying  model turn 3        2/6 after 529 overloaded, waiting 1.2s
"""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO

from .hooks import Observer
from .views import SKIPPED_OUTCOME, RunView, StepView

__all__ = ["TextProgress", "describe_input"]


def describe_input(name: str, tool_input: Any) -> str:
    """A tool call's input in one short line: the command for run_bash, the path for files."""
    if isinstance(tool_input, dict):
        if name == "run_bash" and "command" in tool_input:
            return f"$ {tool_input['command']}"
        if "path" in tool_input and set(tool_input) <= {"path", "content"}:
            extra = f" ({len(str(tool_input.get('content', '')))} chars)" if "content" in tool_input else ""
            return f"{tool_input['path']}{extra}"
    return json.dumps(tool_input, ensure_ascii=False)


def _one_line(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


class TextProgress(Observer):
    """Writes a line per finished step, and per retry, to a text stream."""

    def __init__(self, out: TextIO | None = None, *, width: int = 100) -> None:
        self.out = out or sys.stdout
        self.width = width
        self.run: RunView | None = None

    def run_changed(self, run: RunView) -> None:
        self.run = run

    def step_changed(self, step: StepView) -> None:
        if step.state in ("in_flight",):
            return
        if step.state == "retrying":
            detail = f"{step.attempt}/{step.max_attempts} after {_one_line(step.error, 60)}"
        elif step.kind == "model":
            usage = f"{step.usage.input_tokens:,} in / {step.usage.output_tokens:,} out" if step.usage else ""
            detail = f"{usage:<20} {_one_line(step.output, self.width - 50)}"
        else:
            took = f"{step.ms / 1000:.2f}s" if step.ms and step.state == "live" else ""
            if step.state == "skipped":
                outcome, shown = "", SKIPPED_OUTCOME  # whole: it is what the model was told
            else:
                outcome, shown = ("error: " if step.is_error else ""), _one_line(step.output, 30)
            detail = f"{took:<8} {_one_line(describe_input(step.title, step.input), 40)}  -> {outcome}{shown}"
        print(f"  {step.state:<9} {_one_line(step.title, 18):<18} {detail}", file=self.out, flush=True)
