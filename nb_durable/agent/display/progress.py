"""Progress lines for terminals: one line per step as it ends, replayed or live, and the
run's summary (status, what it paid, what replay and caching saved, what to do) when it ends.

    replayed  model turn 0        812 in / 64 out   I'll look at the project first.
    live      run_bash            0.41s             $ python -m unittest  -> exit 1
    retrying  model turn 3        2/6 after 529 overloaded, waiting 1.2s

On a terminal (the stream is a tty) the step that is running has a live line too, redrawn
in place with its elapsed time, so a long model call or ``run_bash`` never looks like a hang;
anything else (a pipe, a file, a test) gets only the finished lines, so logs stay plain.
A step is printed once per state it ends in: a failure the retry loop reports and the
run then reports again is one line. ``interrupting()`` marks the run as stopped by the
person (Ctrl-C), so the step cut off shows as interrupted rather than failed.

A model step's thinking is printed above its line, apart from the answer: dimmed on a
terminal, each line prefixed ``thinking:`` when the output is a file or a pipe (where escape
codes would be noise). This module also owns how a :class:`~.cost.Cost` reads as text
(:func:`cost_line`), so every display says paid, replay saved and caching saved alike, and
labels every dollar of a simulated cost.
"""

from __future__ import annotations

import json
import shutil
import sys
import threading
import time
from collections import Counter
from typing import Any, TextIO

from ...core.status import Status
from ..money.cost import Cost, dollars
from ..run.hooks import Observer
from .inert_text import terminal_text
from .step_views import answered_by, broken_streams_said, retries_said, usage_text, wait_said
from .views import SKIPPED_OUTCOME, RunView, StepView, state_word, tree_words
from .words import in_words_of

__all__ = [
    "SIMULATED_NOTE",
    "TextProgress",
    "broken_said",
    "cost_line",
    "cost_parts",
    "describe_input",
    "dollars",
    "in_scope",
    "terminal_width",
]

SIMULATED_NOTE = "the demo model's figures are simulated, not a bill"

_DIM, _RESET = "\x1b[2m", "\x1b[0m"

def describe_input(name: str, tool_input: Any) -> str:
    """A tool call's input in one short line: the command for run_bash, the path for files."""
    if isinstance(tool_input, dict):
        if name == "run_bash" and "command" in tool_input:
            return f"$ {tool_input['command']}"
        if "path" in tool_input and set(tool_input) <= {"path", "content"}:
            extra = f" ({len(str(tool_input.get('content', '')))} chars)" if "content" in tool_input else ""
            return f"{tool_input['path']}{extra}"
    return json.dumps(tool_input, ensure_ascii=False)


def cost_parts(cost: Cost) -> tuple[tuple[str, int | None, str], ...]:
    """(label, tokens or None, dollars) for what was paid (naming the part broken streams
    reported: ``broken_said``), what replay saved and what caching saved (or, while its cache
    writes have not been read back enough to pay for themselves, added)."""
    caching = cost.cache_saved_dollars
    paid = dollars(cost.paid_dollars, simulated=cost.simulated)
    return (
        ("paid", cost.paid.total, f"{paid}, {broken_said(cost)}" if cost.broken_streams else paid),
        ("replay saved", cost.saved.total, dollars(cost.saved_dollars, simulated=cost.simulated)),
        ("caching saved" if caching >= 0 else "caching added", None, dollars(abs(caching), simulated=cost.simulated)),
    )


def broken_said(cost: Cost) -> str:
    """``of which $0.0123 in 2 broken streams, as reported ...``: the part of what was paid that
    streams which broke midway reported using before they broke ('' if none broke)."""
    if not cost.broken_streams:
        return ""
    streams = "1 broken stream" if cost.broken_streams == 1 else f"{cost.broken_streams} broken streams"
    return (
        f"of which {dollars(cost.broken_dollars, simulated=cost.simulated)} in {streams}, "
        "as reported before they broke: the API may not bill all of it"
    )


def cost_line(cost: Cost, scope: str = "", *, brief: bool = False) -> str:
    """``this session: paid 1,200 tokens ($0.0123) · replay saved ... · caching saved $0.0089``,
    saying whose figures they are (``scope``, when known) and noting a simulation. ``brief``: one
    line of many (``show --tree``), which leaves out a saving of nothing, and the simulation's
    note, said once for them all (``SIMULATED_NOTE``)."""
    said = " · ".join(
        f"{label} {tokens:,} tokens ({money})" if tokens is not None else f"{label} {money}"
        for at, (label, tokens, money) in enumerate(cost_parts(cost))
        if not brief or at == 0 or _saved(cost, at)
    )
    said = f"{in_scope(scope)}{said}"
    return f"{said} ({SIMULATED_NOTE})" if cost.simulated and not brief else said


def _saved(cost: Cost, part: int) -> bool:
    """Whether part ``part`` of ``cost_parts`` (1: replay, 2: caching) is a saving of anything."""
    return bool(cost.saved.total or cost.saved_dollars) if part == 1 else round(cost.cache_saved_dollars, 4) != 0


