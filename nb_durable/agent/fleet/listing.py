"""One page of a run listing, as ``nb-durable runs`` and ``%agent_runs`` both list it.

The one owner of a listing's rules: the filters (status, tags, a batch named by its id or by
the file it was queued from), a page (``limit``, 0 or None for every run; ``offset`` or a cursor
``after``), whether more runs follow, and the refusal of a batch id no run was submitted with
(a mistyped id, which would otherwise read as filters matching nothing), and what a listed run
waits on outside it (``awaited``). Each front end says the page in its own words
(``cli.inspecting``, ``jupyter.runs_table``).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

from ...core.holders import Awaiting
from ...core.index.cursor import Cursor
from ...core.runs import RunSummary, list_runs
from ...core.status import Status
from ...core.stores import Store
from ..run.batch_step import left_in_batch

__all__ = ["ListedPage", "awaited", "list_page"]


@dataclass(frozen=True)
class ListedPage:
    """A page of a listing: its runs, whether more follow, and what the listing warned of."""

    runs: list[RunSummary]
    """The page's runs, the most recently updated first."""
    more: bool
    """Whether the store has more matching runs than the page shows (the next page starts at ``next_cursor``)."""
    caught: list[warnings.WarningMessage]
    """Every warning raised while listing (a damaged log left out): each front end says them every time."""

    @property
    def next_cursor(self) -> str:
        """The cursor of the page's last run when more follow ('' otherwise): the next page's ``after``."""
        return self.runs[-1].cursor if self.more and self.runs else ""


def list_page(
    store: Store,
    *,
    status: Sequence[str] = (),
    tags: Sequence[str] = (),
    batch: str | None = None,
    limit: int | None = None,
    offset: int = 0,
    after: Cursor | None = None,
) -> ListedPage:
    """One page of ``store``'s runs (``limit`` 0 or None: all of them); ``batch`` is a batch's id or
    its file (``runs_of_batch_file``). An id no run was submitted with raises ``RunNotFoundError``
    naming the store's latest batches; a batch file that cannot be read, ``BatchFileError``."""
    # Here, not above: batch imports the agent loop, which a listing of no batch never needs.
    from .batch import refuse_unknown_batch
    from .batch_file import runs_of_batch_file

    limit = limit or None
    of_file = runs_of_batch_file(batch) if batch else None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # a damaged log is said every time, not once per process
        found = list_runs(
            store, status=status, tags=tags, batch=None if of_file is not None else batch,
            run_ids=None if of_file is None else [r for _, r in of_file],
            limit=None if limit is None else limit + 1, offset=offset, after=after,
        )  # fmt: skip
    if not found and batch and of_file is None:
        refuse_unknown_batch(batch, store)
    more = limit is not None and len(found) > limit
    return ListedPage(found[:limit], more, list(caught))


def awaited(summary: RunSummary) -> Awaiting | None:
    """What a listed run waits on outside it: while a writer holds it, the writer's mark; else the
    Message Batch its unfinished model step was left in (a worker's stop), which a resume polls."""
    if Status(summary.status).going:
        return summary.awaiting
    return left_in_batch(summary.open_decision)
