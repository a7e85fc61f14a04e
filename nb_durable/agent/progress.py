"""Progress lines for terminals: one line per step as it ends, replayed or live, and the
run's summary (status, what it paid, what replay and caching saved, what to do) when it ends.

    replayed  model turn 0        812 in / 64 out   I'll look at the project first.
    live      run_bash            0.41s             $ python -m unittest  -> exit 1
    retrying  model turn 3        2/6 after 529 overloaded, waiting 1.2s

A model step's thinking is printed above its line, apart from the answer: dimmed on a
terminal, each line prefixed ``thinking:`` when the output is a file or a pipe (where escape
codes would be noise). This module also owns how a :class:`~.cost.Cost` reads as text
(:func:`cost_line`), so every display says paid, replay saved and caching saved alike, and
labels every dollar of a simulated cost.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any, TextIO

from ..core.events import RUN_OUTCOMES, STOPPED_OUTCOMES
from .cost import Cost, Usage
from .hooks import Observer
from .views import SKIPPED_OUTCOME, RunView, StepView

__all__ = [
    "ENDED",
    "SIMULATED_NOTE",
    "TextProgress",
    "cost_line",
    "cost_parts",
    "describe_input",
    "dollars",
    "usage_text",
]

ENDED = frozenset((*RUN_OUTCOMES, "in_doubt"))
"""Statuses a run's view reaches when its session is over (displays freeze on them)."""

SIMULATED_NOTE = "the demo model's figures are simulated, not a bill"

_DIM, _RESET = "\x1b[2m", "\x1b[0m"
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""Control characters (escape codes among them) a model's text must not send to a terminal."""


def describe_input(name: str, tool_input: Any) -> str:
    """A tool call's input in one short line: the command for run_bash, the path for files."""
    if isinstance(tool_input, dict):
        if name == "run_bash" and "command" in tool_input:
            return f"$ {tool_input['command']}"
        if "path" in tool_input and set(tool_input) <= {"path", "content"}:
            extra = f" ({len(str(tool_input.get('content', '')))} chars)" if "content" in tool_input else ""
            return f"{tool_input['path']}{extra}"
    return json.dumps(tool_input, ensure_ascii=False)


def usage_text(usage: Usage) -> str:
    """A model call's tokens: every prompt token (saying how many the cache served) and the output."""
    cached = f" ({usage.cache_read_input_tokens:,} cached)" if usage.cache_read_input_tokens else ""
    return f"{usage.prompt_tokens:,} in{cached} / {usage.output_tokens:,} out"


def dollars(amount: float, *, simulated: bool) -> str:
    """A dollar figure as displays print it, labelled when it is simulated."""
    text = f"{'-' if amount < 0 else ''}${abs(amount):.4f}"
    return f"simulated {text}" if simulated else text


def cost_parts(cost: Cost) -> tuple[tuple[str, int | None, str], ...]:
    """(label, tokens or None, dollars) for what was paid, what replay saved and what caching saved."""
    return (
        ("paid", cost.paid.total, dollars(cost.paid_dollars, simulated=cost.simulated)),
        ("replay saved", cost.saved.total, dollars(cost.saved_dollars, simulated=cost.simulated)),
        ("caching saved", None, dollars(cost.cache_saved_dollars, simulated=cost.simulated)),
    )


def cost_line(cost: Cost) -> str:
    """``paid 1,200 tokens ($0.0123) · replay saved ... · caching saved $0.0089``, noting a simulation."""
    said = " · ".join(
        f"{label} {tokens:,} tokens ({money})" if tokens is not None else f"{label} {money}"
        for label, tokens, money in cost_parts(cost)
    )
    return f"{said} ({SIMULATED_NOTE})" if cost.simulated else said


def _one_line(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


class TextProgress(Observer):
    """Writes a line per finished step, and per retry, to a text stream; a summary at the end.

    ``color`` (default: whether ``out`` is a terminal) dims thinking with escape codes;
    without it thinking lines are prefixed ``thinking:``.
    """

    def __init__(self, out: TextIO | None = None, *, width: int = 100, color: bool | None = None) -> None:
        self.out = out or sys.stdout
        self.width = width
        self.color = _isatty(self.out) if color is None else color
        self.run: RunView | None = None

    def run_changed(self, run: RunView) -> None:
        ended = run.status in ENDED and (self.run is None or self.run.status != run.status)
        self.run = run
        if ended:
            self._print(f"run {run.run_id} {run.status.replace('_', ' ')} · {cost_line(run.cost)}")
            if run.detail and run.status in STOPPED_OUTCOMES:
                self._print(f"what to do: {run.detail}")

    def step_changed(self, step: StepView) -> None:
        if step.state in ("in_flight",):
            return
        if step.state == "retrying":
            detail = f"{step.attempt}/{step.max_attempts} after {_one_line(step.error, 60)}"
        elif step.kind == "model":
            self._thinking(step.thinking)
            usage = usage_text(step.usage) if step.usage else ""
            detail = f"{usage:<33} {_one_line(step.output, self.width - 63)}"
        elif step.kind in ("settings", "user"):
            detail = _one_line(step.output, self.width - 30)
        else:
            took = f"{step.ms / 1000:.2f}s" if step.ms and step.state == "live" else ""
            if step.state == "skipped":
                outcome, shown = "", SKIPPED_OUTCOME  # whole: it is what the model was told
            else:
                outcome, shown = ("error: " if step.is_error else ""), _one_line(step.output, 30)
            detail = f"{took:<8} {_one_line(describe_input(step.title, step.input), 40)}  -> {outcome}{shown}"
        self._print(f"  {step.state:<9} {_one_line(step.title, 18):<18} {detail}")

    def _thinking(self, text: str) -> None:
        for line in _CONTROL.sub("", text.strip()).splitlines():
            if self.color:
                self._print(f"{_DIM}    {line}{_RESET}")
            else:
                self._print(f"    thinking: {line}")

    def _print(self, line: str) -> None:
        print(line, file=self.out, flush=True)


def _isatty(out: TextIO) -> bool:
    try:
        return out.isatty()
    except (AttributeError, ValueError):
        return False
