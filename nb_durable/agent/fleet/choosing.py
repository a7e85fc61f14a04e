"""Which runs a resume worker takes: those whose writer died, and those submitted (queued).

A run is taken when its writer died: it is unfinished (no ``run_finished``: the process was
killed, the kernel culled, the pod stopped), or it was stopped by a worker's graceful stop;
and nobody holds its lease. A child run (``agent.delegation``) is taken like any other, unless
a person stopped its parent. Runs that ended for a reason a person must fix (failed, truncated,
refused, context full, budget exhausted, the turn limit, a person's interrupt) are never taken.
A run in doubt (its writer died inside an external tool call) is taken unless the worker's
``in_doubt`` policy is ``fail``, which leaves such runs to a person.

A queued run (``agent.fleet.batch.submit``: settings recorded, no step yet) is taken the same way:
highest ``priority`` first, then the oldest; starting it is resuming a run with nothing to
replay. A worker that dies before the run's first step leaves it queued again.

A worker remembers what it could not do: a run it failed to resume is taken again only once
its log has changed, and a run it passed over (``worker.PASS_OVER_FOR``) once its while is up.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterable

from ...core.index.claim import claim_runs, release_claims
from ...core.index.rows import CLAIM_SECONDS, STOPPED_BY_WORKER, index_of
from ...core.runs import RunSummary, indexed_summary, list_runs, summary_of_row
from ...core.stores import Store, opened
from ...core.whole_runs.children import parents
from ...errors import NbDurableError
from ..settings import InDoubtChoice

__all__ = ["REBUILDABLE", "RunChoosing", "writer_died"]


REBUILDABLE = ("anthropic", "demo")
"""Model kinds a worker can rebuild from the log alone (no client to pass)."""


def writer_died(summary: RunSummary) -> bool:
    """Whether a run's writer went away without ending it (or a worker stopped it)."""
    if summary.holder is not None:
        return False
    if summary.status in ("interrupted", "in_doubt") and summary.output is None and summary.error is None:
        return True  # no run_finished: agent runs always end with an output or an error
    return summary.status == "interrupted" and (summary.error or "").startswith(STOPPED_BY_WORKER)


class RunChoosing:
    """A worker's choice of runs (``ResumeWorker`` holds the fields): its filters, and its
    memory of the runs it failed or passed over."""

    store: str
    in_doubt: InDoubtChoice
    tags: tuple[str, ...]
    older_than: float
    _failed: dict[str, float | None]
    _passed_over: dict[str, float]
    _poll_store: Store | None
    _stopping: threading.Event

    def wants(self, summary: RunSummary, now: float | None = None) -> bool:
        """Whether this worker takes the run: its writer died, it passes the filters, it can be rebuilt."""
        if summary.status != "queued" and not writer_died(summary):
            return False
        if self._parent_stopped(summary.run_id):
            return False  # a person stopped the tree: its children wait for that person too
        if summary.status == "in_doubt" and self.in_doubt == "fail":
            return False  # left for a person to settle
        settings = summary.settings
        if "task" not in settings or settings.get("model_kind", "anthropic") not in REBUILDABLE:
            return False
        if not set(self.tags) <= set(settings.get("tags") or ()):
            return False
        idle = (time.time() if now is None else now) - (summary.updated_at or 0.0)
        if idle < self.older_than:
            return False
        if self._passed_over.get(summary.run_id, 0.0) > time.monotonic():
            return False
        # A run this worker failed to resume is tried again only once its log has changed.
        return summary.run_id not in self._failed or self._failed[summary.run_id] != summary.updated_at

    def _parent_stopped(self, run_id: str) -> bool:
        """Whether ``run_id`` is a child run whose parent ended for a person, not a dead writer:
        both told by their index rows (``parents``, ``indexed_summary``), as each poll asks it
        of every child it could take."""
        if "." not in run_id:
            return False
        with opened(self.store) as store:
            parent = parents(store, [run_id])[run_id]
            if parent is None:
                return False
            try:
                above = indexed_summary(parent, store)
            except NbDurableError:
                return False
        return above.status == "interrupted" and not writer_died(above) and above.holder is None

    def candidates(self, busy: Iterable[str] = (), limit: int | None = None, *, claim: bool = False) -> list[str]:
        """The runs to take now, from the run index (``core.index.claim``): highest priority first,
        then the oldest (queued or started first); ``limit`` of them (all there are when None). ``claim`` keeps
        them from other workers' claims for a moment (the worker's loop claims; a look does not)."""
        with opened(self._poll_store or self.store) as store:
            if index_of(store) is None:  # a store with no index: read every log, as before
                skip = set(busy)
                found = [s for s in list_runs(store) if s.run_id not in skip and self.wants(s)]
                found.sort(key=lambda s: (-int(s.settings.get("priority") or 0), s.updated_at or 0.0))
                return [s.run_id for s in found][:limit]
            if self._failed:  # a run passed over is taken again once its log has changed
                now_at = {r.run_id: r.updated_at for r in index_of(store).index_rows(list(self._failed))}  # type: ignore[union-attr]
                for run_id in [r for r, at in self._failed.items() if r in now_at and now_at[r] != at]:
                    del self._failed[run_id]
            # A run passed over for a while is left out of the claim, not remembered as failed:
            # it is tried again when its while is up, whether or not its log changed.
            later = [r for r, until in self._passed_over.items() if until > time.monotonic()]
            exclude = [*busy, *self._failed, *later]
            idle_before = time.time() - self.older_than
            rows = claim_runs(
                store,
                limit or 1_000_000,
                exclude=exclude,
                tags=self.tags,
                idle_before=idle_before,
                hold=CLAIM_SECONDS if claim else 0,
                stop=self._stopping.is_set,  # a stopping worker takes nothing: no wait for a lock held elsewhere
            )
            out, passed = [], []
            for row in rows:
                summary = summary_of_row(store, row, None)
                if self.wants(summary):
                    out.append(row.run_id)
                    continue
                passed.append(row.run_id)
                if summary.run_id not in self._failed:
                    self._failed[summary.run_id] = summary.updated_at  # never take it until its log changes
            if claim:
                release_claims(store, passed)  # another worker (with other filters) may want them
            return out

    def give_back(self, run_ids: Iterable[str]) -> None:
        """Give back the claims of runs claimed but not taken (a worker stopping); a store that
        fails meanwhile keeps them only their ``CLAIM_SECONDS``."""
        left = list(run_ids)
        if not left or self._poll_store is None:
            return
        with contextlib.suppress(NbDurableError, OSError):
            release_claims(self._poll_store, left)
