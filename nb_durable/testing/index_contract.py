"""The run index's part of the store contract: the index equals the logs, however runs end.

Each check is a plain function of one fresh, empty store, as in ``store_contract`` (which
lists these in ``STORE_CONTRACT``). ``check_index`` rebuilds every row from the logs and
compares; listings read through the index must say what reading the logs says.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ..core.events import StepStarted
from ..core.index.check import check_index, repair_index
from ..core.index.claim import claim_runs
from ..core.index.cursor import Cursor
from ..core.index.figures import figures
from ..core.index.listing import newest_first
from ..core.index.rows import STOPPED_BY_WORKER, index_of
from ..core.log import EventLog, run_step
from ..core.runs import RunSummary, list_runs, list_runs_from_logs
from ..core.stores import StoreSpec, opened, shown_store
from ..core.whole_runs.children import child_id, start_child
from ..core.whole_runs.fork import fork
from ..core.whole_runs.retention import delete_run
from ..errors import SettingError

__all__ = ["INDEX_CONTRACT"]


_Said = tuple[str, str, int, int, int, bool, str | None, int]


def _said(summary: RunSummary) -> _Said:
    """What a listing says of a run: status, steps, whether (and by what priority) a worker may
    take it, the decision its unfinished step was left at, and the starts of that step no result followed."""
    s = summary
    return s.run_id, s.status, s.steps, s.completed_steps, s.priority, s.waits_for_worker, s.open_decision, s.unfinished_starts


def _view(spec: StoreSpec) -> list[_Said]:
    return sorted(map(_said, list_runs(spec)))


def _truth(spec: StoreSpec) -> list[_Said]:
    return sorted(map(_said, list_runs_from_logs(spec)))


def _boom() -> None:
    raise ValueError("boom")


def the_index_equals_the_logs_however_runs_end(spec: StoreSpec) -> None:
    """After runs complete, fail, stop in doubt, queue, fork and get deleted, the index is the logs'."""
    with opened(spec) as store:
        assert index_of(store) is not None, "a built-in store keeps the run index"
        with EventLog("done", store) as log:
            log.start_run({"task": "t", "tags": ["a", "b"], "batch": "b1", "priority": 2})
            run_step(log, "s", lambda: 1)
            log.finish_run("completed", output={"text": "ok"})
        with EventLog("broken", store) as log:
            log.start_run({"task": "t", "batch": "b1"})
            with contextlib.suppress(ValueError):  # recorded as the step's failed attempt
                run_step(log, "s", _boom)
            log.finish_run("failed", error="boom")
        with EventLog("doubt", store) as log:
            log.start_run({"task": "t"})
            log.writer.append(StepStarted, step="x", key="doubt:x", effect="external")
        with EventLog("doubt", store, in_doubt="rerun") as log:  # a second process started it again, and died
            log.writer.append(StepStarted, step="x", key="doubt:x", effect="external")
        with EventLog("queued", store) as log:
            log.start_run({"task": "t", "queued": True, "priority": 5, "tags": ["a"]})
        with EventLog("stopped", store) as log:
            log.start_run({"task": "t"})
            run_step(log, "s", lambda: 1)
            log.finish_run("interrupted", error=f"{STOPPED_BY_WORKER} h:1 before step x")
        with EventLog("left", store) as log:  # stopped while a step waited on a job outside it
            log.start_run({"task": "t"})
            log.writer.append(StepStarted, step="m", key="left:m", effect="idempotent")
            log.record_decision("m", "in batch msgbatch_01", by="batch")
            log.finish_run("interrupted", error=f"{STOPPED_BY_WORKER} h:1 while step m waited")
        with fork("done", "child", at=1, root=store):
            pass
        with EventLog("gone", store) as log:
            run_step(log, "s", lambda: 1)
        delete_run("gone", store)
        assert check_index(store) == []
        assert _view(store) == _truth(store)
        assert ('queued', 'queued', 0, 0, 5, True, None, 0) in _view(store) and _said(next(s for s in list_runs(store) if s.run_id == 'done'))[:2] == ('done', 'completed')
        rows = {r.run_id: r for r in index_of(store).index_rows()}  # type: ignore[union-attr]
        assert set(rows) == {"done", "broken", "doubt", "queued", "stopped", "left", "child"}
        assert rows["left"].open_decision == "in batch msgbatch_01" and rows["stopped"].open_decision is None
        assert rows["doubt"].status == "in_doubt" and rows["doubt"].pending and rows["doubt"].unfinished_starts == 2
        assert rows["left"].unfinished_starts == 0 and rows["stopped"].unfinished_starts == 0
        assert rows["queued"].pending and rows["stopped"].pending and not rows["done"].pending
        assert rows["child"].parent == "done"
        assert rows["done"].tags == ("a", "b") and rows["done"].batch == "b1" and rows["done"].priority == 2


