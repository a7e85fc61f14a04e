"""What can go wrong with one run, or in finding one: the errors the core raises about runs.

Messages are built from structured fields (keyword-only constructors), so a message cannot
drift from the fields a program reads. The whole tree is drawn in ``nb_durable.errors``.
"""

from __future__ import annotations

from collections.abc import Sequence

from .base import NbDurableError

__all__ = [
    "DivergenceError",
    "ForeignRunError",
    "InDoubtError",
    "InvalidRunIdError",
    "InvalidStepIdError",
    "LeaseLostError",
    "LogCorruptedError",
    "NewerLogError",
    "NoUnfinishedRunError",
    "RunError",
    "RunLockedError",
    "RunNotFoundError",
    "StepResultError",
    "UnencodableTextError",
]


class NoUnfinishedRunError(NbDurableError, LookupError):
    """A command named no run, and the store holds none it could pick (unfinished to resume,
    finished to continue, any at all to show)."""

    outcome = "usage"

    def __init__(
        self,
        *,
        store: str,
        finished: bool = False,
        doing: str | None = None,
        agents: bool = False,
        running: tuple[str, str, str] | None = None,
        missing: str | None = None,
    ) -> None:
        # list_runs(...) is said in each front end's words (nb-durable runs, %agent_runs).
        # ``running``: the newest run another session writes now (its id, its holder in words,
        # how to stop it), when no run is left to resume but that one. ``missing``: why the store
        # is not there at all (a StoreNotFoundError's words), which looking for one made nothing of.
        if missing is not None:
            message = (
                f"no unfinished {'agent ' if agents else ''}run in {store} to resume: {missing}. "
                "Name the store that holds your runs (--store), or start a run first."
            )
        elif running is not None:
            run_id, holder, stop = running
            message = (
                f"no {'agent ' if agents else ''}run in {store} to resume: the unfinished one, {run_id!r}, is "
                f"still running, written by {holder}. Wait for it to end, or {stop} and resume it then; "
                f"list_runs({store!r}) lists them all."
            )
        elif doing is not None:
            message = (
                f"no run in {store} to {doing}: it holds none yet. Name the store that holds your runs "
                "(--store), or start a run first."
            )
        elif finished:
            message = (
                f"no finished run in {store} to continue: name the run to continue, or start a new "
                f"one; list_runs({store!r}) lists them all."
            )
        elif agents:
            message = (
                f"no unfinished agent run in {store} to resume: every agent run there has completed (or "
                "there are none; a run of plain steps, written by EventLog or durable_run, goes on when "
                f"its own code runs again). Name the run to resume; list_runs({store!r}) lists them all."
            )
        else:
            message = (
                f"no unfinished run in {store} to resume: every run there has completed (or there are "
                f"none). Name the run to resume; list_runs({store!r}) lists them all."
            )
        super().__init__(message)
        self.store = store


class RunError(NbDurableError):
    """Something is wrong with one run; ``run_id`` names it."""

    def __init__(self, message: str, *, run_id: str) -> None:
        super().__init__(message)
        self.run_id = run_id


class InvalidRunIdError(RunError, ValueError):
    """The id cannot name a run (empty, too long, path separators, ``..``)."""

    outcome = "usage"


class RunNotFoundError(RunError, LookupError):
    """The store holds no run with that id (``known`` lists a few that it does hold)."""

    outcome = "usage"

    def __init__(
        self, *, run_id: str, where: str, known: Sequence[str] = (), reason: str = "", store: str = "", what: str = "run"
    ) -> None:
        if reason:
            message = f"{what} {run_id!r} {reason}"  # what: a batch is named as runs are
        else:
            if known:
                listed = ", ".join(repr(k) for k in list(known)[:5]) + (", ..." if len(known) > 5 else "")
                # list_runs(...) is said in each front end's words (nb-durable runs, %agent_runs).
                hint = f"It has {len(known)} run(s): {listed}; list_runs({store!r}) lists them all."
            else:
                hint = "It has no runs yet."
            message = f"no run {run_id!r} in {where}. {hint}"
        super().__init__(message, run_id=run_id)
        self.where = where
        self.known = tuple(known)


class RunLockedError(RunError):
    """Another writer holds the run's lease; ``holder`` describes it (pid, host, since)."""

    outcome = "locked"

    def __init__(self, message: str, *, run_id: str, holder: dict[str, object] | None) -> None:
        super().__init__(message, run_id=run_id)
        self.holder = holder


class LeaseLostError(RunLockedError):
    """This writer no longer holds the run (superseded in this process, or its connection died)."""


