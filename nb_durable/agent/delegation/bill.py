"""What a parent's children cost: each child's own log and every run below it, summed over the
children the parent has started, for the tree's one budget and the parent's header.

A child that ended for good is counted once (``counted``) and never read again; one that may
still run is read each time it is asked about, so a running sibling's spending shows.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from ...core.runs import RunRecord, read_run
from ...core.stores import Store
from ...errors import RunError, RunNotFoundError
from ..display.views import views_of
from ..money.cost import Cost
from .tree import cost_of, descendants, tree_cost

__all__ = ["TreeBill", "child_gone"]

_GOING_ON = frozenset({"queued", "running", "waiting", "interrupted", "in_doubt"})
"""A child's statuses while it may still run (and spend): it has not ended for good."""


def child_gone(parent: str, child: str, store: Store, step: str, position: int, so: str) -> RunError:
    """The error of a child whose log is gone (deleted while its parent was stopped, or by hand),
    said where the parent needs it: ``so``, what the parent cannot do without it."""
    return RunError(
        f"child run {child!r} of run {parent!r} is missing from {store.url}: its log is gone, so {so}. "
        f"Fork the parent before the step that started it ({step}): fork({parent!r}, new_id, at={position}), "
        "and resume the fork.",
        run_id=parent,
    )


class TreeBill:
    """The cost of the children of one session of a parent run (``children``: its list of them,
    in the order started, which the delegation keeps, with ``started``; ``prices``: the session's
    price table; ``parent``: the run's id)."""

    def __init__(self, store: Store, children: list[str], prices: Callable[[], Any], parent: str) -> None:
        self.store = store
        self.children = children
        self.prices = prices
        self.parent = parent
        self.started: dict[str, tuple[str, int]] = {}
        """Each child's start step in the parent's log, and its place: where a fork without it goes."""
        self._costs: dict[str, Cost] = {}
        self._session_costs: dict[str, Cost] = {}
        self._lock = threading.Lock()
        self.began = time.time()
        """When this session of the parent began: what its children recorded before is not its to bill."""

    def counted(self, child: str) -> None:
        """Count a child that ended for good, with every run below it."""
        with self._lock:
            prices = self.prices()
            self._costs[child] = cost_of(self.store, child, prices) + tree_cost(self.store, child, prices)

    def spent_this_session(self) -> Cost:
        """What this run's children paid, and saved by replay, since this session began: a
        resumed parent's header must not bill a child's earlier sessions again."""
        return self._sum(self._session_costs, since=self.began)

    def spent(self) -> Cost:
        """What this run's children recorded they cost (running ones: so far), for the tree's
        budget: a child whose log is gone (deleted) raises ``child_gone``, as what it paid is
        unknown and a budget checked without it would let the tree pay that again."""
        return self._sum(self._costs, strict=True)

    def held(self) -> tuple[float, int]:
        """What the children that may still run (a sibling started before a crash, not yet
        run) can spend beyond what they spent, by the budgets they recorded: theirs to spend,
        not a new sibling's."""
        usd, tokens = 0.0, 0
        for child in self.children:
            if child in self._costs:
                continue  # ended for good: what it spent is all it will spend
            try:
                record = read_run(child, self.store)
            except RunError:
                continue
            if record.summary.status not in _GOING_ON:
                continue
            given = record.summary.settings
            spent = self._whole(record)
            if given.get("max_usd") is not None:
                usd += max(0.0, float(given["max_usd"]) - spent.paid_dollars)
            if given.get("max_run_tokens") is not None:
                tokens += max(0, int(given["max_run_tokens"]) - spent.paid.total)
        return usd, tokens

    def _whole(self, record: RunRecord, since: float | None = None) -> Cost:
        """What a child and every run below it recorded they cost: a grandchild spends the
        tree's one budget too (its parent's log records none of it)."""
        prices = self.prices()
        cost = views_of(record, prices, since=since)[0].cost
        for below in descendants(self.store, record.summary.run_id):
            try:
                cost = cost + views_of(read_run(below, self.store), prices, since=since)[0].cost
            except RunError:
                continue
        return cost

    def _sum(self, ended: dict[str, Cost], since: float | None = None, *, strict: bool = False) -> Cost:
        total = Cost()
        for child in self.children:
            cost = ended.get(child)
            if cost is None:
                try:
                    record = read_run(child, self.store)
                except RunNotFoundError:
                    if strict:
                        so = "what it spent is unknown, and the tree's budget cannot be checked without it"
                        raise child_gone(self.parent, child, self.store, *self.started[child], so) from None
                    continue
                except RunError:
                    continue
                cost = self._whole(record, since)
                if record.summary.holder is None and record.summary.status not in ("interrupted", "in_doubt"):
                    ended[child] = cost  # ended for good: its log no longer changes
            total = total + cost
        return total
