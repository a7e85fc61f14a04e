"""Child runs: a run started by a step of another, with an id derived from that step.

A child is an ordinary run (its own log, lease and settings) whose ``run_started`` names its
parent run and step. Its id is a function of the parent's id and the step's (``child_id``),
so a replay of the parent can never start a second child. ``start_child`` records the
parent's step (its result names the child) and the child's ``run_started`` so that a crash
leaves both or neither: one transaction on SQLite and PostgreSQL; on JSONL the child's line
first, then the parent's, so a parent never names a child that does not exist. A child left
dangling by a crash between those two writes is adopted, not started again, when the parent's
replay reaches the step: it already names this parent and step. A fork's replay of a start
it copied names the fork's own copy of the child (``core.whole_runs.fork``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

from ...errors import LogCorruptedError, RunError, RunNotFoundError
from ..codec import pinned_hash
from ..events import RunStarted, StepCompleted
from ..history import History
from ..index.rows import child_parent
from ..log import EventLog, run_step
from ..stores import Store, check_run_id

__all__ = ["child_id", "child_ids", "descendants", "parent_of", "start_child"]

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_MAX = 128


def child_id(parent_id: str, step_id: str) -> str:
    """The id of the child run started by step ``step_id`` of run ``parent_id`` (always the same)."""
    tail = _UNSAFE.sub("-", step_id).strip("-.")
    full = f"{parent_id}.{tail}"
    if len(full) > _MAX or ".." in full:
        digest = hashlib.sha256(f"{parent_id}\n{step_id}".encode()).hexdigest()[:12]
        full = f"{parent_id[: _MAX - 14]}.{digest}".replace("..", ".")
    return check_run_id(full)


def start_child(
    parent: EventLog,
    step_id: str,
    child: str,
    settings: dict[str, Any],
    *,
    request_hash: str | None = None,
    trace: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Record step ``step_id`` of ``parent`` as the start of run ``child`` with ``settings``
    (and ``trace``, the trace context of the step, if the session traces it: ``RunStarted.trace``).

    Replayed, the step hands back its record and touches no child. Live, it takes the child's
    lease for the time of the write, writes the pair (see the module docstring), and releases
    it; a child that a crash left without its parent's record is adopted. The result is
    ``{"child": child}``.
    """
    request_hash = pinned_hash(request_hash)  # as run_step records one: the live write below must agree
    result = {"child": child}
    if parent.replaying:
        recorded: dict[str, Any] = run_step(parent, step_id, _never(child), request_hash=request_hash)
        return _own(parent, recorded)
    link = {"run_id": parent.run_id, "step": step_id}
    position = parent.cursor
    with EventLog(child, parent.store, durability=parent.durability) as log:
        if log.writer.history.lines:
            found = log.parent
            if found != link:
                raise RunError(
                    f"cannot start child run {child!r} for step {step_id!r} of run {parent.run_id!r}: a run "
                    f"of that id already exists and {'was started by ' + repr(found) if found else 'is not a child run'}. "
                    "Delete it (nb-durable delete) or fork the parent.",
                    run_id=parent.run_id,
                )
            # Dangling after a crash between the two writes (JSONL): the child is adopted.
            parent.complete_step(position, step_id, request_hash, result, 0.0, what=f"step {step_id!r}")
            return result
        fields = {"step": step_id, "hash": request_hash, "result": result, "ms": 0.0}
        started = {"run_id": child, "settings": settings, "parent": link, **({"trace": dict(trace)} if trace else {})}
        parent.writer.append_with(StepCompleted, fields, log.writer, RunStarted, started)
        parent.cursor = position + 1
    return result


def _own(parent: EventLog, recorded: dict[str, Any]) -> dict[str, Any]:
    """A replayed start's record, naming the fork's own copy of the child where the recorded
    start is one a fork copied from its source (``core.whole_runs.fork``)."""
    started = parent.writer.history.started
    mapped = (started.forked_from or {}).get("children") if started is not None else None
    if isinstance(mapped, dict) and isinstance(recorded, dict) and recorded.get("child") in mapped:
        return {**recorded, "child": mapped[recorded["child"]]}
    return recorded


def _never(child: str) -> Any:
    def run() -> Any:
        raise RunError(f"the start of child run {child!r} was to be replayed, not run", run_id=child)

    return run


def parent_of(store: Store, run_id: str) -> str | None:
    """The run that started ``run_id``, if it is a child run (and its log can be read)."""
    try:
        history = History.load(run_id, store.load(run_id), salvage=True)
    except (LogCorruptedError, RunNotFoundError):
        return None
    return child_parent(history)


def child_ids(store: Store, run_id: str, among: list[str] | None = None) -> list[str]:
    """The children of ``run_id``, sorted (``among``: the store's run ids, if already listed).

    A child's id starts with its parent's and a dot (``child_id``); the parent its log names
    confirms it, so a run that merely looks like a child is never taken for one."""
    prefix = run_id + "."
    ids = store.run_ids() if among is None else among
    return [c for c in ids if c.startswith(prefix) and parent_of(store, c) == run_id]


def descendants(store: Store, run_id: str, among: list[str] | None = None) -> list[str]:
    """Every run below ``run_id`` in its tree, each parent before its children."""
    ids = store.run_ids() if among is None else among
    out: list[str] = []
    todo = [run_id]
    while todo:
        kids = child_ids(store, todo.pop(0), ids)
        out.extend(kids)
        todo.extend(kids)
    return out
