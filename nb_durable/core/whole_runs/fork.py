"""Forking a run: a new run that starts from the first N recorded steps of another.

The kept steps are copied as their lines (byte for byte, after a new ``run_started`` that
names where they came from), so running the same code on the fork replays them and goes
live after them. A damaged log can still be forked, up to the last step before its damage that
has its result: that is how its intact prefix is saved.
"""

from __future__ import annotations

import time

from ...errors import InvalidRunIdError, SettingError, StoreError, StoreFullError
from ..codec import encode
from ..events import RunStarted
from ..history import History
from ..log import EventLog
from ..stores import StoreSpec, check_run_id, opened

__all__ = ["fork"]


def fork(run_id: str, new_run_id: str, *, at: int, root: StoreSpec = None, to: StoreSpec = None) -> EventLog:
    """Start run ``new_run_id`` from the first ``at`` recorded steps of ``run_id``.

    The new run (in ``to``, or the same store) is returned open for writing, its cursor at
    the start, so running the same code replays the kept steps and goes live after them.
    """
    with opened(root) as source:
        history = History.load(run_id, source.load(check_run_id(run_id)), salvage=True)
        damaged = history.damaged
        # Of a damaged log, only the steps before the damage that have their result: a step
        # whose result line is the damaged one would otherwise look in flight and run again.
        count = history.step_count if damaged is None or damaged.intact is None else damaged.intact
        steps = "1 step" if count == 1 else f"{count} steps"
        which = f"which has {steps}" if damaged is None else f"whose log holds {steps} whole before its damage at line {damaged.line}"
        if not isinstance(at, int) or isinstance(at, bool) or not 0 <= at <= count:
            raise SettingError(
                setting="at", value=at,
                reason=f"of a fork of run {run_id!r}, {which}, must be a whole number from 0 to {count}",
            )  # fmt: skip
    # The source is closed before the fork opens (the same store, if ``to`` is not given).
    log = EventLog(new_run_id, to if to is not None else root)
    if log.writer.history.lines:
        log.close()
        raise InvalidRunIdError(  # a mistake in what was asked (usage), as run --new with a taken id
            f"cannot fork into {new_run_id!r}: that run already exists in {log.store.url}; choose a new id",
            run_id=new_run_id,
        )
    try:
        started = history.started
        head = RunStarted(
            seq=0,
            ts=round(time.time(), 3),
            run_id=new_run_id,
            settings=dict(started.settings) if started else {},
            forked_from={"run_id": run_id, "at": at},
        )
        log.writer.append_lines([encode(head)[:-1], *history.lines[1 : history.lines_before(at)]])
    except BaseException as e:
        # A fork cut short is no run: its empty log would be taken for a run started and left.
        left = ""
        try:
            log.writer.delete()
        except StoreError as gone:
            left = f"; its unfinished log could not be removed ({gone}): delete run {new_run_id!r} first"
        log.close()
        if isinstance(e, StoreFullError):
            raise StoreFullError(
                doing=f"cannot fork run {run_id!r} into {new_run_id!r}", path=e.path, code=e.errno,
                then="fork again: the fork was not made" + (left or f", and no run {new_run_id!r} was left"),
            ) from None
        raise
    return log
