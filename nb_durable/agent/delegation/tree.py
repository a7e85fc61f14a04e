"""What a run's tree cost: the sum of what each of its logs records.

The tree itself (children, descendants) is ``core.whole_runs.children``'s; each log is priced as every
reader of a log prices it (``views_of``), so the roll-up equals the sum of the logs. A listing
bills the same sums from the run index instead (``rows_below``, ``index_view``, ``tree_views``),
reading no log: the index's figures are those sums, kept as each step is recorded.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from ...core.runs import RunSummary, list_runs, read_run
from ...core.status import Status
from ...core.stores import Store
from ...core.whole_runs.children import child_id, child_ids, descendants, parent_of
from ..display.step_ids import StepId
from ..display.views import ALL_SESSIONS, RunView, StepView, Tally, run_view_of, views_of
from ..money.cost import Cost, Price
from ..money.figures import cost_of_figures

__all__ = [
    "child_ids",
    "child_times",
    "cost_of",
    "descendants",
    "index_view",
    "parent_of",
    "rows_below",
    "started_order",
    "tree_cost",
    "tree_order",
    "tree_views",
    "with_child_times",
    "with_children",
]


def cost_of(store: Store, run_id: str, prices: Mapping[str, Price] | None = None) -> Cost:
    """What one run's log records it cost (every recorded model call, paid when it ran)."""
    run, _ = views_of(read_run(run_id, store), prices)
    return run.cost


def tree_cost(store: Store, run_id: str, prices: Mapping[str, Price] | None = None) -> Cost:
    """What the runs below ``run_id`` cost, added up (not ``run_id`` itself)."""
    total = Cost()
    for child in descendants(store, run_id):
        total = total + cost_of(store, child, prices)
    return total


def with_children(
    run: RunView, store: Store, prices: Mapping[str, Price] | None = None, *, among: list[str] | None = None
) -> tuple[RunView, int]:
    """``run``'s view billing its whole tree (``RunView.children``: its own cost kept beside it),
    and how many runs are below it (``among``: run ids that hold every run below it, if listed)."""
    ids = store.run_ids() if among is None else among
    kids = child_ids(store, run.run_id, ids)  # each confirmed by its log: read once, not again for the count
    below = [*kids, *(run_id for kid in kids for run_id in descendants(store, kid, ids))]
    if not below:
        return run, 0
    total = run.cost
    for child in below:
        total = total + cost_of(store, child, prices)
    return run.but(cost=total, own=run.cost, children=len(kids)), len(below)


def rows_below(store: Store, run_ids: Iterable[str]) -> list[RunSummary]:
    """The index rows of every run below ``run_ids`` in their trees, each parent's before its
    children's: found level by level, one indexed listing each (``list_runs(parent=...)``), never
    by every run id of the store, and no log read but where ``list_runs`` reads one (a row an
    older nb_durable wrote, a store with no index). A run forked from another names it as parent
    too, so only a child (``RunSummary.child_of``) counts."""
    seen = set(run_ids)
    below: list[RunSummary] = []
    level = list(seen)
    while level:
        found = [s for s in list_runs(store, parent=level) if s.child_of is not None and s.run_id not in seen]
        seen.update(s.run_id for s in found)
        below += found
        level = [s.run_id for s in found]
    return below


def index_view(summary: RunSummary) -> RunView:
    """A run's header view from its index row: its status, steps and cost, with no log read."""
    tally = Tally(steps=summary.steps, cost=cost_of_figures(summary.figures))
    output = summary.output if isinstance(summary.output, dict) else None
    return run_view_of(
        summary.run_id, summary.settings, tally, status=Status(summary.status), scope=ALL_SESSIONS,
        location=summary.location, elapsed=(summary.updated_at or 0) - (summary.started_at or 0),
        output=output, error=summary.error or "",
    )  # fmt: skip


def child_times(store: Store, run_id: str) -> dict[str, float]:
    """How long each run below ``run_id`` ran, in ms, by its index row (its first event to its
    last: ``rows_below``, no log read)."""
    return {
        s.run_id: (s.updated_at - s.started_at) * 1000
        for s in rows_below(store, [run_id])
        if s.started_at is not None and s.updated_at is not None
    }


def with_child_times(run_id: str, steps: Iterable[StepView], times: Mapping[str, float]) -> list[StepView]:
    """Run ``run_id``'s ``steps`` with the time of each delegate call's answer its child's
    (``times``: ``child_times``'), as its live row has it (``Delegation.took``). Its recorded time
    is only how long the run waited for the child once it asked: a second child run side by side
    with the first ended while the run waited on that one, and read ~0.00s. The call's tool step
    and the step that started its child share the call's turn, index and tool use id."""
    steps = list(steps)
    started = {_call(v): child_id(run_id, v.step_id) for v in steps if v.kind == "delegate"}
    return [v.but(ms=times[started[_call(v)]]) if v.kind == "tool" and started.get(_call(v)) in times else v for v in steps]


def _call(view: StepView) -> tuple[int, int, str]:
    step = StepId.parse(view.step_id)
    return step.turn, step.index, step.tool_use_id


def tree_order(ids: list[str], parent: Mapping[str, str | None]) -> list[tuple[str, int]]:
    """``ids`` with each run's children right after it: (run id, depth), roots in the given order."""
    kids: dict[str, list[str]] = {}
    for run_id in ids:
        above = parent.get(run_id)
        if above is not None and above in parent:
            kids.setdefault(above, []).append(run_id)
    out: list[tuple[str, int]] = []

    def visit(run_id: str, depth: int) -> None:
        out.append((run_id, depth))
        for kid in sorted(kids.get(run_id, []), key=started_order):
            visit(kid, depth + 1)

    for run_id in ids:
        above = parent.get(run_id)
        if above is None or above not in parent:
            visit(run_id, 0)
    return out


def started_order(run_id: str) -> list[tuple[int, str]]:
    """A child id's sort key by its numbers (``delegate-10-0`` after ``delegate-2-0``): the order
    its parent's turns and calls started them, where text order put turn 10 before turn 2."""
    return [(int(part) if part.isdigit() else -1, part) for part in re.split(r"(\d+)", run_id)]


def tree_views(
    views: Mapping[str, RunView], parent: Mapping[str, str | None], below: Mapping[str, RunView] | None = None
) -> list[tuple[str, RunView, int]]:
    """Each run (in ``views``' order, roots first) with its view and depth, children right after
    their parent; a parent's view bills its whole tree (``with_children``'s), its own and every
    run below it, listed or not (``below``: the views of the runs not listed, ``parent`` naming
    theirs too), so a page or a filter never changes what a parent cost."""
    order = tree_order(list(views), {r: parent.get(r) for r in views})
    every = {**(below or {}), **views}
    totals = dict(every)
    kids: dict[str, int] = {}
    # Deepest first, so each run's total is whole before it is added into its parent's.
    for run_id in sorted(every, key=lambda r: -_depth(r, parent)):
        above = parent.get(run_id)
        if above is not None and above in totals:
            totals[above] = totals[above].but(cost=totals[above].cost + totals[run_id].cost)
            kids[above] = kids.get(above, 0) + 1
    shown = {r: totals[r].but(own=every[r].cost, children=kids[r]) if r in kids else totals[r] for r in views}
    return [(run_id, shown[run_id], depth) for run_id, depth in order]


def _depth(run_id: str, parent: Mapping[str, str | None]) -> int:
    depth, seen = 0, {run_id}
    above = parent.get(run_id)
    while above is not None and above not in seen:
        seen.add(above)
        depth += 1
        above = parent.get(above)
    return depth