def run_cost_line(run: RunView) -> str:
    """A run's header cost: ``cost_line``, and for a parent whose figures are its tree's, which
    of them are its own (``tree_words``)."""
    words = tree_words(run)
    return cost_line(run.cost, run.scope) + (f" · {words}" if words else "")


def in_scope(scope: str) -> str:
    """Whose figures follow, said before them (``this session: ``, ``all sessions: ``), or '' if unsaid.

    A live session's header pays for this session only; a run read from its log (``show``,
    ``%agent_show``) adds up every session: the same word, "paid", always says which."""
    return f"{scope}: " if scope else ""


def terminal_width(default: int = 100) -> int:
    """The terminal's columns (``$COLUMNS`` first), or ``default`` when the output is not a terminal."""
    return shutil.get_terminal_size((default, 24)).columns


def _one_line(text: str, width: int) -> str:
    text = " ".join(terminal_text(text).split())
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


def _is_tty(out: TextIO) -> bool:
    try:
        return out.isatty()
    except (AttributeError, ValueError):
        return False


class TextProgress(Observer):
    """Writes a line per finished step, and per retry, to a text stream; on a tty, a live line;
    a summary at the end.

    ``width`` is the line's width (a terminal's columns) and ``title_width`` the title column's;
    the details after a title share what is left, and a step's title is never cut.
    ``live`` (default: whether ``out`` is a terminal) draws the running step's line;
    ``color`` (the same default) dims thinking with escape codes, else its lines are
    prefixed ``thinking:``. ``listing`` prints a recorded run (``show``): a step in flight is
    a line like the others, never a live one. ``model`` is the run's own model, when its steps are
    printed before the run is (a listing): a turn another model answered says which.
    """

    def __init__(
        self,
        out: TextIO | None = None,
        *,
        width: int = 100,
        title_width: int = 18,
        live: bool | None = None,
        tick: float = 0.5,
        color: bool | None = None,
        listing: bool = False,
        model: str = "",
    ) -> None:
        self.out = out or sys.stdout
        self.listing = listing
        self.width = width
        self.title_width = title_width
        """The title column's width; a longer title is never cut (it tells steps apart): it widens its line."""
        self.live = not listing and (_is_tty(self.out) if live is None else live)
        self.color = _is_tty(self.out) if color is None else color
        self.tick = tick
        self.run: RunView | None = None
        self.model = model
        self.final: dict[str, str] = {}
        """step id -> the state it was last printed in (what this session saw of each step)."""
        self._interrupted = False
        self._lock = threading.Lock()
        self._running: tuple[StepView, float] | None = None
        self._ticker: threading.Thread | None = None
        self._drawn = False
        self._drawn_at = 0.0
        self._wait_from = 0.0
        """When the running step's retry wait began (``_waiting``): its live line counts it down."""

    def interrupting(self) -> None:
        """The person stopped the run (Ctrl-C): the step cut off is interrupted, not failed."""
        self._interrupted = True

    def counts(self) -> Counter[str]:
        """How many steps ended in each state, as printed."""
        return Counter(self.final.values())

    def run_changed(self, run: RunView) -> None:
        ended = run.status.ended and (self.run is None or self.run.status != run.status)
        self.run = run
        self.model = run.model or self.model
        if run.status is not Status.RUNNING:
            self._stop()  # waiting for a person is no running step: no clock ticking on the line
        if ended:
            self._print(f"run {run.run_id} {state_word(run.status)} · {run_cost_line(run)}")
            if run.detail and run.status.stopped_short:
                self._print(f"what to do: {terminal_text(in_words_of('cli', run.detail))}")

    def step_changed(self, step: StepView) -> None:
        if step.state == "in_flight" and not self.listing:
            self._start(step)
            return
        state = "interrupted" if step.state in ("failed", "cut_off") and self._interrupted else step.state
        if state != "retrying" and self.final.get(step.step_id) == state:
            return  # already printed: the retry loop and the run both report a final failure
        if state != "retrying":
            self.final[step.step_id] = state
            self._stop()
        else:
            self._waiting(step)
        if step.kind == "model" and state != "retrying":
            self._thinking(step.thinking)
        title = self._title(step)
        self._print(f"  {state_word(state):<9} {title} {self._detail(step, self.width - 13 - len(title))}")
        if step.switched and state != "retrying":
            self._print(f"  {'decision':<9} {'model switch':<18} {_one_line(step.switched, self.width - 30)}")

    def _title(self, step: StepView) -> str:
        """The step's title, whole, padded to the title column."""
        return f"{_one_line(step.title, len(step.title)):<{self.title_width}}"

    def _detail(self, step: StepView, room: int) -> str:
        """What follows a step's title, in ``room`` characters (each part keeps a readable minimum)."""
        if step.state == "retrying":
            if not step.attempt:  # waiting on a shared limit before the first attempt
                return _one_line(step.error, max(room, 20))
            # The wait is said whole, after the failure cut to fit: it is what the row is there to say.
            waiting = f", {wait_said(step)}" if wait_said(step) else ""
            return f"{step.attempt}/{step.max_attempts} after {_one_line(step.error, max(room - 12 - len(waiting), 20))}{waiting}"
        if step.kind == "model":
            usage = usage_text(step.usage) if step.usage else ""
            failed = ", ".join(filter(None, (step.error, wait_said(step))))
            said = step.output or retries_said(step) or failed
            # Said before the answer, which the row cuts to fit: who answered, and what broken streams cost.
            by = "; ".join(filter(None, (answered_by(step, self.model), step.output and broken_streams_said(step))))
            return f"{usage:<33} {_one_line(f'({by}) {said}' if by else said, max(room - 34, 10))}"
        if step.kind == "compact" and step.usage:  # a model call too: what it paid beside what it saved
            usage = usage_text(step.usage)  # unpadded: what it replaced must fit a narrow terminal too
            return f"{usage} · {_one_line(step.output, max(room - len(usage) - 3, 10))}"
        if step.kind in ("settings", "user", "compact"):
            return _one_line(step.output, max(room, 10))
        took = f"{step.ms / 1000:.2f}s" if step.ms and step.state == "live" else ""
        # A listing's steps are recorded, never live: its time column would be empty on every line.
        timed = "" if self.listing else f"{took:<8} "
        left = max(room - len(timed) - 5, 20)  # after the time column and the arrow
        decision = f" ({_one_line(step.decision, 400)})" if step.decision else ""
        whole = ""  # an outcome printed whole, the input taking what it leaves
        if step.state == "skipped":
            whole = SKIPPED_OUTCOME  # it is what the model was told
        elif step.kind == "approval":
            whole = _one_line(step.output, 400)  # who decided, and the reason they gave
        outcome = "error: " if step.is_error and not whole else ""
        answer = whole or _one_line(step.output or step.error, len(step.output or step.error))
        # What came back keeps up to 30 characters (a child's run id, a command's first words of
        # output), no more than it has, nor more than half the room: the input says what the step did.
        kept = len(whole) if whole else min(len(outcome) + len(answer), 30, (left - len(decision)) // 2)
        said = _one_line(describe_input(step.title, step.input), max(left - len(decision) - kept, 4 if whole else 10))
        shown = answer if whole else _one_line(answer, max(left - len(said) - len(outcome) - len(decision), 8))
        return f"{timed}{said}  -> {outcome}{shown}{decision}"

    def _thinking(self, text: str) -> None:
        for line in terminal_text(text.strip()).splitlines():
            if self.color:
                self._print(f"{_DIM}    {line}{_RESET}")
            else:
                self._print(f"    thinking: {line}")

    # -- the live line (terminals only) ----------------------------------------------------

    def _start(self, step: StepView) -> None:
        if not self.live:
            return
        with self._lock:
            same = self._running is not None and self._running[0].step_id == step.step_id
            started = self._running[1] if self._running is not None and same else time.monotonic()
            self._running = (step, started)
            ticker = None
            if self._ticker is None:  # decided under the lock the ticker exits under
                ticker = self._ticker = threading.Thread(target=self._tick, name="nb-durable-progress", daemon=True)
            # Streamed text arrives in many small pieces: the ticker shows it, at its own pace.
            redraw = not same or time.monotonic() - self._drawn_at >= self.tick
        if redraw:
            self._draw()
        if ticker is not None:
            ticker.start()

    def _waiting(self, step: StepView) -> None:
        """A retry is scheduled: the live line says so, its clock still counting from the start,
        and counts down the wait before the next attempt."""
        with self._lock:
            if self._running is not None and self._running[0].step_id == step.step_id:
                self._running = (step, self._running[1])
                self._wait_from = time.monotonic()

    def _tick(self) -> None:
        while True:
            time.sleep(self.tick)
            with self._lock:
                if self._running is None:
                    self._ticker = None
                    return
            self._draw()

    def _draw(self) -> None:
        with self._lock:
            if self._running is None:
                return
            step, started = self._running
            what = step.output if step.kind == "model" else describe_input(step.title, step.input) if step.input else ""
            if step.state == "retrying" and step.wait:
                what = wait_said(step, left=step.wait - (time.monotonic() - self._wait_from))
            columns = shutil.get_terminal_size((self.width, 24)).columns - 1
            label = "retrying" if step.state == "retrying" else "running"
            line = f"  {label:<9} {self._title(step)} {time.monotonic() - started:6.1f}s  {_one_line(what, 200)}"
            # Marked drawn first: a Ctrl-C in the middle of the write still gets the line cleared.
            self._drawn, self._drawn_at = True, time.monotonic()
            # Never wider than the terminal: a wrapped line cannot be redrawn in place.
            self.out.write("\r\033[K" + (line if len(line) <= columns else line[: max(columns - 1, 0)] + "…"))
            self.out.flush()

    def _stop(self) -> None:
        with self._lock:
            self._running = None
            if self._drawn:
                self.out.write("\r\033[K")
                self.out.flush()
                self._drawn = False

    def _print(self, line: str) -> None:
        with self._lock:
            if self._drawn:
                self.out.write("\r\033[K")
            print(line, file=self.out, flush=True)
            self._drawn = False
        if self._running is not None:
            self._draw()  # a retry line scrolls up; the step is still running below it