def a_run_being_written_lists_as_running(spec: StoreSpec) -> None:
    """The lease, joined in from ``held()``, makes an unfinished run running while it is held."""
    with opened(spec) as store:
        live = EventLog("live", store)
        try:
            run_step(live, "s", lambda: 1)
            assert [(s.run_id, s.status) for s in list_runs(store)] == [("live", "running")]
            assert list(index_of(store).held()) == ["live"]  # type: ignore[union-attr]
            assert [s.run_id for s in list_runs(store, status=["running"])] == ["live"]
            assert list_runs(store, status=["interrupted"]) == []
        finally:
            live.close()
        assert [(s.run_id, s.status) for s in list_runs(store)] == [("live", "interrupted")]
        assert check_index(store) == []


def listings_filter_and_page_through_the_index(spec: StoreSpec) -> None:
    """``list_runs`` filters by status, tag and batch, and pages, newest first."""
    with opened(spec) as store:
        for i in range(5):
            with EventLog(f"r{i}", store) as log:
                log.start_run({"task": "t", "tags": ["even"] if i % 2 == 0 else ["odd"], "batch": "b" if i < 3 else None})
                run_step(log, "s", lambda: 1)
                if i != 4:
                    log.finish_run("completed")
            time.sleep(0.002)  # distinct update times, so the order is the runs' own
        assert [s.run_id for s in list_runs(store)] == ["r4", "r3", "r2", "r1", "r0"]
        assert [s.run_id for s in list_runs(store, limit=2, offset=1)] == ["r3", "r2"]
        assert [s.run_id for s in list_runs(store, tags=["even"])] == ["r4", "r2", "r0"]
        assert [s.run_id for s in list_runs(store, batch="b")] == ["r2", "r1", "r0"]
        assert [s.run_id for s in list_runs(store, status=["interrupted"])] == ["r4"]
        assert [s.run_id for s in list_runs(store, status=["completed"], tags=["odd"], limit=1)] == ["r3"]


def listings_filter_by_one_parent_or_many(spec: StoreSpec) -> None:
    """``list_runs(parent=...)`` gives the children of that run, or of any of those runs (the
    level of a tree below them, not deeper); none named, none."""
    with opened(spec) as store:
        for name in ("a", "b", "c"):
            with EventLog(name, store) as log:
                log.start_run({"task": "t"})
                run_step(log, "s", lambda: 1)
            time.sleep(0.002)  # distinct update times, so the order is the runs' own
        for run_id, new in (("a", "a.1"), ("a", "a.2"), ("b", "b.1"), ("a.1", "a.1.x")):
            with fork(run_id, new, at=1, root=store):
                pass
            time.sleep(0.002)
        assert [s.run_id for s in list_runs(store, parent="a")] == ["a.2", "a.1"]
        assert [s.run_id for s in list_runs(store, parent=["a", "b", "c"])] == ["b.1", "a.2", "a.1"]
        assert [s.run_id for s in list_runs(store, parent=("a.1", "b"), limit=1)] == ["a.1.x"]
        assert list_runs(store, parent=[]) == list_runs(store, parent="c") == []


