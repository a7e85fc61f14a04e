"""The contract every store passes, unchanged: memory, JSONL, SQLite (and PostgreSQL).

Each test takes ``store_url`` and so runs once per store kind. What a store must do is
what ``EventLog``, ``read_run`` and ``list_runs`` need from it; nothing here knows which
backend it is talking to.
"""

from __future__ import annotations

import pytest

from nb_durable import (
    EventLog,
    InvalidRunIdError,
    LeaseLostError,
    OutcomeUnknown,
    RunNotFoundError,
    fork,
    list_runs,
    open_store,
    read_run,
    run_step,
)
from nb_durable.core.stores import Store


def test_a_store_url_opens_a_store(store_url: str) -> None:
    store = open_store(store_url)
    assert isinstance(store, Store)
    assert store.run_ids() == []


def test_results_round_trip_through_the_store(store_url: str) -> None:
    values = [None, True, 0, -7, 3.25, "", "héllo ☃\n\"quoted\"", [1, [2, {"a": None}]], {"k": {"n": [1.5, "x"]}}]
    with EventLog("round-trip", store_url) as log:
        live = [run_step(log, f"s{i}", lambda v=v: v) for i, v in enumerate(values)]  # type: ignore[misc]  # mypy cannot infer a lambda with a default argument
    with EventLog("round-trip", store_url) as log:
        replayed = [run_step(log, f"s{i}", lambda: pytest.fail("replay must not run steps")) for i in range(len(values))]
    assert live == values
    assert replayed == values


def test_replay_returns_recorded_results_without_running_them(store_url: str) -> None:
    calls: list[str] = []

    def work(name: str) -> str:
        calls.append(name)
        return name.upper()

    with EventLog("replay", store_url) as log:
        assert run_step(log, "a", lambda: work("a")) == "A"
        assert run_step(log, "b", lambda: work("b")) == "B"
    with EventLog("replay", store_url) as log:
        assert run_step(log, "a", lambda: work("a")) == "A"
        assert run_step(log, "b", lambda: work("b")) == "B"
        assert log.replaying is False
        assert run_step(log, "c", lambda: work("c")) == "C"
    assert calls == ["a", "b", "c"]


def test_events_carry_version_sequence_and_kinds(store_url: str) -> None:
    with EventLog("kinds", store_url) as log:
        log.start_run({"task": "t"})
        run_step(log, "x", lambda: 1, effect="external")
        log.finish_run("completed", output="done")
    record = read_run("kinds", store_url)
    assert [e.kind for e in record.events] == [
        "run_started",
        "step_started",
        "step_completed",
        "run_finished",
    ]
    assert [e.seq for e in record.events] == [0, 1, 2, 3]
    assert record.summary.settings == {"task": "t"}
    assert record.summary.output == "done"


def test_list_runs_reports_status_counts_and_times(store_url: str) -> None:
    with EventLog("done", store_url) as log:
        run_step(log, "a", lambda: 1)
        log.finish_run("completed")
    with EventLog("broken", store_url) as log:
        run_step(log, "a", lambda: 1)
        log.finish_run("failed", error="boom")
    with EventLog("stopped", store_url) as log:
        run_step(log, "a", lambda: 1)
    live = EventLog("busy", store_url)
    try:
        run_step(live, "a", lambda: 1)
        runs = {s.run_id: s for s in list_runs(store_url)}
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
    assert read_run("busy", store_url).summary.status == "interrupted"


def test_an_external_step_cut_short_is_in_doubt_for_readers(store_url: str) -> None:
    log = EventLog("doubt", store_url)
    with pytest.raises(KeyboardInterrupt):
        run_step(log, "send", _interrupt, effect="external")
    log.close()
    summary = read_run("doubt", store_url).summary
    assert summary.status == "in_doubt"
    assert read_run("doubt", store_url).steps[0].state == "in_doubt"


def _interrupt() -> None:
    raise KeyboardInterrupt


def test_reading_never_needs_the_lease(store_url: str) -> None:
    with EventLog("reader", store_url) as log:
        run_step(log, "a", lambda: "x")
        assert read_run("reader", store_url).steps[0].result == "x"
        assert [s.run_id for s in list_runs(store_url)] == ["reader"]


