"""Asking the person in the foreground: the notebook's input box, and the row that says so.

A cell that runs its agent in the foreground holds the kernel, so a question (approve a tool
call, settle a step in doubt) is asked through ``input()``; its row in the timeline shows
the answer buttons switched off, saying to answer in the box. Under nbclient there is no
input box: the question becomes ``NobodyToAskError``, which says how to decide up front.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from IPython.core.error import StdinNotImplementedError

from ..agent.display.words import in_words_of
from ..agent.fleet.decisions import DecisionKind, PendingDecision, who
from ..agent.run.crash import CrashPoint
from ..agent.run.hooks import Approval, Approver, InDoubtAsker, RunHooks
from ..agent.run.stopping import StopSignal
from ..core.context import current_step
from ..core.steps import StepRecord
from ..errors import NobodyToAskError
from .timeline import Timeline

__all__ = ["foreground_hooks"]

SHOWN = 600
"""Characters of a tool call's input a question shows; a longer one shows its head and its tail."""

IN_THE_BOX = "{who} (input box)"
"""Who answered through the notebook's input box, as the decision records it (buttons: ``<who> (button)``)."""


def _ask_in_cell(record: StepRecord, tool_input: Any) -> Any:
    """Ask the person, through the notebook's input box, what to do with an in-doubt step."""
    prompt = (
        f"{in_words_of('notebook', f'Step {record.step_id!r}')} was running when its process died; whether it took effect is unknown "
        f"(input: {_excerpt(str(tool_input))}). Run it again (r), skip it and tell the model (s), or stop (f)? "
    )
    try:
        answer = input(prompt).strip().lower()
    except StdinNotImplementedError:
        raise NobodyToAskError(
            "this notebook cannot ask for input (no stdin, as under nbclient). Pass --in-doubt skip, "
            "rerun or fail instead of ask, or run the cell with --background and answer by button."
        ) from None
    choice = {"r": "rerun", "rerun": "rerun", "s": "skip", "skip": "skip"}.get(answer, "fail")
    return (choice, IN_THE_BOX.format(who=who()), "")


def _approve_in_cell(name: str, tool_input: Any, reason: str) -> Approval:
    """Ask the person to approve a tool call, through the notebook's input box."""
    shown = tool_input.get("command", tool_input) if isinstance(tool_input, dict) else tool_input
    try:
        answer = input(f"The agent wants to run {name}: {_excerpt(str(shown))} ({reason}). Allow it? [y/N] ")
    except StdinNotImplementedError:
        raise NobodyToAskError(
            "this notebook cannot ask for input (no stdin, as under nbclient). Run the cell "
            "interactively, with --background (and answer by button or through the run's handle), or "
            "clear %config AgentMagics.approve_bash."
        ) from None
    approved = answer.strip().lower() in ("y", "yes")
    return Approval(approved, IN_THE_BOX.format(who=who()), "" if approved else answer.strip())


def _excerpt(text: str) -> str:
    """``text`` whole, or its head and tail saying what is left out: a command cut silently
    hid its end (``...; git push --force``) from the person asked to allow it."""
    if len(text) <= SHOWN:
        return text
    half = SHOWN // 2
    return f"{text[:half]} … ({len(text) - 2 * half:,} characters not shown: the row above has the whole input) … {text[-half:]}"


@contextmanager
def _shown(
    timeline: Timeline, run_id: str | None, step_id: str, kind: DecisionKind, name: str, tool_input: Any, why: str
) -> Iterator[None]:
    """Show the question's buttons, switched off, under its row (of child run ``run_id``, if
    given) while ``input()`` asks."""
    pending = PendingDecision(run_id or timeline.run.run_id, step_id, kind, name, tool_input, why)
    timeline.question(pending)
    try:
        yield
    finally:
        pending.decide(pending.choices[0], by="input box")  # answered (or abandoned): the buttons go
        timeline.question(pending)


def foreground_hooks(timeline: Timeline, crash_at: CrashPoint | None) -> RunHooks:
    """The hooks of a run a cell holds the kernel for: input() asks, the timeline draws."""

    def deciders(run_id: str | None, stop: StopSignal | None = None) -> tuple[InDoubtAsker, Approver]:
        # input() holds the kernel: only its interrupt ends the question, never a stop signal.
        def approve(name: str, tool_input: Any, why: str) -> Approval:
            running = current_step()
            with _shown(timeline, run_id, running.step_id if running else "", "approval", name, tool_input, why):
                return _approve_in_cell(name, tool_input, why)

        def ask(record: StepRecord, tool_input: Any) -> Any:
            with _shown(timeline, run_id, record.step_id, "in_doubt", "", tool_input, "its outcome is unknown"):
                return _ask_in_cell(record, tool_input)

        return ask, approve

    ask, approve = deciders(None)
    before = crash_at.here() if crash_at is not None else None
    return RunHooks(
        ask=ask, approve=approve, observer=timeline, before_step=before, child_crash=crash_at, deciders_for=deciders
    )