def the_index_tells_a_child_from_a_fork(spec: StoreSpec) -> None:
    """A child (started by its parent's step) is its parent's child; a fork, even one named like
    a child, names the run it came from as parent and is no child of it, nor is a run naming a
    ``parent`` setting; a fork's copy of a child is the fork's. A row an older nb_durable wrote,
    which did not say, is read right all the same (its log decides, as for any row of another rule),
    and ``repair_index`` rewrites it saying so."""
    with opened(spec) as store:
        with EventLog("p", store) as log:
            run_step(log, "plan", lambda: 1)
            start_child(log, "spawn", child_id("p", "spawn"), {"task": "t"})
        with EventLog("p.spawn", store) as log:
            run_step(log, "s", lambda: 1)
        with fork("p", "p.v2", at=2, root=store):  # a fork named as a child would be, copying the child
            pass
        with EventLog("named", store) as log:
            log.start_run({"task": "t", "parent": "p"})
        want = {"p": None, "p.spawn": "p", "p.v2": None, "p.v2.spawn": "p.v2", "named": None}
        assert {s.run_id: s.child_of for s in list_runs_from_logs(store)} == want
        assert {s.run_id: s.child_of for s in list_runs(store)} == want
        assert {s.run_id: s.parent for s in list_runs(store)} == {**want, "p.v2": "p", "named": "p"}
        assert sorted((s.run_id, s.child_of) for s in list_runs(store, parent="p")) == [("named", None), ("p.spawn", "p"), ("p.v2", None)]
        assert check_index(store) == []
        # As the version before wrote them: no word of a child, stamped with its rule.
        for run_id in ("p.spawn", "p.v2.spawn"):
            (row,) = index_of(store).index_rows([run_id])  # type: ignore[union-attr]
            old = dict(row.to_json())
            del old["child"]
            out = store.open_writer(run_id)
            try:
                out.put_index(replace(type(row).from_json(old), rule=f"3.{figures().rule}"))
            finally:
                out.close()
        assert {s.run_id: s.child_of for s in list_runs(store)} == want
        assert {s.run_id: s.child_of for s in list_runs(store, parent=["p", "p.v2"], limit=10)} == {
            "p.spawn": "p", "p.v2": None, "named": None, "p.v2.spawn": "p.v2",
        }
        # The rebuild fills the word in: repaired, the stored rows say it and are believed again.
        repair_index(store)
        rows = index_of(store).index_rows(["p.spawn", "p.v2.spawn"])  # type: ignore[union-attr]
        assert sorted((r.run_id, r.child_of, r.current) for r in rows) == [("p.spawn", "p", True), ("p.v2.spawn", "p.v2", True)]
        assert check_index(store) == []


def the_claim_takes_pending_runs_by_priority_once(spec: StoreSpec) -> None:
    """A claim gives pending runs with a free lease, highest priority first; a second claim
    at once gives the others, never a run being written."""
    with opened(spec) as store:
        for name, priority in (("low", 0), ("high", 9), ("mid", 3), ("busy", 10)):
            with EventLog(name, store) as log:
                log.start_run({"task": "t", "queued": True, "priority": priority})
        with EventLog("done", store) as log:
            log.start_run({"task": "t"})
            log.finish_run("completed")
        busy = EventLog("busy", store)
        try:
            first = claim_runs(store, 2)
            assert [r.run_id for r in first] == ["high", "mid"]
            assert [r.run_id for r in claim_runs(store, 5)] == ["low"]
            assert claim_runs(store, 5) == []
        finally:
            busy.close()