class LogCorruptedError(RunError):
    """A log is damaged somewhere a crash cannot explain; ``location`` and ``line`` say where,
    ``intact`` how many steps before it are whole (what a fork can keep), when known."""

    def __init__(
        self, *, run_id: str, location: str, line: int, why: str, foreign: bool = False, intact: int | None = None
    ) -> None:
        if foreign:
            message = (
                f"{location} is not an nb_durable log: at line 1, {why}. If this file belongs to "
                "another tool, move it out of the runs folder."
            )
        elif line == 1:
            message = (
                f"run {run_id!r} is damaged at line 1 of {location}: {why}. This is not a torn write "
                "(those only affect the last line), so nothing was dropped. Restore the file from a copy; "
                "with no whole first line no step can be kept (a fork has nothing to copy), so without a "
                "copy, move the file out of the runs folder and start the task again as a new run."
            )
        else:
            message = (
                f"run {run_id!r} is damaged at line {line} of {location}: {why}. This is not a "
                "torn write (those only affect the last line), so nothing was dropped. Restore the "
                "file from a copy, or fork the intact prefix"
                + ("" if intact is None else " (no whole step)" if intact == 0 else " (its first step)" if intact == 1 else f" (its first {intact} steps)")
                + f" into a new run with fork({run_id!r}, new_id, at={'N' if intact is None else intact})."
            )
        super().__init__(message, run_id=run_id)
        self.location = location
        self.line = line
        self.why = why
        self.intact = intact


class ForeignRunError(LogCorruptedError):
    """A log records another run than the id it was opened as (a file copied or renamed into place)."""

    outcome = "usage"

    def __init__(self, *, run_id: str, recorded: str, location: str) -> None:
        RunError.__init__(
            self,
            f"{location} records run {recorded!r}, not {run_id!r}: it was copied or renamed into place. "
            f"Nothing was read or written. Put it back under its own id ({recorded!r}), or delete it; to go on "
            f"with its steps under a new id, put it back first, then fork it: fork({recorded!r}, new_id, at=N).",
            run_id=run_id,
        )
        self.location = location
        self.line = 1
        self.why = f"it records run {recorded!r}"
        self.recorded = recorded


class NewerLogError(LogCorruptedError):
    """A log holds a line written by a newer nb_durable (a newer schema version)."""

    outcome = "usage"

    def __init__(self, *, run_id: str, location: str, line: int, version: int, reads: int) -> None:
        RunError.__init__(
            self,
            f"run {run_id!r} has a line written by a newer nb_durable (line {line} of {location}: log "
            f"schema v{version}; this one reads up to v{reads}). Nothing was "
            "dropped or changed: upgrade nb_durable (pip install -U nb-durable) to read or resume it.",
            run_id=run_id,
        )
        self.location = location
        self.line = line
        self.why = f"log schema v{version}"
        self.version = version


class InvalidStepIdError(RunError, ValueError):
    """A step id is empty, not a string, or already used by another step of the run."""

    outcome = "usage"


class DivergenceError(RunError):
    """The code asked for a different step than the log recorded at ``position``."""

    outcome = "usage"

    def __init__(self, *, run_id: str, position: int, recorded: str, requested: str, why: str) -> None:
        super().__init__(
            f"run {run_id!r} diverged at step {position}: the log recorded {recorded}, but the "
            f"code asked for {requested} ({why}). The code or its inputs changed since the run "
            "was recorded. "
            + (
                f"Start a new run, or keep the steps that still match with fork({run_id!r}, 'new-id', at={position}) "
                "and continue that one."
                if position
                else f"No step before it matches, so there is nothing to keep: start a new run, or delete {run_id!r} "
                "(nb-durable delete) to record it again under its id."
            ),
            run_id=run_id,
        )
        self.position = position
        self.recorded = recorded
        self.requested = requested


class InDoubtError(RunError):
    """An external step started but never completed, and the in-doubt policy is ``fail``."""

    outcome = "in_doubt"

    def __init__(self, *, run_id: str, step_id: str, started: str) -> None:
        super().__init__(
            f"step {step_id!r} of run {run_id!r} started at {started} and its result was never "
            "recorded: its process died, or its store refused the write, during an external effect, "
            "so whether the effect happened is unknown. "
            "Check by hand, then resume with in_doubt='rerun' to run it again or in_doubt='skip' "
            "to go on without it (the decision is recorded).",
            run_id=run_id,
        )
        self.step_id = step_id


class StepResultError(RunError, TypeError):
    """A step returned a value that JSON cannot hold; nothing was recorded for it."""

    def __init__(self, *, run_id: str, step_id: str, what: str, reason: str, after: str = "") -> None:
        super().__init__(
            f"{what} of run {run_id!r} returned {reason}. Return JSON data: dict, list, str, "
            f"int, float, bool or None.{after}",
            run_id=run_id,
        )
        self.step_id = step_id


class UnencodableTextError(RunError, ValueError):
    """Text to record (a task, a setting, an output) holds a lone surrogate, which UTF-8 cannot hold."""

    outcome = "usage"

    def __init__(self, *, run_id: str, what: str, sample: str) -> None:
        super().__init__(
            f"cannot record {what} of run {run_id!r}: it holds text that UTF-8 cannot hold ({sample!r}, "
            "a lone surrogate: what Python makes of a file name or argument that is not UTF-8). Nothing "
            "was written. Pass UTF-8 text; os.fsencode(text).decode('utf-8', 'backslashreplace') keeps "
            "every byte.",
            run_id=run_id,
        )
