"""Crash switches: end a run at its n-th step exactly as a killed process would.

Both are ``before_step`` hooks (``RunHooks.before_step``): called as each live step starts,
after its intent is recorded, with the step's position in the run (0-based, replayed steps
counted too). ``CrashAt(n)`` raises ``SimulatedCrash`` (a BaseException, so nothing on the
way catches it) as step n starts: the step's intent is written, its effect and its record
are not, no ``run_finished`` is written, and the lease is released as the OS would release
a dead process's. The log is left exactly as a kill leaves it, yet the kernel survives, so
a tutorial can crash a run and resume it from the next cell (``%%agent --crash-at N``).
``KillAt(n)`` is the real thing, SIGKILL of this process a moment after step n starts (or as
its effect ends, if that comes first), for demos in terminals and for tests; it also observes
the run, to say what was running.

``CrashPoint`` names where a crash switch fires: step N of the run (``"N"``), or step N of
one of its child runs (``"K.N"``: the K-th child the run started, counted from 1 in the order
the run's log records their starts, which a resume replays in the same order; ``"K.L.N"``
goes one level further down). The run hands the part below it to its children
(``RunHooks.child_crash``, read by ``agent.delegation``).
"""

from __future__ import annotations

import argparse
import os
import signal
import threading
from dataclasses import dataclass

from ...errors import SimulatedCrash
from ..display.views import StepView
from ..settings.flags import positive_whole_number
from .hooks import Observer

__all__ = ["CrashAt", "CrashPoint", "KillAt", "crash_point", "die"]


@dataclass(frozen=True, slots=True)
class CrashPoint:
    """Step ``step`` (from 1) of the run, or of the child reached down ``children`` (each from 1)."""

    step: int
    children: tuple[int, ...] = ()

    @classmethod
    def parse(cls, text: str | int) -> CrashPoint:
        """``"N"`` or ``"K.N"`` (``"K.L.N"``, ...) as a crash point; ValueError saying the form if not."""
        parts = str(text).strip().split(".")
        if not all(p.isdigit() and int(p) >= 1 for p in parts):
            raise ValueError(
                f"must be N (the run's step N) or K.N (step N of the run's K-th child run), "
                f"whole numbers from 1, not {str(text)!r}"
            )
        *children, step = (int(p) for p in parts)
        return cls(step, tuple(children))

    def __str__(self) -> str:
        return ".".join(str(n) for n in (*self.children, self.step))

    def here(self, run: str = "") -> CrashAt | None:
        """The crash switch of the run itself (child run ``run``), if the point is one of its own steps."""
        return None if self.children else CrashAt(self.step, run)

    def below(self, child: int) -> CrashPoint | None:
        """The point as the run's ``child``-th child sees it, or None if it lies elsewhere."""
        if self.children[:1] != (child,):
            return None
        return CrashPoint(self.step, self.children[1:])


def crash_point(text: str) -> CrashPoint:
    """An argparse type: a crash point (``N`` or ``K.N``), or the message that says the form."""
    if "." not in text:  # a plain step number says what every whole-number flag says
        return CrashPoint(positive_whole_number(text))
    try:
        return CrashPoint.parse(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


class _AtStep:
    """Acts when the run's step n (1-based) starts live."""

    def __init__(self, n: int) -> None:
        if n < 1:
            raise ValueError(f"a crash step is counted from 1, not {n}")
        self.n = n

    def __call__(self, position: int, step: StepView) -> None:
        if position + 1 == self.n:
            self.act(step)

    def act(self, step: StepView) -> None:
        raise NotImplementedError


class CrashAt(_AtStep):
    """Raise ``SimulatedCrash`` as step n starts (the kernel lives; the log looks killed);
    ``run`` names the child run it is aimed at, for the message."""

    def __init__(self, n: int, run: str = "") -> None:
        super().__init__(n)
        self.run = run

    def act(self, step: StepView) -> None:
        where = f" of child run {self.run}" if self.run else ""
        raise SimulatedCrash(
            f"simulated crash at step {self.n}{where} ({step.title}): the log now holds exactly what a "
            "killed process would leave. Resume the run to see replay at work."
        )


class KillAt(_AtStep, Observer):
    """SIGKILL this process in step n: a moment after it starts, or as its effect ends if sooner.

    A step quicker than the moment (a ``read_file``, a model call at latency 0) is killed
    once its effect has run and before its result is recorded (``after_effect``), so the kill
    always lands in step n, whatever kind of step it is.
    """

    def __init__(self, n: int, after: float = 0.05) -> None:
        super().__init__(n)
        self.after = after
        self.running: StepView | None = None
        self._timer: threading.Timer | None = None
        self._dying = threading.Lock()

    def step_changed(self, step: StepView) -> None:
        if step.state in ("in_flight", "retrying"):
            self.running = step
        elif self.running is not None and self.running.step_id == step.step_id:
            self.running = None

    def act(self, step: StepView) -> None:
        self.running = step
        self._timer = threading.Timer(self.after, self._die)
        self._timer.start()

    def effect_ran(self, position: int, step: StepView) -> None:
        """An ``after_effect`` hook: step n's effect ended before the moment did; kill it now."""
        if position + 1 == self.n:
            if self._timer is not None:
                self._timer.cancel()
            self._kill(f"{self._step_words(step)}, its effect done and its result not yet recorded")

    def _step_words(self, step: StepView) -> str:
        return f"{step.title} (step {self.n}, a {step.kind} step)"

    def _die(self) -> None:
        # Say what was really running at the moment of the kill, not when the timer was set.
        running = self.running
        self._kill(self._step_words(running) if running else "a gap between steps")

    def _kill(self, what: str) -> None:
        if self._dying.acquire(blocking=False):  # the timer and the step's end may both come
            die(what)


def die(what: str) -> None:
    """SIGKILL this process now, saying in the middle of what."""
    print(f"  ✗ the process is killed (SIGKILL) in the middle of {what}", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
