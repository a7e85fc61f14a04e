"""The JSONL store's sidecar index against what people and other processes do to a runs folder."""

from __future__ import annotations

import os
import shutil
import warnings
from pathlib import Path
from typing import Any

import pytest

from nb_durable import EventLog, list_runs, run_step
from nb_durable.core.index.check import check_index
from nb_durable.core.index.rows import IndexRow
from nb_durable.core.stores import open_store
from nb_durable.core.stores.jsonl_index import SIDECAR


def _runs(root: Path, count: int) -> None:
    for i in range(count):
        with EventLog(f"r{i}", root) as log:
            log.start_run({"task": "t"})
            run_step(log, "s", lambda i=i: i)  # type: ignore[misc]
            log.finish_run("completed")


def _sidecar_key(root: Path) -> tuple[int, int, int]:
    st = os.stat(root / SIDECAR)
    return st.st_ino, st.st_size, st.st_mtime_ns


def test_a_log_no_row_comes_from_leaves_the_sidecar_unwritten_listing_after_listing(tmp_path: Path) -> None:
    # Each listing rewrote the whole sidecar while one damaged or empty log sat in the folder:
    # at 100,000 runs that is every `runs` and every JSONL worker poll rewriting all the rows.
    root = tmp_path / "runs"
    _runs(root, 3)
    shutil.copy(root / "r1.jsonl", root / "copied.jsonl")  # records run r1: no row of its own
    (root / "empty.jsonl").touch()
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        assert sorted(s.run_id for s in list_runs(root)) == ["r0", "r1", "r2"]
        written = _sidecar_key(root)
        assert sorted(s.run_id for s in list_runs(root)) == ["r0", "r1", "r2"]
    assert _sidecar_key(root) == written
    assert sum("copied.jsonl" in str(w.message) for w in said) == 2, "each listing still says what it left out"
    assert sum("empty.jsonl" in str(w.message) for w in said) == 2


def test_a_listing_survives_another_thread_indexing_a_run_of_the_same_store_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A worker's threads share one store: a listing writing the sidecar while another thread
    # indexed a run new to it failed with "dictionary changed size during iteration" (96 times
    # in 25 s of three listing threads and one making runs). The other thread's turn is taken
    # here at the one point it fell, the sidecar's encoding of a row.
    root = tmp_path / "runs"
    _runs(root, 3)
    with open_store(root) as store:
        list_runs(store)
        with EventLog("r3", root) as log:  # new: the next listing writes the sidecar
            log.start_run({"task": "t"})
        encode = IndexRow.to_json
        turns: list[str] = []

        def with_another_thread(row: IndexRow) -> dict[str, Any]:
            if not turns:
                turns.append("late")
                with EventLog("late", root) as log:
                    log.start_run({"task": "t"})
                store.index_rows(["late"])  # type: ignore[attr-defined]
            return encode(row)

        monkeypatch.setattr(IndexRow, "to_json", with_another_thread)
        assert sorted(s.run_id for s in list_runs(store)) == ["r0", "r1", "r2", "r3"]
        monkeypatch.undo()
        assert sorted(s.run_id for s in list_runs(store)) == ["late", "r0", "r1", "r2", "r3"]
        assert check_index(store) == []


def test_a_run_being_written_leaves_the_sidecar_as_it_is_and_every_listing_shows_it_as_it_is(tmp_path: Path) -> None:
    # Each listing rewrote every row while any run was being written (its log changes between
    # any two looks): a worker's look at 10,000 runs took 380 ms, not 65.
    root = tmp_path / "runs"
    _runs(root, 3)
    with open_store(root) as store:
        list_runs(store)
        written = _sidecar_key(root)
        with EventLog("live", store) as log:
            log.start_run({"task": "t"})
            for step in range(3):
                run_step(log, f"s{step}", lambda: 1)
                assert {s.run_id: (s.status, s.steps) for s in list_runs(store)}["live"] == ("running", step + 1)
                assert _sidecar_key(root) == written
            log.finish_run("completed")
        assert {s.run_id: (s.status, s.steps) for s in list_runs(store)}["live"] == ("completed", 3)
    assert {s.run_id: (s.status, s.steps) for s in list_runs(root)}["live"] == ("completed", 3)  # another reader
    assert _sidecar_key(root) != written, "a finished run's row is written with the next change"
    with open_store(root) as store:
        assert check_index(store) == []
