"""The store contract: the checks every store passes (memory, JSONL, SQLite, PostgreSQL, yours).

Each check is a plain function of one fresh, empty store (a ``Store``, a path or a URL); it
passes by returning and fails by raising, usually ``AssertionError``. ``STORE_CONTRACT``
lists them in order, so a test runner can make each one a test case;
``check_store(fresh)`` runs them all without one. Nothing here imports pytest, and the
checks use the core alone, so a store's own package can run them.
"""

from __future__ import annotations

import os
import re
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Generic, TypeVar

from ..core.in_doubt import OutcomeUnknown
from ..core.log import EventLog, run_step
from ..core.runs import latest_unfinished, list_runs, read_run, read_runs
from ..core.stores import Store, StoreSpec, opened
from ..core.whole_runs.retention import delete_run, prune_runs
from ..errors import (
    InvalidRunIdError,
    LeaseLostError,
    NoUnfinishedRunError,
    RunError,
    RunLockedError,
    RunNotFoundError,
)
from .asking_contract import ASKING_CONTRACT
from .index_contract import INDEX_CONTRACT
from .tree_contract import TREE_CONTRACT

__all__ = ["STORE_CONTRACT", "check_store"]

T = TypeVar("T")
E = TypeVar("E", bound=BaseException)


# ---------------------------------------------------------------------------------------------
# Small tools for the checks: no pytest.


class _Caught(Generic[E]):
    """What ``_raises`` caught, once the block is over."""

    value: E


@contextmanager
def _raises(expected: type[E], *, match: str | None = None) -> Iterator[_Caught[E]]:
    """Fail unless the block raises ``expected`` with a message ``re.search`` finds ``match`` in."""
    caught: _Caught[E] = _Caught()
    try:
        yield caught
    except expected as e:
        if match is not None and not re.search(match, str(e)):
            raise AssertionError(
                f"{type(e).__name__} was raised, but its message {str(e)!r} does not match {match!r}"
            ) from e
        caught.value = e
        return
    raise AssertionError(f"the block did not raise {expected.__name__}")


def _returning(value: T) -> Callable[[], T]:
    return lambda: value


def _must_not_run(why: str) -> Callable[[], Any]:
    def run() -> Any:
        raise AssertionError(why)

    return run


def _interrupt() -> None:
    raise KeyboardInterrupt


# ---------------------------------------------------------------------------------------------
# The contract: each check takes a fresh, empty store (a Store, a path or a URL).


def a_store_url_opens_a_store(spec: StoreSpec) -> None:
    """``open_store`` gives a ``Store``, and a fresh one holds no runs."""
    with opened(spec) as store:
        assert isinstance(store, Store)
        assert store.run_ids() == []


def results_round_trip_through_the_store(spec: StoreSpec) -> None:
    """Every kind of JSON result comes back equal, live and on replay."""
    values = [None, True, 0, -7, 3.25, "", "héllo ☃\n\"quoted\"", [1, [2, {"a": None}]], {"k": {"n": [1.5, "x"]}}]
    with EventLog("round-trip", spec) as log:
        live = [run_step(log, f"s{i}", _returning(v)) for i, v in enumerate(values)]
    with EventLog("round-trip", spec) as log:
        replayed = [
            run_step(log, f"s{i}", _must_not_run("replay must not run steps")) for i in range(len(values))
        ]
    assert live == values
    assert replayed == values


def replay_returns_recorded_results_without_running_them(spec: StoreSpec) -> None:
    """Recorded steps replay without running; the first unrecorded one runs live."""
    calls: list[str] = []

    def work(name: str) -> str:
        calls.append(name)
        return name.upper()

    with EventLog("replay", spec) as log:
        assert run_step(log, "a", lambda: work("a")) == "A"
        assert run_step(log, "b", lambda: work("b")) == "B"
    with EventLog("replay", spec) as log:
        assert run_step(log, "a", lambda: work("a")) == "A"
        assert run_step(log, "b", lambda: work("b")) == "B"
        assert log.replaying is False
        assert run_step(log, "c", lambda: work("c")) == "C"
    assert calls == ["a", "b", "c"]


def events_carry_version_sequence_and_kinds(spec: StoreSpec) -> None:
    """Events read back in order, numbered from 0, with the run's settings and output."""
    with EventLog("kinds", spec) as log:
        log.start_run({"task": "t"})
        run_step(log, "x", lambda: 1, effect="external")
        log.finish_run("completed", output="done")
    record = read_run("kinds", spec)
    assert [e.kind for e in record.events] == [
        "run_started",
        "step_started",
        "step_completed",
        "run_finished",
    ]
    assert [e.seq for e in record.events] == [0, 1, 2, 3]
    assert record.summary.settings == {"task": "t"}
    assert record.summary.output == "done"


