"""What a listing asks of the run index: which rows (``RunFilter``), each one's status with its
lease joined in (``joined_status``), in which order (``newest_first``).

The SQL stores say the same in their queries (``sqlite_index``, ``postgres.index``); the generic
listing (``core.runs.list_runs``) and the JSONL store's, which filters a page's runs before making
their rows (``jsonl_index``), use these, on rows or on anything with a row's listed values (``Listed``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ...errors import SettingError
from ..steps import RUN_STATUSES, RunStatus
from .cursor import Cursor, listing_key

__all__ = ["Listed", "RunFilter", "joined_status", "newest_first"]


class Listed(Protocol):
    """What a listing filters and orders a run by: an ``IndexRow`` has it, and so may less."""

    @property
    def run_id(self) -> str: ...
    @property
    def status(self) -> RunStatus: ...
    @property
    def ended(self) -> bool: ...
    @property
    def tags(self) -> tuple[str, ...]: ...
    @property
    def batch(self) -> str | None: ...
    @property
    def parent(self) -> str | None: ...
    @property
    def updated_at(self) -> float | None: ...


def joined_status(status: RunStatus, ended: bool, going: RunStatus | None) -> RunStatus:
    """A run's recorded ``status`` with what its lease's holder does (``going``: running or
    waiting; None while nobody holds it): waiting however the log ends so far (a resume asks
    about a step in doubt before it records anything), running while the log is unfinished."""
    if going is None:
        return status
    if going == "waiting":
        return "waiting"
    return status if ended else "running"


def newest_first(row: Listed) -> tuple[float, str]:
    """A listing's order: most recently updated first, then by run id (``cursor.listing_key``)."""
    return listing_key(row.updated_at, row.run_id)


ROWS_MAX = 2**63 - 1
"""The largest page or offset a store is asked for: more rows than any holds, and the largest
integer SQLite and PostgreSQL take, so a larger ``limit`` or ``offset`` is this one."""


@dataclass(frozen=True, slots=True)
class RunFilter:
    """Which rows a listing wants: by status, tags (all of them), batch, parent (any of them: none
    given, no row); a page of them, from the first ``offset`` on or from the rows ``after`` a
    cursor (``index.cursor``)."""

    statuses: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    batch: str | None = None
    parent: tuple[str, ...] | None = None
    run_ids: tuple[str, ...] | None = None
    limit: int | None = None
    offset: int = 0
    after: Cursor | None = None

    def __post_init__(self) -> None:
        for status in self.statuses:
            if status not in RUN_STATUSES:
                raise SettingError(setting="status", value=status, reason=f"must be one of {', '.join(RUN_STATUSES)}")
        if self.batch == "":  # matching no run, it was said as a store with none ("--batch $UNSET")
            reason = "must name a batch: its id, or (to a listing or a wait) the batch file it was queued from"
            raise SettingError(setting="batch", value="", reason=reason)
        for name, value in (("limit", self.limit or 0), ("offset", self.offset)):
            if value < 0:
                raise SettingError(setting=name, value=value, reason="must be 0 or more")
            if value > ROWS_MAX:  # the same page: SQLite and PostgreSQL said a larger one with a traceback or "bigint out of range"
                object.__setattr__(self, name, ROWS_MAX)
        if self.after is not None and self.offset:
            reason = "must be 0 with a cursor (after), which already says where the page starts: page on by the cursor alone"
            raise SettingError(setting="offset", value=self.offset, reason=reason)

    def matches(self, row: Listed, status: str) -> bool:
        """Whether a row (whose status, its lease joined in, is ``status``) passes."""
        return (
            (not self.statuses or status in self.statuses)
            and (not self.tags or set(self.tags) <= set(row.tags))
            and (self.batch is None or row.batch == self.batch)
            and (self.parent is None or row.parent in self.parent)
            and (self.run_ids is None or row.run_id in self.run_ids)
            and (self.after is None or self.after.passed(row.updated_at, row.run_id))
        )

    @property
    def everything(self) -> bool:
        """Whether every run passes (a page of them may still be asked for)."""
        return not (
            self.statuses or self.tags or self.run_ids is not None or self.batch is not None or self.parent is not None
            or self.after is not None
        )

    @property
    def by_status(self) -> bool:
        """Whether the status filter depends on leases (running and waiting are no recorded statuses)."""
        return bool(self.statuses)
