"""The run index checked against the logs, and repaired from them.

The log is the truth: ``rebuild_rows`` makes every run's row from its log by the one rule
(``rows.row_of``), ``check_index`` says a line per run where the stored index differs, and
``repair_index`` writes each differing run's rebuilt row under the run's lease, so no writer's
row can race it, and removes there the row of a run with no log (deleted since its row was
written). On the SQL stores each row's filter columns are checked against the row too
(``column_drift``), since listings and claims read them, not the row. A run being written is
left to its writer, whose every append writes its row. A row goes stale only when the rule
changes under a stored index (a writer trusts a stored row's figures when it describes the
very log it opens), or when the database is edited by hand.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import replace
from typing import Any

from ...errors import LogCorruptedError, RunLockedError, RunNotFoundError
from ..history import History
from .figures import counts_figures
from .rows import IndexRow, index_of, row_of

__all__ = ["check_index", "rebuild_rows", "repair_index", "row_now"]


def rebuild_rows(store: Any, unreadable: dict[str, str] | None = None, empty: list[str] | None = None) -> dict[str, IndexRow]:
    """Every run's row rebuilt from its log; unreadable logs are left out (and said in
    ``unreadable``, run id to why, when given), as are empty ones (listed in ``empty``)."""
    out = {}
    for run_id in store.run_ids():

        def being_written(run_id: str = run_id) -> bool:
            return store.holder(run_id) is not None

        try:
            history = History.load(run_id, store.load(run_id), being_written=being_written)
        except (LogCorruptedError, RunNotFoundError) as e:
            if unreadable is not None:
                unreadable[run_id] = str(e)
            continue  # a damaged log has no row: readers warn about it, as they always did
        if history.lines:
            out[run_id] = row_of(history)
        elif empty is not None and store.holder(run_id) is None:  # no writer is about to write its first line
            empty.append(run_id)
    return out


def row_now(store: Any, row: IndexRow) -> IndexRow:
    """``row`` if the rule in use made it; else the row its log gives now (what a reader shows
    until ``repair_index`` or the run's next writer rewrites it), or ``row`` if the log is unreadable."""
    if row.current:
        return row
    try:
        history = History.load(row.run_id, store.load(row.run_id), salvage=True)
    except (LogCorruptedError, RunNotFoundError):
        return row
    return row_of(history) if history.lines else row


def _same(a: IndexRow, b: IndexRow) -> bool:
    if replace(a, figures={}, rule="") != replace(b, figures={}, rule="") or not all(r.current or r.uncounted for r in (a, b)):
        return False
    if not counts_figures():
        return True  # this process has no counter to check them with (the agent is not imported)
    names = set(a.figures) | set(b.figures)
    return all(math.isclose(a.figures.get(n, 0), b.figures.get(n, 0), rel_tol=1e-9, abs_tol=1e-12) for n in names)


def _stored_rows(store: Any) -> dict[str, IndexRow]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a damaged log is one of check_index's lines, not a warning too
        return {row.run_id: row for row in index_of(store).index_rows()}  # type: ignore[union-attr]


def check_index(store: Any, empty: list[str] | None = None, unreadable: dict[str, str] | None = None) -> list[str]:
    """Rebuild the index from the logs and say, a line per run, where the stored one differs
    (a log that cannot be read is one such line: the index cannot be checked against it; those
    runs are also put in ``unreadable``, run id to why, when given). Empty logs (runs created
    with nothing recorded) have no row to check: listed in ``empty``."""
    if index_of(store) is None:
        return []
    unreadable = {} if unreadable is None else unreadable
    truth = rebuild_rows(store, unreadable, empty)
    stored = _stored_rows(store)
    drift = index_of(store).column_drift()  # type: ignore[union-attr]
    problems = []
    for run_id in sorted(set(truth) | set(stored) | set(unreadable)):
        want, got = truth.get(run_id), stored.get(run_id)
        if run_id in unreadable:
            problems.append(f"{run_id}: its log cannot be read, so its row cannot be checked: {unreadable[run_id]}")
        elif got is None:
            problems.append(f"{run_id}: in the logs but not in the index")
        elif want is None:
            problems.append(f"{run_id}: in the index but has no readable log")
        elif not _same(want, got) or run_id in drift:
            diffs = [
                f"{k} {getattr(got, k)!r} (the log says {getattr(want, k)!r})"
                for k in IndexRow.__slots__
                if k != "rule" and (k != "figures" or counts_figures()) and getattr(got, k) != getattr(want, k)
            ]
            if not got.current and not got.uncounted:  # an uncounted row's figures are checked above
                diffs.insert(0, f"written by an older nb_durable (rule {got.rule or 'unstamped'}, now {want.rule})")
            diffs += [
                f"its {name} column {stored!r} (its row says {said!r}; listings and claims filter by the column)"
                for name, (stored, said) in drift.get(run_id, {}).items()
            ]
            problems.append(f"{run_id}: " + "; ".join(diffs))
    return problems


def repair_index(store: Any) -> tuple[list[str], list[str]]:
    """Write the row rebuilt from its log of every run whose stored row differs or is missing,
    and remove the row of every run with no log, each under the run's lease; return the runs repaired and, a line each, the ones left as
    they are (being written, or whose log cannot be read)."""
    if index_of(store) is None:
        return [], []
    unreadable: dict[str, str] = {}
    truth = rebuild_rows(store, unreadable)
    stored = _stored_rows(store)
    drift = index_of(store).column_drift()  # type: ignore[union-attr]
    repaired: list[str] = []
    left = [f"{run_id}: its log cannot be read, so its row cannot be rebuilt: {why}" for run_id, why in sorted(unreadable.items())]
    # A row with no log (a run deleted since its row was written) is repaired by removing it.
    ghosts = set(stored) - set(truth) - set(unreadable)
    for run_id in sorted(set(truth) | ghosts):
        got = stored.get(run_id)
        if got is not None and run_id in truth and _same(truth[run_id], got) and run_id not in drift:
            continue
        try:
            out = store.open_writer(run_id)
        except RunLockedError:
            left.append(f"{run_id}: being written now, so left to its writer (each of its appends writes its row)")
            continue
        try:  # read again under the lease: the run may have gone on, or been deleted, since the look above
            log = out.load()
            if log.data or log.tail:
                out.put_index(row_of(History.load(run_id, log)))
            else:
                out.delete()  # no log: a row written now would list a run that is not there
        finally:
            out.close()
        repaired.append(run_id)
    return repaired, left