def list_runs_reports_status_counts_and_times(spec: StoreSpec) -> None:
    """``list_runs`` tells completed, failed, interrupted and running runs apart."""
    with EventLog("done", spec) as log:
        run_step(log, "a", lambda: 1)
        log.finish_run("completed")
    with EventLog("broken", spec) as log:
        run_step(log, "a", lambda: 1)
        log.finish_run("failed", error="boom")
    with EventLog("stopped", spec) as log:
        run_step(log, "a", lambda: 1)
    live = EventLog("busy", spec)
    try:
        run_step(live, "a", lambda: 1)
        runs = {s.run_id: s for s in list_runs(spec)}
        assert {k: v.status for k, v in runs.items()} == {
            "done": "completed",
            "broken": "failed",
            "stopped": "interrupted",
            "busy": "running",
        }
        assert runs["broken"].error == "boom"
        assert runs["done"].steps == runs["done"].completed_steps == 1
        assert runs["done"].started_at is not None and runs["done"].updated_at is not None
        assert runs["busy"].holder is not None
    finally:
        live.close()
    assert read_run("busy", spec).summary.status == "interrupted"


def an_external_step_cut_short_is_in_doubt_for_readers(spec: StoreSpec) -> None:
    """An external step started but never finished reads as in doubt, run and step."""
    log = EventLog("doubt", spec)
    with _raises(KeyboardInterrupt):
        run_step(log, "send", _interrupt, effect="external")
    log.close()
    summary = read_run("doubt", spec).summary
    assert summary.status == "in_doubt"
    assert read_run("doubt", spec).steps[0].state == "in_doubt"


def reading_never_needs_the_lease(spec: StoreSpec) -> None:
    """``read_run`` and ``list_runs`` work while a writer holds the run."""
    with EventLog("reader", spec) as log:
        run_step(log, "a", lambda: "x")
        assert read_run("reader", spec).steps[0].result == "x"
        assert [s.run_id for s in list_runs(spec)] == ["reader"]


def a_newer_log_in_this_process_supersedes_the_older(spec: StoreSpec) -> None:
    """A second ``EventLog`` on a run takes it over; the first one's next write fails."""
    old = EventLog("twice", spec)
    run_step(old, "a", lambda: 1)
    new = EventLog("twice", spec)
    with _raises(LeaseLostError, match="newer EventLog"):
        run_step(old, "b", lambda: 2)
    assert run_step(new, "a", lambda: 99) == 1
    new.close()


def the_store_grants_one_writer_per_run(spec: StoreSpec) -> None:
    """``open_writer`` refuses a second writer on a run, not on another run, and not after close."""
    with opened(spec) as store:
        writer = store.open_writer("solo")
        try:
            with _raises(RunLockedError, match="pid"):
                store.open_writer("solo")
            other = store.open_writer("other-run")
            other.close()
        finally:
            writer.close()
        store.open_writer("solo").close()


def unknown_runs_get_a_clear_error(spec: StoreSpec) -> None:
    """Reading a run that does not exist names it and the runs that do."""
    with EventLog("known", spec) as log:
        run_step(log, "a", lambda: 1)
    with _raises(RunNotFoundError, match="no run 'nope'.*'known'"):
        read_run("nope", spec)


BAD_RUN_IDS = ("", "../etc", "a/b", "a\\b", ".hidden", "x" * 129, "a..b", "sp ace")


def bad_run_ids_are_refused_before_anything_is_written(spec: StoreSpec) -> None:
    """Each id in ``BAD_RUN_IDS`` is refused by ``EventLog``, and nothing is stored."""
    for bad in BAD_RUN_IDS:
        try:
            with _raises(InvalidRunIdError, match="cannot name a run"):
                EventLog(bad, spec)
        except AssertionError as e:
            raise AssertionError(f"run id {bad!r}: {e}") from e
        with opened(spec) as store:
            assert store.run_ids() == [], f"run id {bad!r} left {store.run_ids()} in the store"


def skipped_in_doubt_steps_replay_as_outcome_unknown(spec: StoreSpec) -> None:
    """``in_doubt="skip"`` records one decision; the step replays as ``OutcomeUnknown`` after."""
    log = EventLog("skip", spec)
    with _raises(KeyboardInterrupt):
        run_step(log, "pay", _interrupt, effect="external")
    log.close()
    for _ in range(2):
        with EventLog("skip", spec, in_doubt="skip") as log:
            out = run_step(log, "pay", _must_not_run("skip must not run it"), effect="external")
            assert isinstance(out, OutcomeUnknown)
            assert out.key == "skip:pay"
            assert run_step(log, "next", lambda: "ok") == "ok"
    decisions = [e for e in read_run("skip", spec).events if e.kind == "decision"]
    assert len(decisions) == 1


def read_runs_and_the_latest_unfinished_run(spec: StoreSpec) -> None:
    """``read_runs`` reads every run, newest first; ``latest_unfinished`` finds the one to resume."""
    with _raises(NoUnfinishedRunError, match="no unfinished run") as caught:
        latest_unfinished(spec)
    # Nothing to resume names no run: it is not a RunError with an empty run id.
    assert not isinstance(caught.value, RunError)
    assert caught.value.exit_code == 2
    with EventLog("older", spec) as log:
        run_step(log, "a", lambda: 1)
    with EventLog("done", spec) as log:
        run_step(log, "a", lambda: 1)
        log.finish_run("completed")
    assert latest_unfinished(spec) == "older"
    records = read_runs(spec)
    assert [r.run_id for r in records] == ["done", "older"]
    assert [r.summary.status for r in records] == ["completed", "interrupted"]
    assert records[0].steps[0].result == 1


