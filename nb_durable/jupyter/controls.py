"""The timeline's buttons: Stop, Resume and Fork for the run; Approve/Deny, Rerun/Skip/Fail on a row.

Buttons only work while the kernel is idle (a busy kernel does not read comm messages), so
they are on for a run going on in the background. A run the cell holds the kernel for (the
foreground) has no bar: the interrupt button stops it, and a question it asks through
``input()`` shows its row's buttons off, saying to answer in the box. A click does
one thing through ``TimelineActions`` or a ``PendingDecision``; what it decides is recorded
by the run, never by the display. Core ipywidgets only; every label is plain text.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from html import escape
from typing import Any, Protocol

from ..agent.fleet.decisions import PendingDecision, who
from ..core.status import Status

__all__ = ["ROW_FOREGROUND_NOTE", "QuestionBox", "RunBar", "TimelineActions"]

ROW_FOREGROUND_NOTE = "answer in the input box below: the kernel is busy running this cell, so buttons cannot be heard"


_LABELS = {
    "approve": ("Approve", "success", "let this tool call run"),
    "deny": ("Deny", "danger", "refuse it; the model is told, with the reason"),
    "rerun": ("Rerun", "warning", "run the step again (its effect may happen twice)"),
    "skip": ("Skip", "", "go on without it; the model is told its outcome is unknown"),
    "fail": ("Fail", "danger", "leave the run in doubt for someone to settle later"),
}


class TimelineActions(Protocol):
    """What the run's buttons do; the cell that runs the timeline provides it."""

    def stop(self) -> None: ...

    def resume(self) -> None: ...

    def fork(self, at: int) -> None: ...


def _button(widgets: Any, name: str, on_click: Callable[[], None], **options: Any) -> Any:
    """A Button with classes ``nbd-button`` and ``nbd-<name>``, heard from the moment it has them.

    Its click handler is in place before the classes are sent: a front end finds a button by
    them, and a click sent as soon as they arrive would otherwise reach a button nobody hears,
    leaving a run waiting for ever on a question already answered."""
    button = widgets.Button(**options)
    button.on_click(lambda _: on_click())
    button.add_class("nbd-button")
    button.add_class(f"nbd-{name}")
    return button


class RunBar:
    """The row of buttons under a run's header."""

    def __init__(self, widgets: Any) -> None:
        self.actions: TimelineActions | None = None
        self._fork_moved = 0.0
        # No icons: they are Font Awesome, whose font file has one name in Lab's static files and
        # Notebook 7's, and jupyter_server caches static paths by name across both, so the second
        # app opened on a server gets a 403 for it (and a console error).
        self.stop = _button(
            widgets, "stop", lambda: self._do("stop"),
            description="Stop", tooltip="stop at the next step boundary (a running command is killed, an MCP call cancelled)",
        )  # fmt: skip
        self.resume = _button(
            widgets, "resume", lambda: self._do("resume"),
            description="Resume", tooltip="go on from where the run stopped, in the background",
        )  # fmt: skip
        self.fork_at = widgets.BoundedIntText(value=0, min=0, max=0, description="from step", layout=widgets.Layout(width="150px"))
        self.fork = _button(
            widgets, "fork", lambda: self._do("fork"), description="Fork from here", tooltip="a new run from the first N steps, shown below"
        )
        self.note = widgets.HTML("")
        self.standing = ""  # what the session going on said of itself: an emptied note comes back to it
        self.fork_at.add_class("nbd-fork-at")
        self.note.add_class("nbd-bar-note")
        self.box = widgets.HBox([self.stop, self.resume, self.fork, self.fork_at, self.note])
        self.box.add_class("nbd-bar")

    def _do(self, what: str) -> None:
        actions = self.actions
        if actions is None:
            return
        try:
            if what == "stop":
                self.stop.disabled = True
                actions.stop()
            elif what == "resume":
                actions.resume()  # it checks the run's state itself, and redraws the bar
            else:
                actions.fork(int(self.fork_at.value))
        except Exception as e:  # a click has no cell to fail: say it where it was clicked
            self.say(f"{type(e).__name__}: {e}")

    def say(self, text: str) -> None:
        """Show a short line beside the buttons (escaped); '' shows the standing one, if any."""
        text = text or self.standing
        self.note.value = f'<span class="nbd-bar-said">{escape(text)}</span>' if text else ""

    def keep_saying(self, text: str) -> None:
        """Show ``text`` as the standing line of the session that starts ('' for none): a passing
        note (stopping, a refused click) replaces it a while; a session's end leaves it."""
        self.standing = text
        self.say(text)

    def update(self, status: Status, recorded: int, *, going: bool, foreground: bool, stopping: bool) -> None:
        """Turn each button on or off for the run as it stands (``status``: as its latest session left it)."""
        self.stop.disabled = foreground or not going or stopping
        self.resume.disabled = foreground or going or not status.resumable
        self.fork.disabled = foreground or recorded == 0
        self.fork_at.disabled = self.fork.disabled
        # While the run goes the box follows at most once a second: each change is a comm
        # message, and a fast run records many steps a second. It follows only while it stands
        # at the last step: a step typed into it stays, though the run records more or ends.
        now = time.monotonic()
        if self.fork_at.max != recorded and (not going or now - self._fork_moved >= 1.0):
            self._fork_moved = now
            following = self.fork_at.value == self.fork_at.max
            self.fork_at.max = recorded
            if following:
                self.fork_at.value = recorded
        self.box.layout.display = "none" if foreground else None
        if stopping and going:
            self.say("stopping at the next step boundary...")


class QuestionBox:
    """Answer buttons for one question a run waits on, with a reason box recorded with the answer."""

    def __init__(self, widgets: Any, pending: PendingDecision, *, enabled: bool) -> None:
        self.pending = pending
        self.reason = widgets.Text(placeholder="reason (recorded with your answer)", layout=widgets.Layout(width="320px"))
        self.reason.add_class("nbd-reason")
        self.buttons = []
        for choice in pending.choices:
            label, style, tip = _LABELS[choice]
            answer = functools.partial(self._answer, choice)
            self.buttons.append(
                _button(widgets, choice, answer, description=label, button_style=style, tooltip=tip, disabled=not enabled)
            )
        self.reason.disabled = not enabled
        note = widgets.HTML("" if enabled else f'<span class="nbd-bar-note">{escape(ROW_FOREGROUND_NOTE)}</span>')
        self.box = widgets.HBox([*self.buttons, self.reason, note])
        self.box.add_class("nbd-question")
        self.holder: Any = None
        """The row and these buttons together, as the timeline shows them."""

    def _answer(self, choice: str) -> None:
        for button in self.buttons:
            button.disabled = True
        self.reason.disabled = True
        self.pending.decide(choice, by=f"{who()} (button)", note=str(self.reason.value))
