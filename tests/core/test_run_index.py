"""The run index stays equal to the logs: after writers are SIGKILLed at random moments on
every store, and on JSONL when its sidecar is missing, stale or damaged (rebuilt, never believed)."""

from __future__ import annotations

import contextlib
import json
import os
import random
import shlex
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from nb_durable import EventLog, list_runs, run_step
from nb_durable.core.index.check import check_index
from nb_durable.core.index.rows import IndexRow, current_rule
from nb_durable.core.runs import list_runs_from_logs
from nb_durable.core.stores import open_store
from nb_durable.core.stores.jsonl_index import SIDECAR
from nb_durable.core.stores.jsonl_sidecar import COLUMNS
from nb_durable.core.stores.memory import MemoryStore
from nb_durable.core.whole_runs.fork import fork
from nb_durable.core.whole_runs.retention import delete_run, prune_runs
from nb_durable.core.whole_runs.transfer import copy_runs
from nb_durable.errors import TornLineWarning
from tests import forkserver
from tests.conftest import STORE_KINDS, make_store_url, subprocess_env

WRITER = """
import sys, time
from nb_durable import EventLog, run_step
store, name = sys.argv[1], sys.argv[2]
n = 0
while True:
    with EventLog(f"{name}-{n}", store, durability="none") as log:
        log.start_run({"task": "t", "queued": n % 3 == 0, "priority": n % 4, "tags": [name]})
        print(n, flush=True)
        if n % 3:
            for i in range(20):
                run_step(log, f"s{i}", lambda i=i: {"i": i, "pad": "x" * (i * 50)}, effect="external" if i % 5 == 0 else "pure")
            if n % 2:
                log.finish_run("completed", output={"text": "done"})
    n += 1
"""


def _view(store: str) -> list[tuple[str, str, int, int, float | None]]:
    return sorted((s.run_id, s.status, s.steps, s.completed_steps, s.updated_at) for s in list_runs(store))


def _truth(store: str) -> list[tuple[str, str, int, int, float | None]]:
    return sorted((s.run_id, s.status, s.steps, s.completed_steps, s.updated_at) for s in list_runs_from_logs(store))


KILLED_KINDS = [pytest.param(k, marks=pytest.mark.postgres) if k == "postgres" else k for k in STORE_KINDS if k != "memory"]


@pytest.mark.parametrize("kind", KILLED_KINDS)
@pytest.mark.slow(15)
# A SIGKILL inside a JSONL write can leave its line torn (rarely: the kernel stops a write
# to the page cache part way only for a fatal signal); readers then warn, as they should.
# That a torn tail keeps the index equal to the logs is pinned without chance below.
@pytest.mark.filterwarnings("ignore::nb_durable.errors.TornLineWarning")
def test_the_index_equals_the_logs_after_writers_are_killed(kind: str, tmp_path: Path) -> None:
    store = make_store_url(kind, tmp_path)
    open_store(store).close()  # created (and migrated) before the writers race to
    rng = random.Random(25)
    for round_ in range(4):
        writers = [
            forkserver.Popen([sys.executable, "-c", WRITER, store, f"w{round_}{i}"], stdout=subprocess.PIPE, text=True, env=subprocess_env())
            for i in range(2)
        ]
        for writer in writers:
            assert writer.stdout is not None
            assert writer.stdout.readline(), "the writer started its first run"
        for writer in writers:
            # Each dies at a moment of its own: between runs, inside a step, between event and index.
            time.sleep(rng.uniform(0.05, 0.4))
            os.kill(writer.pid, signal.SIGKILL)
            writer.wait()
            assert writer.stdout is not None
            writer.stdout.close()  # read only to its first line: the pipe is left to close
        with open_store(store) as opened:
            assert check_index(opened) == []
        assert _view(store) == _truth(store)
    assert any(s.status == "in_doubt" for s in list_runs(store)) or any(s.status == "interrupted" for s in list_runs(store))