def a_deleted_run_is_gone_and_its_id_free(spec: StoreSpec) -> None:
    """``delete_run`` removes one run (others stay); its id then starts a new run."""
    for run_id in ("gone", "kept"):
        with EventLog(run_id, spec) as log:
            run_step(log, "a", _returning(run_id))
    delete_run("gone", spec)
    with opened(spec) as store:
        assert store.run_ids() == ["kept"]
    for again in (lambda: read_run("gone", spec), lambda: delete_run("gone", spec)):
        with _raises(RunNotFoundError, match="no run 'gone'"):
            again()
    with EventLog("gone", spec) as log:
        assert run_step(log, "a", _returning("new")) == "new"
    assert read_run("kept", spec).steps[0].result == "kept"


def runs_being_written_are_never_deleted_or_pruned(spec: StoreSpec) -> None:
    """Delete and prune refuse a leased run, naming its holder; prune filters by status and age."""
    with EventLog("done", spec) as log:
        run_step(log, "a", lambda: 1)
        log.finish_run("completed")
    with EventLog("stopped", spec) as log:
        run_step(log, "a", lambda: 1)
    live = EventLog("busy", spec)
    try:
        run_step(live, "a", lambda: 1)
        with _raises(RunLockedError, match="not deleted: it is being written by pid"):
            delete_run("busy", spec)
        later = time.time() + 60
        assert prune_runs("1h", spec, now=later).deleted == ()
        assert sorted(prune_runs(0, spec, now=later, dry_run=True).deleted) == ["done", "stopped"]
        report = prune_runs("30s", spec, statuses=["completed"], now=later)
        assert report.deleted == ("done",) and report.refused == ()
        report = prune_runs("30s", spec, now=later)
        assert report.deleted == ("stopped",) and [r for r, _ in report.refused] == ["busy"]
        assert run_step(live, "b", lambda: 2) == 2
    finally:
        live.close()
    assert prune_runs(0, spec, now=time.time() + 60).deleted == ("busy",)
    with opened(spec) as store:
        assert store.run_ids() == []


STORE_CONTRACT: tuple[Callable[[StoreSpec], None], ...] = (
    a_store_url_opens_a_store,
    results_round_trip_through_the_store,
    replay_returns_recorded_results_without_running_them,
    events_carry_version_sequence_and_kinds,
    list_runs_reports_status_counts_and_times,
    an_external_step_cut_short_is_in_doubt_for_readers,
    reading_never_needs_the_lease,
    a_newer_log_in_this_process_supersedes_the_older,
    the_store_grants_one_writer_per_run,
    unknown_runs_get_a_clear_error,
    bad_run_ids_are_refused_before_anything_is_written,
    skipped_in_doubt_steps_replay_as_outcome_unknown,
    read_runs_and_the_latest_unfinished_run,
    a_deleted_run_is_gone_and_its_id_free,
    runs_being_written_are_never_deleted_or_pruned,
    *INDEX_CONTRACT,
    *ASKING_CONTRACT,
    *TREE_CONTRACT,
)
"""Every check of the store contract, in order: plain functions of one fresh, empty store."""


def _failure(name: str, error: Exception) -> str:
    """A failed check: its name, the error, and the line of the check it came from."""
    frames = traceback.extract_tb(error.__traceback__)
    here = [f for f in frames if f.filename == __file__]
    text = f"{name}: {type(error).__name__}"
    if str(error):
        text += ": " + str(error).replace("\n", "\n    ")
    if here or frames:
        frame = (here or frames)[-1]
        text += f" (at {os.path.basename(frame.filename)}:{frame.lineno}: {(frame.line or '').strip()})"
    return text


def check_store(fresh: Callable[[], StoreSpec]) -> list[str]:
    """Run every check of ``STORE_CONTRACT``, each on its own ``fresh()`` store.

    ``fresh`` returns a new, empty store each time it is called: a ``Store`` (closed here
    after its check) or a path or URL ``open_store`` accepts. Every check runs, even after
    one fails. Returns the names of the checks, all passed; if any failed, raises one
    ``AssertionError`` with a line per failed check: its name, the error it raised, and the
    line of the check that raised it (a bare ``assert`` has no message of its own).
    """
    passed: list[str] = []
    failed: list[str] = []
    for check in STORE_CONTRACT:
        spec = fresh()
        try:
            check(spec)
        except Exception as e:  # a check fails by raising anything: an assert, a store's error
            failed.append(_failure(check.__name__, e))
        else:
            passed.append(check.__name__)
        finally:
            if spec is not None and not isinstance(spec, (str, os.PathLike)):
                spec.close()
    if failed:
        raise AssertionError(
            f"{len(failed)} of {len(STORE_CONTRACT)} store contract checks failed:\n  " + "\n  ".join(failed)
        )
    return passed
