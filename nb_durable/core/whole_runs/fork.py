"""Forking a run: a new run that starts from the first N recorded steps of another.

The kept steps are copied as their lines (byte for byte, after a new ``run_started`` that
names where they came from), so running the same code on the fork replays them and goes
live after them. A damaged log can still be forked, up to the last step before its damage that
has its result: that is how its intact prefix is saved.

A fork shares no child run with its source. Each child a kept step started
(``core.whole_runs.children``) is forked with it, whole, under the id the fork's own step
would have given it, and the fork's ``run_started`` maps the one to the other
(``forked_from["children"]``), which the fork's replay of the start follows. So a child the
source left unfinished goes on in the fork's tree, in its bill and its budget, while the
source's is left as it was; a finished one replays its answer and runs nothing.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from ...errors import (
    InvalidRunIdError,
    LogCorruptedError,
    RunError,
    RunNotFoundError,
    SettingError,
    StoreError,
    StoreFullError,
    StoreReadOnlyError,
    StoreShortError,
)
from ..codec import encode
from ..events import RunStarted
from ..history import History
from ..log import EventLog
from ..stores import Store, StoreSpec, check_run_id, opened
from .children import child_id

__all__ = ["fork"]


def fork(run_id: str, new_run_id: str, *, at: int, root: StoreSpec = None, to: StoreSpec = None) -> EventLog:
    """Start run ``new_run_id`` from the first ``at`` recorded steps of ``run_id``.

    The new run (in ``to``, or the same store) is returned open for writing, its cursor at
    the start, so running the same code replays the kept steps and goes live after them.
    The children its kept steps started are forked with it (see the module docstring).
    """
    return _fork(run_id, new_run_id, at, root, to, None)[0]


def _fork(
    run_id: str,
    new_run_id: str,
    at: int | None,
    root: StoreSpec,
    to: StoreSpec,
    parent: Mapping[str, Any] | None,
    read: History | None = None,
) -> tuple[EventLog, list[str]]:
    """``fork``, and every run it copied below the fork, each parent before its children;
    ``at`` None: every step the log holds whole (a child's), ``parent``: the fork's link as a
    child, ``read``: the run's log as its parent's fork read it (once: a log may be long)."""
    with opened(root) as source:
        history = read if read is not None else History.load(run_id, source.load(check_run_id(run_id)), salvage=True)
        damaged = history.damaged
        # Of a damaged log, only the steps before the damage that have their result: a step
        # whose result line is the damaged one would otherwise look in flight and run again.
        count = history.step_count if damaged is None or damaged.intact is None else damaged.intact
        steps = "1 step" if count == 1 else f"{count} steps"
        which = f"which has {steps}" if damaged is None else f"whose log holds {steps} whole before its damage at line {damaged.line}"
        at = count if at is None else at
        if not isinstance(at, int) or isinstance(at, bool) or not 0 <= at <= count:
            raise SettingError(
                setting="at", value=at,
                reason=f"of a fork of run {run_id!r}, {which}, must be a whole number from 0 to {count}",
            )  # fmt: skip
        children = _children_started(source, run_id, history, at)
        # A child is copied whole, its ending too: without it, a child that had ended would read
        # as one whose writer died, and be run again. Of a damaged log, only its steps' lines.
        whole = parent is not None and damaged is None
        kept = len(history.lines) if whole else history.lines_before(at)
    # The source is closed before the fork opens (the same store, if ``to`` is not given).
    try:
        log = EventLog(new_run_id, to if to is not None else root)
    except StoreReadOnlyError as e:
        if to is None:
            raise
        # A store of its own: copying it elsewhere would not help, another destination would.
        raise e.said_as(f"cannot fork run {run_id!r} into {new_run_id!r}", destination=True) from None
    if log.writer.history.lines:
        log.close()
        raise InvalidRunIdError(  # a mistake in what was asked (usage), as run --new with a taken id
            f"cannot fork into {new_run_id!r}: that run already exists in {log.store.url}; choose a new id",
            run_id=new_run_id,
        )
    made: dict[str, str] = {}
    below: list[str] = []
    try:
        for step, recorded, child, read in children:
            mine = child_id(new_run_id, step)
            copy, under = _fork(child, mine, None, root, to, {"run_id": new_run_id, "step": step}, read)
            copy.close()
            below += [mine, *under]
            # Keyed by the id the copied line names, which is what the fork's replay reads: of
            # a fork of a fork that is the first source's child, not the one it was copied from.
            made[recorded] = mine
        started = history.started
        head = RunStarted(
            seq=0,
            ts=round(time.time(), 3),
            run_id=new_run_id,
            settings=dict(started.settings) if started else {},
            forked_from={"run_id": run_id, "at": at, "lines": kept, **({"children": made} if made else {})},
            parent=parent,
        )
        log.writer.append_lines([encode(head)[:-1], *history.lines[1:kept]])
    except BaseException as e:
        # A fork cut short is no run: its empty log would be taken for a run started and left,
        # and the runs it copied below it would hang from a parent that was never written.
        left = ""
        for gone_run in [*reversed(below), new_run_id]:
            try:
                if gone_run == new_run_id:
                    log.writer.delete()
                else:
                    with EventLog(gone_run, log.store) as made_log:
                        made_log.writer.delete()
            except StoreError as gone:
                left += f"; its unfinished log could not be removed ({gone}): delete run {gone_run!r} first"
        log.close()
        doing = f"cannot fork run {run_id!r} into {new_run_id!r}"
        then = "fork again: the fork was not made" + (left or f", and no run {new_run_id!r} was left")
        if isinstance(e, StoreFullError):
            raise StoreFullError(doing=doing, path=e.path, code=e.errno, then=then) from None
        if isinstance(e, StoreShortError):  # a server short of capacity past its wait: said as a fork, too
            raise e.said_as(doing, then) from None
        raise
    return log, below


def _children_started(store: Store, run_id: str, history: History, at: int) -> list[tuple[str, str, str, History]]:
    """The child runs the first ``at`` steps of ``run_id`` started, as (step, the id its result
    line names, child, its log as read here, which the fork copies): each a
    step whose result names a child (``{"child": id}``) whose log names this run and step as
    its parent (a fork's own copies, through its map). A child since deleted is not there to
    fork; one whose log cannot be read refuses the fork (``RunError``)."""
    started = history.started
    mapped = (started.forked_from or {}).get("children") if started is not None else None
    moved: Mapping[str, str] = mapped if isinstance(mapped, Mapping) else {}
    out: list[tuple[str, str, str, History]] = []
    for step, seq in history.completions():
        if (history.position_of(step) or 0) >= at:
            break
        if b'"child"' not in history.lines[seq]:
            continue  # the common case, without decoding a result
        result = history.result_at(seq)
        if not (isinstance(result, dict) and set(result) == {"child"} and isinstance(result["child"], str)):
            continue
        child = str(moved.get(result["child"], result["child"]))
        try:
            read = History.load(child, store.load(check_run_id(child)), salvage=True)
        except LogCorruptedError as e:
            # Not knowing whose child it is, the fork would share it with its source, as forks
            # did before they copied children: the fork is refused, and where it may be taken said.
            position = history.position_of(step) or 0
            raise RunError(
                f"cannot fork run {run_id!r}: its step {step!r} started child run {child!r}, whose log "
                f"cannot be read ({e.why}, line {e.line} of {e.location}), so no copy of it can be made. "
                f"Fork at {position} or fewer steps (before that start), or restore {child!r} from a copy.",
                run_id=run_id,
            ) from None
        except (RunNotFoundError, SettingError, InvalidRunIdError):
            continue
        link = read.started
        if link is not None and link.parent == {"run_id": run_id, "step": step}:
            out.append((step, result["child"], child, read))
    return out
