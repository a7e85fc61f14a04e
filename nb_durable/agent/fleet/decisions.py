"""Decisions a person makes while a run waits: approve or deny a tool call, settle a step in doubt.

A run on a worker thread cannot ask through ``input()``: the kernel is idle and the question
would land in no cell. Instead its ``approve`` and ``ask`` hooks post a ``PendingDecision``
to the run's ``DecisionBox`` and wait. Whoever shows the run (the timeline's buttons, or a
script through ``BackgroundRun.pending``) answers it with one call, which the run records as
a decision with who made it and the reason given, so replay never asks again. The first
answer wins; a stop asked for while the run waits ends the wait (``RunStopped``).
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from ...core.context import current_step
from ...core.steps import StepRecord
from ..run.hooks import Approval, Approver, InDoubtAsker, who
from ..run.stopping import StopSignal

__all__ = ["APPROVAL_CHOICES", "IN_DOUBT_CHOICES", "DecisionBox", "PendingDecision", "who"]

DecisionKind = Literal["approval", "in_doubt"]

APPROVAL_CHOICES = ("approve", "deny")
IN_DOUBT_CHOICES = ("rerun", "skip", "fail")


@dataclass(eq=False)
class PendingDecision:
    """One question a waiting run asks: its step, the tool call, and why it asks."""

    run_id: str
    step_id: str
    kind: DecisionKind
    tool: str
    """The tool's name (empty for a step in doubt: its row in the timeline names it)."""
    input: Any
    why: str
    """Why approval is needed, or why the step is in doubt."""
    answer: tuple[str, str, str] | None = None
    """(choice, by, note) once decided."""
    _done: threading.Event = field(default_factory=threading.Event, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def choices(self) -> tuple[str, ...]:
        return APPROVAL_CHOICES if self.kind == "approval" else IN_DOUBT_CHOICES

    def decide(self, choice: str, *, by: str | None = None, note: str = "") -> bool:
        """Answer the question; False if it was already answered (the first answer is kept)."""
        if choice not in self.choices:
            raise ValueError(
                f"step {self.step_id!r} of run {self.run_id!r} asks for one of {', '.join(self.choices)}, not {choice!r}"
            )
        with self._lock:
            if self.answer is not None:
                return False
            self.answer = (choice, by or who(), note.strip())
        self._done.set()
        return True

    def approve(self, *, by: str | None = None, note: str = "") -> bool:
        """Let the tool call run."""
        return self.decide("approve", by=by, note=note)

    def deny(self, *, by: str | None = None, note: str = "") -> bool:
        """Refuse the tool call; the model is told, with the note."""
        return self.decide("deny", by=by, note=note)

    def rerun(self, *, by: str | None = None, note: str = "") -> bool:
        """Run the step in doubt again."""
        return self.decide("rerun", by=by, note=note)

    def skip(self, *, by: str | None = None, note: str = "") -> bool:
        """Go on without running it again; the model is told its outcome is unknown."""
        return self.decide("skip", by=by, note=note)

    def fail(self, *, by: str | None = None, note: str = "") -> bool:
        """Stop the run here, in doubt, for someone to settle later."""
        return self.decide("fail", by=by, note=note)

    @property
    def decided(self) -> bool:
        return self._done.is_set()


class DecisionBox:
    """The questions one run is waiting on, and the hooks that post them."""

    def __init__(self, run_id: str, stop: StopSignal) -> None:
        self.run_id = run_id
        self.stop = stop
        self._pending: list[PendingDecision] = []
        self._lock = threading.Lock()
        self._listeners: list[Callable[[PendingDecision], None]] = []

    @property
    def pending(self) -> list[PendingDecision]:
        """The questions not answered yet, oldest first."""
        with self._lock:
            return [p for p in self._pending if not p.decided]

    def listen(self, listener: Callable[[PendingDecision], None]) -> None:
        """Hear each question as it is posted and again once it is answered (display only).

        Questions posted before the listener came are told to it at once: the run's thread is
        started before its display listens, and may already be waiting on one.
        """
        with self._lock:
            self._listeners.append(listener)
            waiting = [p for p in self._pending if not p.decided]
        for pending in waiting:
            with contextlib.suppress(Exception):  # display only, as in _tell
                listener(pending)

    def _tell(self, pending: PendingDecision) -> None:
        for listener in list(self._listeners):
            with contextlib.suppress(Exception):  # display never fails the run; the question stays answerable
                listener(pending)

    def _wait(self, pending: PendingDecision, stop: StopSignal | None) -> tuple[str, str, str]:
        with self._lock:
            self._pending.append(pending)
        self._tell(pending)
        try:
            (stop or self.stop).wait_for(pending._done)
        finally:
            with self._lock:
                self._pending.remove(pending)
            self._tell(pending)
        assert pending.answer is not None
        return pending.answer

    def approve(
        self, name: str, tool_input: Any, why: str, *, run_id: str | None = None, stop: StopSignal | None = None
    ) -> Approval:
        """The run's ``approve`` hook: wait for a person to approve or deny the call (of child
        run ``run_id``, if given: its question is posted here, naming it, and ``stop``, its own
        stop signal, ends the wait too)."""
        running = current_step()
        step_id = running.step_id if running is not None else ""
        asked = PendingDecision(run_id or self.run_id, step_id, "approval", name, tool_input, why)
        choice, by, note = self._wait(asked, stop)
        return Approval(choice == "approve", by, note)

    def ask(
        self, record: StepRecord, tool_input: Any, *, run_id: str | None = None, stop: StopSignal | None = None
    ) -> tuple[str, str, str]:
        """The run's ``ask`` hook: wait for a person to settle a step in doubt (of child run ``run_id``)."""
        why = "its process died while the tool ran, so whether it took effect is unknown"
        return self._wait(PendingDecision(run_id or self.run_id, record.step_id, "in_doubt", "", tool_input, why), stop)

    def deciders_for(self, run_id: str, stop: StopSignal | None) -> tuple[InDoubtAsker, Approver]:
        """The ``ask`` and ``approve`` hooks of child run ``run_id``: asking here, naming the
        child; its own ``stop`` (a Stop of that child alone, or of this run) drops the question."""
        return functools.partial(self.ask, run_id=run_id, stop=stop), functools.partial(self.approve, run_id=run_id, stop=stop)
