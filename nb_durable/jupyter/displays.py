"""The displays of each run in this kernel: each with its own display id, and one line for what came later.

A cell's output is the record of what happened in that cell's session, so no later cell
may redraw it: every display of a run gets its own display id (``display_id_for``: the
run's id and a random token), where one id per run let a front end that updates displays
across cells (nbclient, the classic notebook) redraw a crash cell with a later cell's
final answer. What a later session of the run did is *added* to the earlier displays as
one line ("resumed in a later cell: completed there"), never put in place of what they
showed: this module keeps, per run, the displays shown in this kernel, and tells them.

An earlier display still drawn as a widget takes the line at once, from any thread (a comm
message); one already replaced by its static form takes it by a display update, which only
the main thread can send to a cell, so a line that came from a background run's thread waits
for the next display or freeze a cell makes (``flush``).
"""

from __future__ import annotations

import secrets
import threading
from typing import Protocol

from ..agent.display.views import RunView, state_word
from ..core.status import Status

__all__ = ["Shown", "display_id_for", "ended", "flush", "later_line", "started"]

KEPT = 32
"""Displays kept per run (the newest): an older one no longer hears of later sessions."""


class Shown(Protocol):
    """A display of a run, as this registry needs it (``timeline.Timeline``)."""

    run: RunView
    later: str

    def went_on(self, line: str, status: Status) -> None:
        """Show ``line`` (what a later session did) under the header; keep what is shown, but
        let what acts on the run follow it as it now stands (``status``)."""

    def refresh(self) -> None:
        """Send a static display's new line to its cell (main thread only)."""


_SHOWN: dict[str, list[Shown]] = {}
_STALE: list[Shown] = []
_LOCK = threading.Lock()


def display_id_for(run_id: str) -> str:
    """A new display id for one display of run ``run_id``: never shared with another display."""
    return f"nb-durable-run-{run_id}-{secrets.token_hex(4)}"


def later_line(status: Status, *, going: bool = False) -> str:
    """The line an earlier display of a run gets when a later cell's session goes on with it."""
    if going:
        return "resumed in a later cell: going on there"
    return f"resumed in a later cell: {state_word(status)} there"


def _earlier(shown: Shown) -> list[Shown]:
    with _LOCK:
        displays = _SHOWN.setdefault(shown.run.run_id, [])
        if not any(d is shown for d in displays):
            displays.append(shown)
            del displays[:-KEPT]
        # The same run id in another store (a JSONL folder, then runs.db) is another run.
        where = shown.run.location
        return [d for d in displays if d is not shown and d.run.status.ended and d.run.location == where]


def _tell(display: Shown, line: str, status: Status) -> None:
    if display.later == line:
        return
    display.went_on(line, status)
    if threading.current_thread() is threading.main_thread():
        display.refresh()
    else:
        with _LOCK:
            _STALE.append(display)


def started(shown: Shown) -> None:
    """A session of the run began on ``shown``: earlier displays that stopped short of the end say it goes on."""
    flush()
    for display in _earlier(shown):
        if display.run.status.resumable:
            _tell(display, later_line(shown.run.status, going=True), Status.RUNNING)


def ended(shown: Shown) -> None:
    """The session on ``shown`` ended: earlier displays that show another end (or heard it going on) say how it ended."""
    status = shown.run.status
    if not status.ended or status is Status.NOT_RUN:
        return  # a session that never got going (unknown, locked) tells nobody anything
    for display in _earlier(shown):
        if display.later or shown.run.live or display.run.status != status:
            _tell(display, later_line(status), status)
    flush()


def flush() -> None:
    """Send the lines told from a thread to their static displays (from the main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        return
    with _LOCK:
        stale, _STALE[:] = list(_STALE), []
    for display in stale:
        display.refresh()
