"""Claiming runs for a worker: the pending runs whose lease is free, highest priority first.

A store with a claim of its own (SQLite: one ``BEGIN IMMEDIATE`` transaction; PostgreSQL: one
``FOR UPDATE SKIP LOCKED`` statement) marks what it hands out as claimed for
``CLAIM_SECONDS``, so workers polling together take different runs. Any other indexed store
(memory, JSONL) is claimed here from its rows and ``held()``, with the claims remembered in
this process. Either way a claim is only a hint: the worker then takes the run's lease, which
alone decides who writes, so a claim lost or doubled costs a look, never a step run twice.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

from .run_index import CLAIM_SECONDS, IndexRow, index_of

__all__ = ["claim_runs"]

_claimed: dict[tuple[str, str], float] = {}
_lock = threading.Lock()


def claim_runs(
    store: Any,
    limit: int,
    *,
    exclude: Sequence[str] = (),
    tags: Sequence[str] = (),
    idle_before: float = float("inf"),
) -> list[IndexRow]:
    """Up to ``limit`` runs for a worker to take now: pending, lease free, not in ``exclude``,
    started with every tag of ``tags``, waiting since before ``idle_before``; in the order to take them."""
    own = getattr(store, "claim", None)
    if callable(own):
        found: list[IndexRow] = own(limit, exclude=exclude, tags=tags, idle_before=idle_before)
        return found
    indexed = index_of(store)
    if indexed is None:
        return []
    now = time.time()
    held = indexed.held()
    skip = set(exclude)
    with _lock:
        rows = [
            r
            for r in indexed.index_rows()
            if r.pending
            and r.run_id not in held
            and r.run_id not in skip
            and set(tags) <= set(r.tags)
            and (r.queued_at or 0.0) <= idle_before
            and _claimed.get((store.key, r.run_id), 0.0) < now
        ]
        rows.sort(key=lambda r: (-r.priority, r.queued_at or 0.0))
        picked = rows[:limit]
        for r in picked:
            _claimed[(store.key, r.run_id)] = now + CLAIM_SECONDS
    return picked
