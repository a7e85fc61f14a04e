"""The base of the error tree, the exit code of each outcome, and the outsiders.

``NbDurableError`` knows its outcome and exit code; the warnings and
``SimulatedCrash`` (a BaseException that stands in for a killed process) sit outside the tree.
The whole tree is drawn in ``nb_durable.errors``.
"""

from __future__ import annotations

import os
import sys
import warnings
from typing import ClassVar, Literal

__all__ = [
    "EXIT_CODES",
    "NbDurableError",
    "Outcome",
    "SharedStepNameWarning",
    "SimulatedCrash",
    "TornLineWarning",
    "stacklevel_outside_package",
    "warn_each_time",
]


Outcome = Literal["usage", "failed", "locked", "in_doubt"]
"""How an error ends a command: a mistake in what was asked, a failed run, a run another
process writes, or a step that needs a decision."""

EXIT_CODES: dict[str, int] = {
    "completed": 0,
    "failed": 1,
    "usage": 2,
    "locked": 3,
    "in_doubt": 4,
    "truncated": 5,
    "refused": 6,
    "context_full": 7,
    "budget_exhausted": 8,
    "timed_out": 9,
    "bad_tool_input": 10,
    "unknown_stop": 11,
    "interrupted": 130,
}
"""The CLI's exit code for each way a command ends: an error's outcome, how a run ended, or
``timed_out`` (``nb-durable wait --timeout`` gave up while runs went on); ``completed`` is
success, ``interrupted`` the shell's code for Ctrl-C."""


class NbDurableError(Exception):
    """The base of every error nb_durable raises."""

    outcome: ClassVar[Outcome] = "failed"

    @property
    def exit_code(self) -> int:
        """The CLI's exit code for this error."""
        return EXIT_CODES[self.outcome]

    @property
    def user_mistake(self) -> bool:
        """Whether the fix is in what was asked (or in waiting for another writer), not in the run."""
        return self.outcome in ("usage", "locked")


class TornLineWarning(UserWarning):
    """A log's last line was cut short by a crash and was dropped on load."""


class StoreWaitWarning(UserWarning):
    """A store's server dropped the connection, or is short of capacity, and nb_durable waits for it before
    giving up; or gave up on what never fails a run (the mark saying a run waits for a person)."""


class SharedStepNameWarning(UserWarning):
    """Two functions are one ``@step`` name in a run: a replay that swaps them swaps their results."""


class SimulatedCrash(BaseException):
    """A run was stopped as a killed process would stop (``--crash-at``); resume it."""

    def _render_traceback_(self) -> list[str]:
        """How IPython shows it: its message alone. It is a deliberate stop, not a bug to trace."""
        return [f"{type(self).__name__}: {self}"]


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # nb_durable/


def stacklevel_outside_package() -> int:
    """The ``stacklevel`` that points a warning at the user's code, not at nb_durable's."""
    frame = sys._getframe(2)  # the caller of the function that warns
    level = 2
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    return level


def warn_each_time(warning: Warning) -> None:
    """Warn ``warning`` at the user's code (as ``stacklevel_outside_package`` points it) each time,
    for its caller decides when a thing is worth saying again. Python's default shows a text once
    per line of code for the process's life: a second outage, said in the same words at the same
    line (a background run's is threading's), went unseen."""
    frame = sys._getframe(1)
    while frame.f_back is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame = frame.f_back
    warnings.warn_explicit(
        warning, type(warning), frame.f_code.co_filename, frame.f_lineno,
        module=frame.f_globals.get("__name__", "<string>"), registry={}, module_globals=frame.f_globals,
    )  # fmt: skip
