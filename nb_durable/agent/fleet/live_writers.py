"""A run whose writer's session ended holding its lease, while the writer may live on.

On PostgreSQL a lease is a lock of its writer's session: when the session ends (the server
restarts, a network cut, the server ends it) the lease is free, though the writer may live on in
the middle of a step (a model call being answered, a tool running). At its next write it takes
the lease back and goes on (``core.stores.postgres.reconnect``), unless a worker took the run
meanwhile: then the step in flight is done twice (the model call paid twice; the tool in doubt,
its result refused). The database cannot tell a writer that lives from one that died, but two
things can. On the writer's own host its process does. And a session that ended because the
server restarted since the writer took the lease says nothing of its process, which likely
lives, wherever it runs. A worker leaves such a run (``PostgresStore.left_by``: the name a
release would have cleared is still there) for up to ``LIVE_WRITER_GRACE`` seconds from when it
first saw it so, then takes it as it takes any. A writer on another host whose session ended
without a restart (its process killed, its machine gone: the usual case), or a dead one of this
host, is taken over at once, as before.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ...core.holders import describe_holder, lives_here, on_this_host
from ...core.stores import StoreSpec, opened

__all__ = ["LIVE_WRITER_GRACE", "LiveWriters"]

LIVE_WRITER_GRACE = 60.0
"""Seconds a worker leaves a run to a writer that may live on, which takes the lease back at its
next write: a model call or a tool in flight ends within that as a rule. A writer that lives on
but never writes again (a kernel whose run stopped with the server down), or that died after
all, holds the run no longer."""


class LiveWriters:
    """The runs a worker leaves to writers that may live on, and since when it has seen each so."""

    def __init__(self, grace: float = LIVE_WRITER_GRACE, clock: Callable[[], float] = time.monotonic) -> None:
        self.grace = grace
        self._clock = clock
        self._seen: dict[str, float] = {}

    def leave_until(self, store: StoreSpec, run_id: str) -> tuple[float, str] | None:
        """When (this clock) to look at run ``run_id`` again, and why it is left till then, if the
        writer whose session ended holding its lease lives on this host, or lost it as the server
        restarted; else None: take it."""
        with opened(store) as found:
            left = getattr(found, "left_by", None)  # PostgreSQL's: no other store's lease outlives its session
            left_by: dict[str, Any] | None = left(run_id) if left is not None else None
        if lives_here(left_by):
            lost = "lost its lease with its database session and lives on"
        elif left_by and left_by.get("restarted") and not on_this_host(left_by):
            lost = "lost its lease as the database server restarted, and may live on"
        else:
            self._seen.pop(run_id, None)
            return None
        now = self._clock()
        until = self._seen.setdefault(run_id, now) + self.grace
        if until <= now:
            return None
        why = f"its writer ({describe_holder(left_by)}) {lost}, so it takes the lease back at its next write: left to it for {until - now:.0f} s more"
        return until, why