def a_run_whose_writer_died_keeps_its_place_in_line(spec: StoreSpec) -> None:
    """A run whose writer died after a run was queued is taken before it (its place is its first
    event, not its last), while ``idle_before`` asks how long since its last event."""
    with opened(spec) as store:
        with EventLog("old", store) as log:  # started, then its process died
            log.start_run({"task": "t"})
            run_step(log, "s1", lambda: 1)
        time.sleep(0.01)
        with EventLog("new", store) as log:
            log.start_run({"task": "t", "queued": True})
        time.sleep(0.01)
        between = time.time()
        time.sleep(0.01)
        with EventLog("old", store) as log:  # a worker took it, recorded a step, and died
            run_step(log, "s1", lambda: 1)
            run_step(log, "s2", lambda: 2)
        assert [r.run_id for r in claim_runs(store, 5, hold=0)] == ["old", "new"]
        waiting = sorted((s for s in list_runs(store) if s.waits_for_worker), key=lambda s: s.claim_key)
        assert [s.run_id for s in waiting] == ["old", "new"], "a listing says the order the claim takes"
        assert [r.run_id for r in claim_runs(store, 5, idle_before=between, hold=0)] == ["new"]


def _walk(store: StoreSpec, limit: int, written: Callable[[int], None] = lambda page: None, **filters: Any) -> list[str]:
    """Every run a listing shows page by page, each page after the last one's cursor (``written``
    is called with each page's number before it is read)."""
    shown: list[str] = []
    after = None
    for page in range(100):
        written(page)
        runs = list_runs(store, limit=limit, after=after, **filters)
        shown += [s.run_id for s in runs]
        if len(runs) < limit:
            return shown
        after = runs[-1].cursor
    raise AssertionError(f"a walk by cursor did not end after 100 pages: {shown[:20]}...")


