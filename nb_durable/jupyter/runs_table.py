"""``%agent_runs``: every run of a store, as an HTML table and as text.

Status (marked when the run goes on in this kernel's background), steps, tokens and dollars
paid, what replay and caching saved (labelled when simulated), the last update, who resumed
it and the task; the first line says where the runs
live. Read from the run index (``core.index.rows``: tokens and dollars are its figures,
``agent.money.figures``), never the logs, so it stays fast with many runs; ``run_view_of``
builds each row's view as it builds every other display's header. A child run
(``agent.delegation``) sits indented under its parent, whose figures are its whole tree's
(listed or not), its own dollars said beside them (``tree_words``).
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass, field

from ..agent.delegation.tree import index_view, rows_below, tree_views
from ..agent.display.inert_text import html_text, terminal_text
from ..agent.display.progress import SIMULATED_NOTE, dollars
from ..agent.display.views import RunView, state_word, tree_words
from ..agent.display.words import (
    claim_order_words,
    listed_name,
    listed_task,
    next_page_flags,
    page_start,
    priority_cell,
    priority_column,
    store_flag,
)
from ..agent.fleet.background_runs import background_runs
from ..agent.fleet.listing import awaited, list_page
from ..core.index.cursor import Cursor
from ..core.index.listing import RunFilter
from ..core.runs import RunSummary
from ..core.stores import Store, default_store, open_store, password_left_out, shown_store
from ..errors import StoreNotFoundError
from .render import STYLE

__all__ = ["RunsTable", "runs_table"]


@dataclass(frozen=True)
class RunsTable:
    """``%agent_runs``: every run with status, steps, tokens and dollars paid vs saved."""

    rows: Sequence[tuple[RunSummary, RunView]]
    """Each run and its view (a parent's cost is its whole tree's, ``own`` beside it), children after their parent."""
    where: str = ""
    """Where the runs live, in words (the store's folder, file or URL)."""
    here: frozenset[str] = frozenset()
    """The runs going on in the background of this kernel (``%agent_stop`` reaches them)."""
    depth: Mapping[str, int] = field(default_factory=dict)
    """How deep each child run sits under its parent (``agent.delegation``): shown indented."""
    filtered: bool = False
    """Whether the listing was filtered (by status, tag or batch)."""
    offset: int = 0
    """How many runs the listing skipped first (a page after the first, by ``--offset``)."""
    after: str = ""
    """The run the listing's page starts after (a page after the first, by ``--after``)."""
    next_page: str = ""
    """The line that lists the next page (its store and filters as given), when the store has
    more runs than this page shows."""
    left_out: str = ""
    """What the next page's line adds when its store's password was left out of it (``password_left_out``)."""
    skipped: Sequence[str] = ()
    """Why each log that cannot be read was left out (a damaged one): said every time, never silently."""
    order: str = ""
    """The order workers will take the listed runs waiting for one (``claim_order_words``), in a
    listing filtered by status; '' otherwise."""

    @property
    def _priorities(self) -> bool:
        """Whether the table has a priority column (``priority_column``)."""
        return priority_column([summary for summary, _ in self.rows])

    def _name(self, summary: RunSummary) -> str:
        return listed_name(summary.run_id, self.depth.get(summary.run_id, 0), summary.child_of)

    def _status(self, summary: RunSummary) -> str:
        said = state_word(summary.status)  # waiting too, whichever process asks (its lease says so)
        return f"{said} (background, here)" if summary.run_id in self.here else said

    def _repr_html_(self) -> str:
        priorities = ("priority",) if self._priorities else ()
        head = "".join(
            f"<th>{h}</th>"
            for h in (
                "run", "status", *priorities, "steps", "tokens paid", "$ paid", "tokens saved", "$ replay saved",
                "$ caching saved", "updated", "resumed by", "task",
            )
        )
        body = []
        for summary, view in self.rows:
            cost = view.cost
            cells = (
                f"<code>{html_text(self._name(summary))}</code>",
                f'<span class="nbd-status"{_asking_title(summary)}>{html_text(self._status(summary))}</span>{_awaiting(summary)}',
                *((priority_cell(summary),) if priorities else ()),
                str(summary.steps),
                f"{cost.paid.total:,}",
                html_text(tree_words(view)) if view.children else _dollars(cost.paid_dollars, cost.simulated),
                f"{cost.saved.total:,}",
                _dollars(cost.saved_dollars, cost.simulated),
                _dollars(cost.cache_saved_dollars, cost.simulated),
                html_text(_when(summary.updated_at)),
                html_text(summary.resumed_by or "-"),
                html_text(listed_task(view.task, 80)),
            )
            body.append(
                f'<tr class="nbd-run-{html_text(summary.status)}">' + "".join(f"<td>{c}</td>" for c in cells) + "</tr>"
            )
        skipped = "".join(f'<p class="nbd-skipped-log">{html_text(line)}</p>' for line in self.skipped)
        if self.order:
            skipped = f'<p class="nbd-claim-order">{html_text(self.order)}</p>{skipped}'
        if not body:
            return f"<p>{html_text(self._caption())}</p>{skipped}"
        caption = f"<caption>{html_text(self._caption())}</caption>"
        return (
            f'{STYLE}<table class="nbd-timeline nbd-runs">{caption}<thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table>{skipped}'
        )
    def _caption(self) -> str:
        where = f" in {self.where}" if self.where else ""
        past = page_start(self.offset, self.after)
        if not self.rows:
            if self.filtered:
                return f"No runs{where} match these filters{past}."
            if past:
                return f"No more runs{where}{past}."
            if self.skipped:
                return f"No readable runs{where}."
            return f"No runs yet. Runs are kept in {self.where}." if self.where else "No runs yet."
        # A later page says where it starts: "4 runs in runs" read as all the store holds.
        count = f"{len(self.rows)} run{'' if len(self.rows) == 1 else 's'}{where}{past}"
        if self.next_page:
            count += f", the newest first; more: {self.next_page} (or --limit 0 for all){self.left_out}"
        return count

    def __repr__(self) -> str:
        # Inert as the CLI's lines are: a terminal front end (jupyter console) prints text/plain as
        # it is, so an escape sequence in a batch id or a log's name would be obeyed there.
        return terminal_text(self._text())

    def _text(self) -> str:
        if not self.rows:
            return "\n".join([self._caption(), *self.skipped])
        # Columns as wide as what they hold this page: a child's id, a status "(background, here)".
        wide = max(40, *(len(self._name(summary)) for summary, _ in self.rows))
        status = max(12, *(len(self._status(summary)) for summary, _ in self.rows))
        priorities = self._priorities
        lines = [
            self._caption(),
            f"{'run':<{wide}} {'status':<{status}} " + ("priority " if priorities else "")
            + f"{'steps':>5} {'tokens paid':>12} {'tokens saved':>12}  {'updated':<19}  {'resumed by':<20}  task",
        ]
        for summary, view in self.rows:
            priority = f"{priority_cell(summary):>8} " if priorities else ""
            lines.append(
                f"{self._name(summary):<{wide}} {self._status(summary):<{status}} {priority}{summary.steps:>5} "
                f"{view.cost.paid.total:>12,} {view.cost.saved.total:>12,}  {_when(summary.updated_at):<19}  "
                f"{summary.resumed_by or '-':<20}  {listed_task(view.task)}".rstrip()  # as nb-durable runs shows it
            )
            if view.children:  # the tree's figures above, and which of them are its own
                lines.append(f"{'  ' * self.depth.get(summary.run_id, 0)}  {tree_words(view)}")
            if (what := awaited(summary)) is not None:  # what the run waits on outside it, a day at most
                lines.append(f"{'  ' * self.depth.get(summary.run_id, 0)}  {what.in_words()}")
        return "\n".join([*lines, *([self.order] if self.order else []), *self.skipped])


def _asking_title(summary: RunSummary) -> str:
    """A waiting run's status says, on hover, what it waits on."""
    return f' title="{html_text(summary.asking.in_words())}"' if summary.asking is not None else ""


def _awaiting(summary: RunSummary) -> str:
    """A run's status says beside it what it waits on outside it (a Message Batch), running or left."""
    what = awaited(summary)
    return f' <span class="nbd-awaiting">{html_text(what.in_words())}</span>' if what is not None else ""


def _dollars(amount: float, simulated: bool) -> str:
    text = html_text(dollars(amount, simulated=simulated))
    return f'<span title="{html_text(SIMULATED_NOTE)}">{text}</span>' if simulated else text


def _when(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) if ts else "-"


def runs_table(
    store: str | None,
    *,
    status: Sequence[str] = (),
    tags: Sequence[str] = (),
    batch: str | None = None,
    limit: int | None = None,
    offset: int = 0,
    after: Cursor | None = None,
    existing: bool = False,
) -> RunsTable:
    """``%agent_runs``: the runs of a store, most recent first, from the run index (filtered, one page).
    ``existing``: a store that is not there is an error, as ``open_store`` says (a named one); else
    it has no runs yet. Either way nothing is made: a listing writes no SQLite file, folder or table."""
    try:
        runs = open_store(store, existing=True)
    except StoreNotFoundError:
        if existing:
            raise
        RunFilter(tuple(status), tuple(tags), batch)  # a filter's mistake (--batch "") is said first, whatever the store holds
        return RunsTable([], _where(shown_store(store or default_store())))  # where runs will be kept
    with closing(runs), warnings.catch_warnings(record=True) as below_warned:
        warnings.simplefilter("always")  # the rows below a parent may read a damaged log too: said with the page's
        page = list_page(runs, status=status, tags=tags, batch=batch, limit=limit, offset=offset, after=after)
        summaries, more = page.runs, page.more
        where = _where(runs.url)
        unlisted = _unlisted_below(runs, summaries)
    going = background_runs()
    here = frozenset(h.run_id for h in going)
    by_id = {summary.run_id: summary for summary in summaries}
    parent = {s.run_id: s.child_of for s in [*summaries, *unlisted]}
    below = {s.run_id: index_view(s) for s in unlisted}
    rows = tree_views({run_id: index_view(summary) for run_id, summary in by_id.items()}, parent, below)
    # The cursor of the page's last run in listing order (the rows are in tree order).
    flags = next_page_flags(status, tags, batch, limit or 0, page.next_cursor) if more else ""
    return RunsTable(
        [(by_id[r], view) for r, view, _ in rows], where, here, {r: d for r, _, d in rows if d},
        filtered=bool(status or tags or batch), offset=offset, after=after.run_id if after else "",
        next_page=f"%agent_runs{store_flag(store)}{flags}" if more else "", left_out=password_left_out(store) if more else "",
        skipped=_said([*page.caught, *below_warned]), order=claim_order_words(summaries, more) if status else "",
    )  # fmt: skip


def _where(url: str) -> str:
    """Where the runs live, in words: a URL as it is (its password already left out), a folder in full."""
    return url if "://" in url else os.path.abspath(url)


def _unlisted_below(store: Store, listed: Sequence[RunSummary]) -> list[RunSummary]:
    """The index rows of the runs below the listed ones that this page does not show (another
    page's, or filtered out): a parent's row bills them too (``rows_below``: no log read)."""
    return rows_below(store, [s.run_id for s in listed])


def _said(caught: list[warnings.WarningMessage]) -> list[str]:
    """What a listing warned of (a damaged or empty log it skipped), for the table to say. Any
    other warning raised meanwhile (a ResourceWarning as some object of the kernel's is
    collected) is not the listing's: it goes on as a warning, not into the table."""
    said = []
    for w in caught:
        if issubclass(w.category, UserWarning):
            said.append(str(w.message))
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)
    return said