def test_a_newer_log_in_this_process_supersedes_the_older(store_url: str) -> None:
    old = EventLog("twice", store_url)
    run_step(old, "a", lambda: 1)
    new = EventLog("twice", store_url)
    with pytest.raises(LeaseLostError, match="newer EventLog"):
        run_step(old, "b", lambda: 2)
    assert run_step(new, "a", lambda: 99) == 1
    new.close()


def test_the_store_grants_one_writer_per_run(store_url: str) -> None:
    from nb_durable import RunLockedError

    store = open_store(store_url)
    writer = store.open_writer("solo")
    try:
        with pytest.raises(RunLockedError, match="pid"):
            store.open_writer("solo")
        other = store.open_writer("other-run")
        other.close()
    finally:
        writer.close()
    store.open_writer("solo").close()


def test_unknown_runs_get_a_clear_error(store_url: str) -> None:
    with EventLog("known", store_url) as log:
        run_step(log, "a", lambda: 1)
    with pytest.raises(RunNotFoundError, match="no run 'nope'.*'known'"):
        read_run("nope", store_url)


@pytest.mark.parametrize("bad", ["", "../etc", "a/b", "a\\b", ".hidden", "x" * 129, "a..b", "sp ace"])
def test_bad_run_ids_are_refused_before_anything_is_written(store_url: str, bad: str) -> None:
    with pytest.raises(InvalidRunIdError, match="cannot name a run"):
        EventLog(bad, store_url)
    assert open_store(store_url).run_ids() == []


def test_fork_keeps_the_first_steps_and_goes_live_after(store_url: str) -> None:
    with EventLog("source", store_url) as log:
        for name in "abc":
            run_step(log, name, lambda name=name: name * 2)  # type: ignore[misc]  # mypy cannot infer a lambda with a default argument
        log.finish_run("completed")
    calls: list[str] = []
    with fork("source", "branch", at=2, root=store_url) as log:
        assert run_step(log, "a", lambda: calls.append("a")) == "aa"
        assert run_step(log, "b", lambda: calls.append("b")) == "bb"
        assert run_step(log, "c", lambda: "new") == "new"
    assert calls == []
    branch = read_run("branch", store_url)
    assert branch.events[0].forked_from == {"run_id": "source", "at": 2}  # type: ignore[attr-defined]
    assert [s.result for s in branch.steps] == ["aa", "bb", "new"]
    assert [s.result for s in read_run("source", store_url).steps] == ["aa", "bb", "cc"]


def test_skipped_in_doubt_steps_replay_as_outcome_unknown(store_url: str) -> None:
    log = EventLog("skip", store_url)
    with pytest.raises(KeyboardInterrupt):
        run_step(log, "pay", _interrupt, effect="external")
    log.close()
    for _ in range(2):
        with EventLog("skip", store_url, in_doubt="skip") as log:
            out = run_step(log, "pay", lambda: pytest.fail("skip must not run it"), effect="external")
            assert isinstance(out, OutcomeUnknown)
            assert out.key == "skip:pay"
            assert run_step(log, "next", lambda: "ok") == "ok"
    decisions = [e for e in read_run("skip", store_url).events if e.kind == "decision"]
    assert len(decisions) == 1


def test_read_runs_and_the_latest_unfinished_run(store_url: str) -> None:
    from nb_durable import RunNotFoundError
    from nb_durable.core.runs import latest_unfinished, read_runs

    with pytest.raises(RunNotFoundError, match="no unfinished run"):
        latest_unfinished(store_url)
    with EventLog("older", store_url) as log:
        run_step(log, "a", lambda: 1)
    with EventLog("done", store_url) as log:
        run_step(log, "a", lambda: 1)
        log.finish_run("completed")
    assert latest_unfinished(store_url) == "older"
    records = read_runs(store_url)
    assert [r.run_id for r in records] == ["done", "older"]
    assert [r.summary.status for r in records] == ["completed", "interrupted"]
    assert records[0].steps[0].result == 1
