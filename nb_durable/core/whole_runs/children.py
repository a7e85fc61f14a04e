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
from collections.abc import Mapping, Sequence
from typing import Any

from ...errors import LogCorruptedError, RunError, RunNotFoundError
from ..codec import pinned_hash
from ..events import RunStarted, StepCompleted
from ..history import History
from ..index.rows import child_parent, index_of
from ..log import EventLog, run_step
from ..stores import Store, check_run_id

__all__ = ["below_prefix", "child_id", "child_ids", "children_among", "children_of", "descendants", "parent_of", "parents", "start_child"]

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_MAX = 128


_KEPT = _MAX - 14
"""How much of a parent's id a child's id keeps when the whole would be too long (``child_id``)."""


def child_id(parent_id: str, step_id: str) -> str:
    """The id of the child run started by step ``step_id`` of run ``parent_id`` (always the same)."""
    tail = _UNSAFE.sub("-", step_id).strip("-.")
    full = f"{parent_id}.{tail}"
    if len(full) > _MAX or ".." in full:
        digest = hashlib.sha256(f"{parent_id}\n{step_id}".encode()).hexdigest()[:12]
        full = f"{parent_id[:_KEPT]}.{digest}".replace("..", ".")
    return check_run_id(full)


def below_prefix(run_id: str) -> str:
    """What the id of every run below ``run_id`` in its tree starts with (``child_id``): its id and
    a dot, or, for an id too long to be kept whole, as much of it as a child's id keeps. Only a
    prefix: a run's parent record says whose child it is."""
    return run_id + "." if len(run_id) <= _KEPT else run_id[:_KEPT]


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
    """The run that started ``run_id``, if it is a child run (and its log can be read): its log's word."""
    try:
        history = History.load(run_id, store.load(run_id), salvage=True)
    except (LogCorruptedError, RunNotFoundError):
        return None
    return child_parent(history)


def parents(store: Store, ids: Sequence[str]) -> dict[str, str | None]:
    """Whose child each of ``ids`` is (None: not a child run), as its log says (``parent_of``),
    read from its index row where the rule in use made it (``IndexRow.child_of``: the same rule,
    no log read). A run with no such row (an older nb_durable's, an unreadable or empty log, a
    store with no index) is read from its log, so no row is believed that the log might deny.
    Only a dotted id can be a child (``child_id``): others are None unread."""
    dotted = [run_id for run_id in ids if "." in run_id]
    indexed = index_of(store) if dotted else None
    rows = {row.run_id: row for row in indexed.index_rows(dotted) if row.current} if indexed is not None else {}
    out: dict[str, str | None] = dict.fromkeys(ids)
    for run_id in dotted:
        row = rows.get(run_id)
        out[run_id] = row.child_of if row is not None else parent_of(store, run_id)
    return out


def children_among(store: Store, ids: Sequence[str]) -> dict[str, list[str]]:
    """Each run's children among ``ids``, in their order (``children_of`` their ``parents``)."""
    return children_of(parents(store, ids))


def children_of(parent: Mapping[str, str | None]) -> dict[str, list[str]]:
    """Each run's children by ``parent`` (``parents``), in its order: a child's id starts with its
    parent's and a dot, or what of a long one it keeps (``below_prefix``), and the parent its log
    names confirms it, so a run that
    merely looks like a child (a fork named ``p.v2``) is never taken for one."""
    out: dict[str, list[str]] = {}
    for run_id, above in parent.items():
        if above is not None and run_id != above and run_id.startswith(below_prefix(above)):
            out.setdefault(above, []).append(run_id)
    return out


def child_ids(store: Store, run_id: str, among: list[str] | None = None) -> list[str]:
    """The children of ``run_id``, in the order of ``among`` (the store's run ids, if already listed)."""
    prefix = below_prefix(run_id)
    ids = store.run_ids() if among is None else among
    return children_among(store, [c for c in ids if c.startswith(prefix) and c != run_id]).get(run_id, [])


def descendants(
    store: Store, run_id: str, among: list[str] | None = None, *, children: Mapping[str, list[str]] | None = None
) -> list[str]:
    """Every run below ``run_id`` in its tree, each parent before its children (``children``: the
    store's ``children_among``, if already made). Every run below has the same prefix
    (``below_prefix``), so only those are looked up."""
    if children is None:
        prefix = below_prefix(run_id)
        ids = store.run_ids() if among is None else among
        children = children_among(store, [c for c in ids if c.startswith(prefix) and c != run_id])
    out: list[str] = []
    todo = [run_id]
    while todo:
        kids = children.get(todo.pop(0), [])
        out.extend(kids)
        todo.extend(kids)
    return out