def _runs_to_page(store: StoreSpec, count: int, finish: bool = True) -> None:
    for i in range(count):
        with EventLog(f"p{i}", store) as log:
            log.start_run({"task": "t", "tags": ["even"] if i % 2 == 0 else ["odd"], "batch": "b" if i < count // 2 else None})
            run_step(log, "s", lambda: 1)
            if finish and i % 3 != 2:
                log.finish_run("completed")
        time.sleep(0.002)  # distinct update times, so the order is the runs' own


def pages_by_cursor_show_every_run_once(spec: StoreSpec) -> None:
    """Page after page, each after the last run of the page before, shows every run once, in
    the listing's order, whatever the page's size; past the last run there is nothing."""
    with opened(spec) as store:
        _runs_to_page(store, 7)
        whole = [s.run_id for s in list_runs(store)]
        assert len(whole) == 7
        for limit in (1, 2, 3, 7, 8):
            assert _walk(store, limit) == whole, limit
        last = list_runs(store)[-1]
        assert list_runs(store, after=last.cursor) == []
        assert [s.run_id for s in list_runs(store, limit=2, after=list_runs(store)[2].cursor)] == whole[3:5]


def a_run_written_between_pages_is_not_shown_again(spec: StoreSpec) -> None:
    """A run written between two pages moves to the front, ahead of the cursor: it is not shown
    again, nor does it push another onto the next page twice; every run not written is shown once."""
    with opened(spec) as store:
        _runs_to_page(store, 6, finish=False)
        order = [s.run_id for s in list_runs(store)]  # p5 (newest) to p0
        written = {1: [order[0], order[3]], 2: [order[1]]}  # one shown already, one not yet, then another shown

        def write(page: int) -> None:
            for run_id in written.get(page, []):
                time.sleep(0.002)  # later than every run's update so far
                with EventLog(run_id, store) as log:
                    run_step(log, "s", lambda: 1)  # replayed
                    run_step(log, f"more-{page}", lambda: 2)

        shown = _walk(store, 2, write)
        assert len(shown) == len(set(shown)), f"a run was shown twice: {shown}"
        untouched = [r for r in order if r not in {r for runs in written.values() for r in runs}]
        assert [r for r in shown if r in untouched] == untouched, shown
        assert order[3] not in shown, shown  # written before its page came: ahead of the cursor by then


def a_row_with_no_update_time_lists_last_on_every_store(spec: StoreSpec) -> None:
    """A row with no update time (a hand edit's: every log gives one) lists after all others, by
    the one order (``newest_first``) on every store, and a walk by cursor reaches it: PostgreSQL
    listed it first (a descending order puts NULL first there, last in SQLite), and no SQL
    store's cursor range reached it. A store whose rows are made from the logs (JSONL) forgets
    the row given it, so there the run keeps its time, as its log says."""
    with opened(spec) as store:
        _runs_to_page(store, 4)
        (row,) = index_of(store).index_rows(["p1"])  # type: ignore[union-attr]
        out = store.open_writer("p1")
        try:
            out.put_index(replace(row, updated_at=None))
        finally:
            out.close()
        rows = index_of(store).index_rows()  # type: ignore[union-attr]
        order = [r.run_id for r in sorted(rows, key=newest_first)]
        assert order[-1] == "p1" or getattr(store, "index_written", True) is False, order
        assert [s.run_id for s in list_runs(store)] == order
        for limit in (1, 2, 3):
            assert _walk(store, limit) == order, limit
        assert [s.run_id for s in list_runs(store, batch="b")] == [r for r in order if r in ("p0", "p1")]


def filters_combine_with_the_cursor(spec: StoreSpec) -> None:
    """A cursor with filters (status, tags, batch) walks exactly the filtered listing."""
    with opened(spec) as store:
        _runs_to_page(store, 8)
        for filters in ({"tags": ["even"]}, {"status": ["completed"]}, {"batch": "b", "status": ["completed", "interrupted"]},
                        {"tags": ["odd"], "status": ["interrupted"]}):  # fmt: skip
            whole = [s.run_id for s in list_runs(store, **filters)]
            assert whole and len(whole) < 8, filters
            for limit in (1, 2):
                assert _walk(store, limit, **filters) == whole, (filters, limit)


def a_cursor_pages_on_only_the_store_whose_listing_made_it(spec: StoreSpec) -> None:
    """A cursor names the store whose listing made it: another store's listing refuses it (it
    would list that store from a key of these runs without a word), the same store opened again
    takes it, and a token of version 1, which names no store, is taken as it always was."""
    with opened(spec) as store:
        _runs_to_page(store, 3)
        whole = [s.run_id for s in list_runs(store)]
        token = list_runs(store, limit=1)[0].cursor
        with opened(store.url) as again:
            assert [s.run_id for s in list_runs(again, after=token)] == whole[1:]
        unchecked = replace(Cursor.parse(token), store=None)
        assert unchecked.token[:2] != token[:2]  # another version byte: no fingerprint written
        assert [s.run_id for s in list_runs(store, after=unchecked.token)] == whole[1:]
        with opened(f"memory://another-store-than-{store.key}") as other:
            _runs_to_page(other, 2)
            try:
                list_runs(other, after=token)
            except SettingError as e:
                assert e.setting == "after" and "was made by a listing of another store than memory://" in str(e), e
            else:
                raise AssertionError("a cursor of another store's listing was taken")
            foreign = list_runs(other, limit=1)[0].cursor
        try:
            list_runs(store, after=foreign)
        except SettingError as e:
            assert f"another store than {shown_store(store.url)}" in str(e), e
        else:
            raise AssertionError("a cursor of another store's listing was taken")


INDEX_CONTRACT = (
    the_index_equals_the_logs_however_runs_end,
    a_run_being_written_lists_as_running,
    listings_filter_and_page_through_the_index,
    pages_by_cursor_show_every_run_once,
    a_run_written_between_pages_is_not_shown_again,
    filters_combine_with_the_cursor,
    a_row_with_no_update_time_lists_last_on_every_store,
    listings_filter_by_one_parent_or_many,
    the_index_tells_a_child_from_a_fork,
    the_claim_takes_pending_runs_by_priority_once,
    a_run_whose_writer_died_keeps_its_place_in_line,
    a_cursor_pages_on_only_the_store_whose_listing_made_it,
)
"""The index checks of the store contract."""
