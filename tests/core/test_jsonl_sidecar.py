"""The JSONL store's sidecar index against what people and other processes do to a runs folder."""

from __future__ import annotations

import copy
import json
import os
import pickle
import shutil
import warnings
from pathlib import Path
from typing import Any

import pytest

from nb_durable import EventLog, list_runs, run_step
from nb_durable.core.index.check import check_index
from nb_durable.core.index.rows import IndexRow
from nb_durable.core.runs import list_runs_from_logs
from nb_durable.core.stores import jsonl_sidecar, open_store
from nb_durable.core.stores.jsonl_index import SIDECAR
from nb_durable.core.stores.jsonl_sidecar import Stored
from nb_durable.core.whole_runs.retention import delete_run


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
    # here at the point the sidecar's writing reads each row's values.
    root = tmp_path / "runs"
    _runs(root, 3)
    with open_store(root) as store:
        list_runs(store)
        with EventLog("r3", root) as log:  # new: the next listing writes the sidecar
            log.start_run({"task": "t"})
        values = jsonl_sidecar._values
        turns: list[str] = []

        def with_another_thread(row: IndexRow) -> Any:
            if not turns:
                turns.append("late")
                with EventLog("late", root) as log:
                    log.start_run({"task": "t"})
                store.index_rows(["late"])  # type: ignore[attr-defined]
            return values(row)

        monkeypatch.setattr(jsonl_sidecar, "_values", with_another_thread)
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


TOOLS = [{"name": "bash", "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}]


def _settings(root: Path) -> dict[str, dict[str, Any]]:
    return {s.run_id: s.settings for s in list_runs_from_logs(root)}


def test_settings_runs_share_are_kept_once_and_each_listing_gives_each_run_its_own(tmp_path: Path) -> None:
    # The sidecar held each run's settings whole: 12.8 MB at 10,000 runs, most of it the same
    # system prompt and tool schemas again, and every fresh listing parsed all of it.
    root = tmp_path / "runs"
    for i in range(4):
        with EventLog(f"r{i}", root) as log:
            log.start_run({"task": f"task {i}", "system": "be careful", "tools": TOOLS, "retry": {"max_attempts": 6}})
    truth = _settings(root)
    list_runs(root)  # writes the sidecar
    parts = [name for name, _ in json.loads((root / SIDECAR).read_text())["parts"]]
    assert sorted(parts) == ["retry", "system", "task", "task", "task", "task", "tools"]

    listed = list_runs(root)  # a fresh store: the rows from the sidecar
    assert {s.run_id: s.settings for s in listed} == truth
    listed[0].settings["tools"][0]["name"] = "changed"
    listed[0].settings["retry"]["max_attempts"] = 1
    assert all(s.settings["tools"] == TOOLS and s.settings["retry"] == {"max_attempts": 6} for s in listed[1:])
    with open_store(root) as store:
        rows = store.index_rows()  # type: ignore[attr-defined]
        rows[0].settings["tools"].append("mine")
        assert all(r.settings["tools"] == TOOLS for r in rows[1:])
        assert copy.deepcopy(rows[1]) == rows[1] and pickle.loads(pickle.dumps(rows[1])) == rows[1]
        assert {r.run_id: dict(r.settings) for r in store.index_rows()} == {  # type: ignore[attr-defined]
            **truth, rows[0].run_id: {**truth[rows[0].run_id], "tools": [*TOOLS, "mine"]},
        }, "the caller's change is its row's alone"
        with EventLog("new", store) as log:  # rows made, rows unmade and a new one, written together
            log.start_run({"task": "new", "system": "be careful", "tools": TOOLS})
        list_runs(store)
    assert {s.run_id: s.settings for s in list_runs(root)} == _settings(root)
    assert TOOLS[0]["name"] == "bash"


def test_a_page_makes_only_its_own_rows_of_the_sidecar(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A fresh listing of 100,000 runs made every row (8 s) to show 100 of them.
    root = tmp_path / "runs"
    _runs(root, 12)
    list_runs(root)  # writes the sidecar
    made: list[str] = []
    row = Stored.row

    def counted(stored: Stored, run_id: str, at: int) -> IndexRow | None:
        made.append(run_id)
        return row(stored, run_id, at)

    monkeypatch.setattr(Stored, "row", counted)
    page = list_runs(root, limit=3, offset=2, status="completed")
    assert [s.run_id for s in page] == [s.run_id for s in list_runs_from_logs(root)][2:5]
    assert sorted(made) == sorted(s.run_id for s in page)


def test_the_parts_of_deleted_runs_leave_the_sidecar(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    _runs(root, 3)
    with EventLog("gone", root) as log:
        log.start_run({"task": "only this run's"})
    list_runs(root)
    assert ["task", "only this run's"] in json.loads((root / SIDECAR).read_text())["parts"]
    delete_run("gone", root)
    assert sorted(s.run_id for s in list_runs(root)) == ["r0", "r1", "r2"]
    assert json.loads((root / SIDECAR).read_text())["parts"] == [["task", "t"]]


def test_a_setting_nested_deeper_than_python_recurses_lists_as_json_reads_it(tmp_path: Path) -> None:
    """Version 3 copied each setting by recursion: one run whose tool schema nested 600 deep
    (JSON writes and reads that; the log holds it) made every listing of the folder raise
    RecursionError, first as its row was made from the log, then as it was read back."""
    schema: Any = {"type": "string"}
    for _ in range(300):
        schema = {"items": [schema]}  # 600 deep
    with EventLog("deep", tmp_path) as log:
        log.start_run({"task": "t", "schema": schema})
    for _ in range(2):  # made from the log, then read from the sidecar
        (row,) = list_runs(tmp_path)
        assert row.settings["schema"] == schema and row.settings["schema"] is not schema
    assert json.loads((tmp_path / SIDECAR).read_text())["runs"] == ["deep"]


def test_a_sidecar_nested_deeper_than_json_loads_recurses_is_rebuilt_from_the_logs(tmp_path: Path) -> None:
    """A sidecar of arrays nested 200,000 deep (garbage from a disk or a program) made every
    listing of the folder, and every JSONL worker's look, raise RecursionError."""
    _runs(tmp_path, 2)
    list_runs(tmp_path)
    (tmp_path / SIDECAR).write_text("[" * 200_000 + "]" * 200_000)
    assert sorted(s.run_id for s in list_runs(tmp_path)) == ["r0", "r1"]
    assert json.loads((tmp_path / SIDECAR).read_text())["runs"] == ["r0", "r1"]