def test_a_torn_tail_left_by_a_killed_writer_keeps_the_index_equal_to_the_logs(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    with EventLog("torn", root, durability="none") as log:
        log.start_run({"task": "t"})
        run_step(log, "s0", lambda: 1)
        run_step(log, "s1", lambda: 2)
    listed_before = [(s.status, s.steps, s.completed_steps) for s in list_runs(root)]
    with open(root / "torn.jsonl", "ab") as f:
        f.write(b'{"seq": 5, "kind": "step_sta')  # a killed writer's next intent, cut short
    with pytest.warns(TornLineWarning, match="torn last line"):
        assert [(s.status, s.steps, s.completed_steps) for s in list_runs(root)] == listed_before
    with pytest.warns(TornLineWarning), open_store(str(root)) as opened:
        assert check_index(opened) == []
    with pytest.warns(TornLineWarning):
        assert _view(str(root)) == _truth(str(root))


def _sidecar_value(data: dict[str, Any], run_id: str, column: str, value: Any = None) -> Any:
    """A run's value in a sidecar's column, set to ``value`` first unless None."""
    values = data["values"][COLUMNS.index(column)]
    at = data["runs"].index(run_id)
    if value is not None:
        values[at] = value
    return values[at]


def _jsonl_runs(root: Path) -> None:
    for i in range(3):
        with EventLog(f"r{i}", root) as log:
            log.start_run({"task": "t"})
            run_step(log, "s", lambda i=i: i)  # type: ignore[misc]
            if i:
                log.finish_run("completed")


def test_a_missing_stale_or_damaged_jsonl_sidecar_is_rebuilt_never_believed(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    _jsonl_runs(root)
    assert [s.status for s in sorted(list_runs(root), key=lambda s: s.run_id)] == ["interrupted", "completed", "completed"]
    sidecar = root / SIDECAR
    assert sidecar.exists()
    # Stale: a row that claims r0 completed, for a log of another size. The log wins.
    data = json.loads(sidecar.read_text())
    _sidecar_value(data, "r0", "size", _sidecar_value(data, "r0", "size") - 1)
    _sidecar_value(data, "r0", "status", "completed")
    _sidecar_value(data, "r0", "ended", True)
    sidecar.write_text(json.dumps(data))
    assert {s.run_id: s.status for s in list_runs(root)}["r0"] == "interrupted"
    # A log changed behind the index's back (same writer path, new lines): seen at once.
    with EventLog("r0", root) as log:
        run_step(log, "s", lambda: 0)
        log.finish_run("failed", error="no")
    assert {s.run_id: s.status for s in list_runs(root)}["r0"] == "failed"
    # Missing, then damaged: rebuilt from the logs.
    sidecar.unlink()
    assert len(list_runs(root)) == 3 and sidecar.exists()
    sidecar.write_bytes(b"{not json")
    assert sorted(s.run_id for s in list_runs(root)) == ["r0", "r1", "r2"]
    (root / "r2.jsonl").unlink()
    assert sorted(s.run_id for s in list_runs(root)) == ["r0", "r1"]
    with open_store(root) as store:
        assert check_index(store) == []


@pytest.mark.parametrize(
    "shape",
    [
        "null", "a list", "values as a dict", "runs as text", "a row under another run's name", "a row of other types",
        "a column short", "columns of another order", "a part missing", "parts damaged", "parts as text",
        "figures damaged", "figures of other types", "the layout before",
    ],
)  # fmt: skip
def test_a_jsonl_sidecar_of_another_shape_is_rebuilt_never_believed(tmp_path: Path, shape: str) -> None:
    # Valid JSON, but not what _write writes (written by hand, by another program, or by an older
    # nb_durable): every listing must still give the logs' rows, never raise, never show a run or
    # value there is not. Where r0's row could be believed, it says r0 completed (it is interrupted).
    root = tmp_path / "runs"
    _jsonl_runs(root)
    truth = _truth(str(root))
    assert _view(str(root)) == truth  # which writes the sidecar
    sidecar = root / SIDECAR
    data = json.loads(sidecar.read_text())
    old_row = {  # r0's row as the layout before held it: whole, under its run id
        "run_id": "r0", **{c: _sidecar_value(data, "r0", c) for c in COLUMNS[2:]},
        "tags": [], "settings": {"task": "t"}, "output": None, "figures": {}, "status": "completed", "ended": True,
    }  # fmt: skip
    size, mtime = _sidecar_value(data, "r0", "size"), _sidecar_value(data, "r0", "mtime")
    _sidecar_value(data, "r0", "status", "completed")
    _sidecar_value(data, "r0", "ended", True)
    values = data["values"]
    status, steps, settings, figures = (COLUMNS.index(c) for c in ("status", "steps", "settings", "figures"))
    at = data["runs"].index("r0")
    sidecar.write_text(json.dumps({
        "null": None,
        "a list": [data],
        "values as a dict": {**data, "values": dict(zip(COLUMNS, values, strict=True))},
        "runs as text": {**data, "runs": "r0"},
        "a row under another run's name": {**data, "runs": ["ghost" if r == "r0" else r for r in data["runs"]]},
        "a row of other types": {**data, "values": [
            [7 if (c == status and i == at) else "x" if (c == steps and i == at) else v for i, v in enumerate(column)]
            for c, column in enumerate(values)
        ]},
        "a column short": {**data, "values": [column[:-1] if c == steps else column for c, column in enumerate(values)]},
        "columns of another order": {**data, "columns": data["columns"][::-1], "values": values[::-1]},
        "a part missing": {**data, "values": [
            [str(len(data["parts"])) if (c == settings and i == at) else v for i, v in enumerate(column)]
            for c, column in enumerate(values)
        ]},
        "parts damaged": {**data, "parts": [["task"]]},
        "parts as text": {**data, "parts": "task"},
        "figures damaged": {**data, "values": [
            ["{" if (c == figures and i == at) else v for i, v in enumerate(column)] for c, column in enumerate(values)
        ]},
        "figures of other types": {**data, "values": [
            ['{"usd":"x"}' if (c == figures and i == at) else v for i, v in enumerate(column)] for c, column in enumerate(values)
        ]},
        "the layout before": {"version": 2, "runs": {"r0": [size, mtime, old_row]}},
    }[shape]))  # fmt: skip
    assert _view(str(root)) == truth
    with open_store(root) as store:
        assert check_index(store) == []


def test_a_sqlite_store_from_before_the_index_is_migrated_with_its_runs(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "old.db"
    with EventLog("old", f"sqlite:///{path}") as log:
        log.start_run({"task": "t", "queued": True})
    conn = sqlite3.connect(path)
    conn.execute("DROP TABLE nb_durable_index")  # as an nb_durable from before the index left it
    conn.commit()
    conn.close()
    assert [(s.run_id, s.status) for s in list_runs(f"sqlite:///{path}")] == [("old", "queued")]
    with open_store(f"sqlite:///{path}") as store:
        assert check_index(store) == []


ROW_KINDS = [pytest.param(k, marks=pytest.mark.postgres) if k == "postgres" else k for k in ("sqlite", "postgres")]


@pytest.mark.parametrize("kind", ROW_KINDS)
def test_a_writer_sends_the_run_settings_with_its_row_once_per_session_and_the_row_keeps_them(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The settings (every tool's schema) are most of a row's bytes and change only when a
    # session starts; the row is rewritten with every append.
    from nb_durable.core.index.rows import IndexRow

    store = make_store_url(kind, tmp_path)
    sent: list[bool] = []
    encoded = IndexRow.encoded

    def counted(row: IndexRow, *, settings: bool = True) -> str:
        sent.append(settings)
        return encoded(row, settings=settings)

    monkeypatch.setattr(IndexRow, "encoded", counted)
    settings = {"task": "t", "tools": [{"name": f"tool{i}", "input_schema": {"type": "object"}} for i in range(20)]}
    for session in range(2):
        with EventLog("slim", store) as log:
            if session == 0:
                log.start_run(settings)
            for i in range(5 * (session + 1)):  # the second session replays the first's five
                run_step(log, f"s{i}", partial(dict, i=i), effect="external")
    assert len(sent) >= 20 and sent.count(True) <= 2, sent  # 21 events in all, in two sessions
    (row,) = [s for s in list_runs(store) if s.run_id == "slim"]
    assert row.settings == settings and row.steps == 10


def test_a_fork_is_as_recent_as_its_start_not_as_the_steps_it_copied(store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run's last activity was its last line's time; a fork's lines after its start are the
    old run's, so a fork made now listed as days idle and prune --older-than deleted it."""
    real = time.time
    with monkeypatch.context() as past:
        past.setattr(time, "time", lambda: real() - 3 * 86400)
        with EventLog("old", store_url) as log:
            run_step(log, "a", lambda: 1)
            run_step(log, "b", lambda: 2)
    forked_at = real()
    fork("old", "new", at=1, root=store_url).close()
    updated = {s.run_id: s.updated_at or 0.0 for s in list_runs(store_url)}
    assert updated["new"] >= forked_at - 1 > updated["old"] + 2 * 86400, updated
    assert [s.run_id for s in list_runs(store_url)] == ["new", "old"]  # newest first
    assert prune_runs("1d", store_url, dry_run=True).deleted == ("old",)
    assert _view(store_url) == _truth(store_url)  # the index, rebuilt from the logs, agrees


def _make_stale(store_url: str, run_id: str, rule: str | None = None) -> None:
    """Give the run a row whose figures the log does not say, as a hand edit would leave it
    (a writer trusts the figures of a row that describes the very log it opens), or, with
    ``rule``, as an older nb_durable whose rule counted otherwise would."""
    with open_store(store_url) as store:
        if getattr(store, "index_written", True):
            (row,) = store.index_rows([run_id])  # type: ignore[attr-defined]
            out = store.open_writer(run_id)
            try:
                out.put_index(replace(row, figures={**row.figures, "tokens": 7.0}, rule=row.rule if rule is None else rule))
            finally:
                out.close()
            return
    list_runs(store_url)  # a whole listing writes the sidecar
    sidecar = Path(store_url) / SIDECAR
    data = json.loads(sidecar.read_text())
    _sidecar_value(data, run_id, "figures", json.dumps({"tokens": 7.0}))
    if rule is not None:
        _sidecar_value(data, run_id, "rule", rule)
    sidecar.write_text(json.dumps(data))


@pytest.mark.parametrize("kind", KILLED_KINDS)
def test_a_row_an_older_rule_made_is_believed_by_no_reader_and_no_writer(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rows an older nb_durable made, before a change of the rule that counts a run's figures,
    kept their old figures in every listing, and a writer opening the run carried them on,
    until someone ran check-index --repair; nothing said they were another rule's."""
    from nb_durable.cli.commands import main

    store_url = make_store_url(kind, tmp_path)
    for run_id in ("a", "b", "c"):
        with EventLog(run_id, store_url) as log:
            run_step(log, "s", lambda: 1)
    _make_stale(store_url, "a", rule="2.1")
    _make_stale(store_url, "b", rule="")  # written before rows were stamped
    assert {s.run_id: s.figures for s in list_runs(store_url)} == {"a": {}, "b": {}, "c": {}}
    now = current_rule()
    if kind == "jsonl":  # the sidecar is a cache: a row of another rule in it is made again from the log
        assert main(["check-index", "--store", store_url]) == 0, capsys.readouterr().out
        assert _sidecar_value(json.loads((Path(store_url) / SIDECAR).read_text()), "a", "rule") == now
        return
    assert main(["check-index", "--store", store_url]) == 1
    out = capsys.readouterr().out
    assert f"a: written by an older nb_durable (rule 2.1, now {now}); figures {{'tokens': 7.0}} (the log says {{}})" in out, out
    assert f"b: written by an older nb_durable (rule unstamped, now {now})" in out, out
    assert "c:" not in out, out
    with EventLog("a", store_url) as log:  # the run's next writer counts its figures again
        run_step(log, "s", lambda: 1)
        run_step(log, "t", lambda: 2)
    with open_store(store_url) as store:
        problems = check_index(store)
    assert [p.split(":")[0] for p in problems] == ["b"], problems
    assert main(["check-index", "--repair", "--store", store_url]) == 0
    assert "repaired the rows of 1 run(s) from their logs: b" in capsys.readouterr().out
    with open_store(store_url) as store:
        assert check_index(store) == []
        assert all(row.rule == now for row in store.index_rows())  # type: ignore[attr-defined]


@pytest.mark.parametrize("kind", KILLED_KINDS)
def test_check_index_repair_rewrites_stale_rows_from_the_logs_and_leaves_a_run_being_written_to_its_writer(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A stale row could only be reported: it stayed until the run was written again, and a
    writer that opened the run kept the row's figures (they described the very log it read)."""
    from nb_durable.cli.commands import main

    store_url = make_store_url(kind, tmp_path)
    for run_id in ("a", "b", "busy"):
        with EventLog(run_id, store_url) as log:
            run_step(log, "s", lambda: 1)
    for run_id in ("a", "busy"):
        _make_stale(store_url, run_id)
    assert main(["check-index", "--store", store_url]) == 1
    out = capsys.readouterr().out
    assert "a: figures {'tokens': 7.0} (the log says {})" in out and "busy: figures {'tokens': 7.0}" in out, out
    assert f"nb-durable check-index --repair --store {shlex.quote(store_url)} rewrites those rows from the logs" in out, out
    with EventLog("busy", store_url):  # its writer, holding the lease while the repair runs
        assert main(["check-index", "--repair", "--store", store_url]) == 1
    out = capsys.readouterr().out
    assert "repaired the rows of 1 run(s) from their logs: a" in out, out
    assert "busy: being written now, so left to its writer" in out, out
    assert main(["check-index", "--repair", "--store", store_url]) == 0
    assert "repaired the rows of 1 run(s) from their logs: busy" in capsys.readouterr().out
    with open_store(store_url) as store:
        assert check_index(store) == []
    assert main(["check-index", "--store", store_url]) == 0
    assert "equals its logs (3 run(s))" in capsys.readouterr().out


@pytest.mark.parametrize("kind", ROW_KINDS)
def test_check_index_repair_removes_the_row_of_a_run_with_no_log_and_never_writes_one(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A repair whose run was pruned between its look and its taking the run's lease wrote a
    row for the run it found gone, and a row with no log, once there, stayed: check-index named
    it, yet --repair went over the logs alone, left it and exited 0, and the run listed forever."""
    from nb_durable.cli.commands import main
    from nb_durable.core.index import check

    store_url = make_store_url(kind, tmp_path)
    for run_id in ("a", "gone"):
        with EventLog(run_id, store_url) as log:
            run_step(log, "s", lambda: 1)
    _make_stale(store_url, "gone")
    look = check.rebuild_rows

    def look_then_prune(store: Any, *args: Any, **kwargs: Any) -> dict[str, IndexRow]:
        rows = look(store, *args, **kwargs)
        delete_run("gone", store)  # a prune, between the repair's look and its lease
        return rows

    monkeypatch.setattr(check, "rebuild_rows", look_then_prune)
    with open_store(store_url) as store:
        check.repair_index(store)
    monkeypatch.undo()
    assert [s.run_id for s in list_runs(store_url)] == ["a"]
    with open_store(store_url) as store:  # a row with no log, as a hand edit or an older repair left it
        [row] = store.index_rows()  # type: ignore[attr-defined]
        ghost = store.open_writer("ghost")
        ghost.put_index(replace(row, run_id="ghost"))
        ghost.close()
    assert sorted(s.run_id for s in list_runs(store_url)) == ["a", "ghost"]
    assert main(["check-index", "--store", store_url]) == 1
    assert "ghost: in the index but has no readable log" in capsys.readouterr().out
    assert main(["check-index", "--repair", "--store", store_url]) == 0
    assert "repaired the rows of 1 run(s) from their logs: ghost" in capsys.readouterr().out
    assert [s.run_id for s in list_runs(store_url)] == ["a"]
    assert main(["check-index", "--store", store_url]) == 0


@pytest.mark.parametrize("kind", ROW_KINDS)
def test_a_log_whose_priority_no_index_column_holds_is_written_and_indexed_at_the_nearest_end(kind: str, tmp_path: Path) -> None:
    """A priority past what the index column holds (PostgreSQL's integer): a log from a JSONL
    folder (which has no column) copied in, or written from Python, failed at its first write
    ('integer out of range'; on SQLite an OverflowError's traceback) and could never be stored."""
    from nb_durable.core.whole_runs.transfer import copy_runs

    folder = str(tmp_path / "runs")
    for run_id, priority in (("high", 10**20), ("low", -(10**20))):
        with EventLog(run_id, folder) as log:
            log.start_run({"task": "t", "queued": True, "priority": priority})
    store = make_store_url(kind, tmp_path)
    copy_runs(folder, store)
    with open_store(store) as opened:
        assert {r.run_id: r.priority for r in opened.index_rows()} == {"high": 2**31 - 1, "low": -(2**31)}  # type: ignore[attr-defined]
        assert check_index(opened) == []
    assert [s.run_id for s in list_runs(store)] != []


@pytest.mark.parametrize("kind", ROW_KINDS)
def test_check_index_names_a_filter_column_that_says_other_than_its_row_and_repair_rewrites_it(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Listings and the worker's claim filter by the index's columns, not its rows; check-index
    compared only the rows, so a column edited by hand (or by a tool gone wrong) hid a run from
    ``runs --status`` while check-index said the index equalled its logs."""
    from nb_durable.cli.commands import main

    store_url = make_store_url(kind, tmp_path)
    for run_id in ("a", "b"):
        with EventLog(run_id, store_url) as log:
            log.start_run({"task": "t", "tags": ["x"]})
            run_step(log, "s", lambda: 1)
            log.finish_run("completed")
    with open_store(store_url) as store:
        if kind == "sqlite":  # by hand: another program's connection to the file
            with contextlib.closing(sqlite3.connect(store.path)) as conn:  # type: ignore[attr-defined]
                conn.execute("UPDATE nb_durable_index SET status = 'failed', pending = 1 WHERE run_id = 'a'")
                conn.commit()
        else:
            conn = store._conn  # type: ignore[attr-defined]
            conn.execute("UPDATE nb_durable_index SET status = 'failed', pending = true, tags = '[]' WHERE run_id = 'a'")
    assert [s.run_id for s in list_runs(store_url, status="completed")] == ["b"]  # the harm: a hides
    assert main(["check-index", "--store", store_url]) == 1
    out = capsys.readouterr().out
    assert "a: its status column 'failed' (its row says 'completed'; listings and claims filter by the column)" in out, out
    assert "its pending column" in out and "b:" not in out, out
    if kind == "postgres":
        assert "its tags column [] (its row says ['x']" in out, out
    assert main(["check-index", "--repair", "--store", store_url]) == 0
    assert "repaired the rows of 1 run(s) from their logs: a" in capsys.readouterr().out
    with open_store(store_url) as store:
        assert check_index(store) == [] and store.column_drift() == {}  # type: ignore[attr-defined]
    assert sorted(s.run_id for s in list_runs(store_url, status="completed", tags=["x"])) == ["a", "b"]


def test_list_runs_takes_one_status_tag_or_run_id_as_a_name_not_as_its_letters(tmp_path: Path) -> None:
    """``list_runs(store, status="completed")`` failed with "status must be one of ..., not 'c'":
    a str is an iterable of its letters."""
    store_url = str(tmp_path / "runs")
    for run_id, tags in (("a", ["x"]), ("b", ["xy"])):
        with EventLog(run_id, store_url) as log:
            log.start_run({"task": "t", "tags": tags})
            log.finish_run("completed")
    assert [s.run_id for s in list_runs(store_url, status="completed", tags="x", run_ids="a")] == ["a"]
    assert [s.run_id for s in list_runs(store_url, tags="xy")] == ["b"]


class _ResumedMeanwhile(MemoryStore):
    """A store whose run ``r`` is resumed (a step recorded now) between a prune's listing and
    its delete, as another process would do it."""

    armed = resumed = False

    def open_writer(self, run_id: str) -> Any:
        if run_id == "r" and self.armed and not self.resumed:
            self.resumed = True
            with EventLog("r", self) as log:
                run_step(log, "a", lambda: 1)
                run_step(log, "again", lambda: 2)
        return super().open_writer(run_id)


def test_prune_leaves_the_lease_of_a_run_resumed_since_its_listing_free(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run that no longer matched under its lease was kept, but its lease stayed held by the
    prune: nobody could resume or delete it while that process lived."""
    store = _ResumedMeanwhile()
    real = time.time
    with monkeypatch.context() as past:
        past.setattr(time, "time", lambda: real() - 3 * 86400)
        with EventLog("r", store) as log:
            run_step(log, "a", lambda: 1)
    store.armed = True
    assert prune_runs("1d", store).deleted == ()
    assert store.resumed and store.holder("r") is None
    with EventLog("r", store) as log:  # taken again at once
        assert log.writer.history.step_count == 2


STUCK_LISTER = """
import os, sys, time
from nb_durable import list_runs
real = os.replace
def stuck(src, dst):
    if str(src).endswith(".tmp"):  # the sidecar is written, not yet renamed: killed here
        print("written", flush=True)
        time.sleep(60)
    return real(src, dst)
os.replace = stuck
list_runs(sys.argv[1])
"""


def test_a_sidecar_tmp_left_by_a_killed_reader_is_removed_by_the_next_write_and_a_live_writer_s_kept(tmp_path: Path) -> None:
    """A reader killed between writing the sidecar's new file and renaming it left the file
    behind for ever; the next write removes it, and leaves alone the file of a writer that may
    still be writing (this process, or a host whose processes it cannot see)."""
    root = tmp_path / "runs"
    _jsonl_runs(root)
    assert not (root / SIDECAR).exists(), "the first listing writes it"
    lister = forkserver.Popen([sys.executable, "-c", STUCK_LISTER, str(root)], stdout=subprocess.PIPE, text=True, env=subprocess_env())
    assert lister.stdout is not None and lister.stdout.readline() == "written\n"
    os.kill(lister.pid, signal.SIGKILL)
    lister.wait()
    lister.stdout.close()  # read only to its first line: the pipe is left to close
    index = root / SIDECAR.parent
    (left,) = index.glob("*.tmp")
    assert f".{lister.pid}." in left.name
    mine = index / f".runs.{socket.gethostname()}.{os.getpid()}.1.tmp"  # a live writer, mid-write
    elsewhere = index / ".runs.another-host.1.1.tmp"  # its pid means nothing here
    old = index / ".runs.4242.1.tmp"  # an older nb_durable's name, a day old: no write takes that long
    for planted in (mine, elsewhere, old):
        planted.write_text("{}")
    os.utime(old, (time.time() - 86400, time.time() - 86400))
    assert _view(str(root)) == _truth(str(root))  # which writes the sidecar
    assert (root / SIDECAR).exists()
    assert sorted(p.name for p in index.glob("*.tmp")) == sorted([mine.name, elsewhere.name])


NOT_A_LOG = """
import resource, sys, warnings
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))  # reading /dev/zero whole must fail fast, not take the machine
from nb_durable import list_runs, read_run
from nb_durable.errors import StoreError
with warnings.catch_warnings(record=True) as heard:
    warnings.simplefilter("always")
    print([row.run_id for row in list_runs(sys.argv[1])])
print(sorted(str(w.message).split(":")[0].rsplit("/", 1)[1] for w in heard))
for run_id in ("zero", "fifo"):
    try:
        read_run(run_id, sys.argv[1])
    except StoreError as e:
        print(e)
"""


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")
def test_a_device_or_a_fifo_named_like_a_log_is_skipped_and_named_never_read(tmp_path: Path) -> None:
    """A symlink to /dev/zero was read until memory ran out, a FIFO blocked every listing for
    ever: run_bash can make either in the default store, which is under the workspace."""
    runs = tmp_path / "runs"
    with EventLog("real", runs) as log:
        run_step(log, "a", lambda: 1)
    (runs / "zero.jsonl").symlink_to("/dev/zero")
    os.mkfifo(runs / "fifo.jsonl")
    done = subprocess.run([sys.executable, "-c", NOT_A_LOG, str(runs)], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    listed, skipped, *errors = done.stdout.splitlines()
    assert listed == "['real']" and skipped == "['fifo.jsonl', 'zero.jsonl']"
    assert errors == [
        f"cannot read {runs / name}.jsonl: it is not a regular file (a device, a pipe or a symlink to one), so it holds "
        "no run; move it out of the runs folder"
        for name in ("zero", "fifo")
    ]


@pytest.mark.parametrize("name", ["my copy", "-x", "a\nb", os.fsdecode(b"caf\xe9")])
def test_a_file_no_run_id_names_is_not_taken_for_a_run(tmp_path: Path, name: str) -> None:
    """'my copy.jsonl' put in the runs folder by hand stopped check-index and copy with "'my copy'
    cannot name a run", about a run id nobody typed."""
    runs = tmp_path / "runs"
    with EventLog("real", runs) as log:
        run_step(log, "a", lambda: 1)
    (runs / f"{name}.jsonl").write_bytes((runs / "real.jsonl").read_bytes())
    store = open_store(str(runs))
    assert store.run_ids() == ["real"]
    assert check_index(store) == []
    copied = open_store(str(tmp_path / "copy"))
    copy_runs(store, copied)
    assert copied.run_ids() == ["real"]
