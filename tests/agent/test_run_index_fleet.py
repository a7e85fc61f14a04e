"""What the run index gives the fleet: ``nb-durable runs`` pages and filters, ``check-index``
finds an index that differs from the logs, ``run --batch --priority``, and on PostgreSQL a
NOTIFY wakes an idle worker at once, while a run no notification announced is still found."""

from __future__ import annotations

import contextlib
import json
import re
import shlex
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nb_durable.agent.fleet.batch import submit
from nb_durable.agent.fleet.taken import Taken
from nb_durable.agent.fleet.worker import ResumeWorker
from nb_durable.core.index.cursor import Cursor
from nb_durable.core.log import EventLog, run_step
from nb_durable.core.runs import list_runs, read_run, read_summary
from nb_durable.core.stores import open_store
from nb_durable.errors import SettingError, StoreError
from tests import forkserver
from tests.conftest import make_store_url, subprocess_env
from tests.waiting import wait_until

CLI = [sys.executable, "-m", "nb_durable.cli"]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return forkserver.run([*CLI, *args], env=subprocess_env(), capture_output=True, text=True, timeout=120, check=False)


def test_runs_pages_and_filters_and_check_index_finds_a_wrong_row(tmp_path: Path) -> None:
    store = make_store_url("sqlite", tmp_path)
    for i in range(6):
        with EventLog(f"r{i}", store) as log:
            log.start_run({"task": f"task {i}", "tags": ["even" if i % 2 == 0 else "odd"], "batch": "b" if i < 4 else None})
            run_step(log, "s", lambda: 1)
            if i != 5:
                log.finish_run("completed")
        time.sleep(0.002)  # distinct update times: the order is the runs' own
    listed = cli("runs", "--store", store, "--limit", "2")
    assert listed.returncode == 0, listed.stderr
    rows = [line.split()[0] for line in listed.stdout.splitlines()[1:3]]
    assert rows == ["r5", "r4"]
    r4 = read_summary("r4", store)
    assert listed.stdout.splitlines()[-1] == (
        f"... more runs: nb-durable runs --store {shlex.quote(store)} --limit 2 --after {r4.cursor} (or --limit 0 for all)"
    )
    # The hint repeats the store and filters given: without them it listed other runs, or another store.
    even = cli("runs", "--store", store, "--tag", "even", "--status", "completed", "--batch", "b", "--limit", "1")
    hint = even.stdout.splitlines()[-1].removeprefix("... more runs: ").removesuffix(" (or --limit 0 for all)")
    assert hint.endswith(f" --status completed --tag even --batch b --limit 1 --after {read_summary('r2', store).cursor}"), even.stdout
    next_page = cli(*shlex.split(hint)[1:]).stdout
    assert [line.split()[0] for line in next_page.splitlines()[1:]] == ["r0"], next_page
    odd = cli("runs", "--store", store, "--tag", "odd", "--status", "completed").stdout
    assert [line.split()[0] for line in odd.splitlines()[1:]] == ["r3", "r1"]
    batch = cli("runs", "--store", store, "--batch", "b", "--status", "interrupted").stdout
    assert batch == f"no runs in {store} match those filters\n", batch
    beyond = cli("runs", "--store", store, "--offset", "50").stdout
    assert beyond == f"no runs in {store} past the first 50\n", beyond
    last = cli("runs", "--store", store, "--after", read_summary("r0", store).cursor).stdout
    assert last == f"no runs in {store} after r0\n", last
    assert cli("runs", "--store", store, "--status", "interrupted").stdout.splitlines()[1].split()[:2] == ["r5", "interrupted"]
    # The next page is the runs after the cursor's run as they are then: r1, written since the
    # first page, moves ahead of the cursor and pushes no run shown already onto it again
    # (by --offset 2 it pushed r4 onto the second page too).
    with EventLog("r1", store) as log:
        run_step(log, "s", lambda: 1)
        run_step(log, "again", lambda: 2)
    page = cli("runs", "--store", store, "--limit", "2", "--after", r4.cursor).stdout
    assert [line.split()[0] for line in page.splitlines()[1:3]] == ["r3", "r2"], page
    # A cursor of this store's listing, given to another store's, is refused: it listed the other
    # from r4's key without a word. One of an older nb_durable names no store, and is taken.
    other = str(tmp_path / "other")
    with EventLog("o1", other) as log:
        log.start_run({"task": "elsewhere"})
    foreign = cli("runs", "--store", other, "--after", r4.cursor)
    assert foreign.returncode == 2 and foreign.stdout == "", foreign.stdout
    assert foreign.stderr.startswith(f"nb-durable: --after was made by a listing of another store than {other} ("), foreign.stderr
    old = Cursor.at(0.0, "r0").token  # version 1: no fingerprint
    assert cli("runs", "--store", other, "--after", old).stdout == f"no runs in {other} after r0\n"
    offset = cli("runs", "--store", store, "--limit", "2", "--offset", "2").stdout
    assert [line.split()[0] for line in offset.splitlines()[1:3]] == ["r4", "r3"], offset

    checked = cli("check-index", "--store", store)
    assert checked.returncode == 0 and "equals its logs (6 run(s))" in checked.stdout, checked.stdout + checked.stderr
    nowhere = cli("check-index", "--store", str(tmp_path / "mistyped"))  # not "equals its logs": there are none
    assert nowhere.returncode == 2 and nowhere.stderr == (
        f"nb-durable: there is no store at the folder {tmp_path / 'mistyped'}: that folder does not exist (is the store's name right?)\n"
    )
    (tmp_path / "empty").mkdir()
    empty = cli("check-index", "--store", str(tmp_path / "empty"))
    assert empty.returncode == 0 and empty.stdout == f"{tmp_path / 'empty'} holds no runs, so its run index has nothing to check\n"
    conn = sqlite3.connect(tmp_path / "runs.db")
    data = json.loads(conn.execute("SELECT data FROM nb_durable_index WHERE run_id = 'r2'").fetchone()[0])
    conn.execute("UPDATE nb_durable_index SET data = ? WHERE run_id = 'r2'", (json.dumps({**data, "steps": 9}),))
    conn.commit()
    conn.close()
    wrong = cli("check-index", "--store", store)
    assert wrong.returncode == 1 and "r2: steps 9 (the log says 1)" in wrong.stdout, wrong.stdout


def test_the_runs_columns_stay_aligned_past_a_long_run_id(tmp_path: Path) -> None:
    """A child run's id (parent.delegate-0-0-toolu_01...) is past the id column's 40 characters,
    budget_exhausted past the status column's 12: their rows' columns shifted right of the header's."""
    store = str(tmp_path / "runs")
    for run_id in ("short", "fix.delegate-0-0-toolu_01SlQVcxHJCuamNf1nmlaaLT", "spent"):
        with EventLog(run_id, store) as log:
            log.start_run({"task": "t"})
            if run_id == "spent":
                log.finish_run("budget_exhausted")  # a status past the status column's 12
    lines = cli("runs", "--store", store).stdout.splitlines()
    statuses = [re.search(r"\b(interrupted|budget_exhausted)\b", line) for line in lines[1:]]
    assert len({lines[0].index("status"), *(m.start() for m in statuses if m)}) == 1 and all(statuses), lines
    assert len({lines[0].index("steps") + 5, *(line.index(" 0 ") + 2 for line in lines[1:])}) == 1, lines


def test_a_listing_refuses_a_status_no_run_can_have_and_a_negative_page_and_waits_refuse_negative_seconds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A typo in --status once listed nothing and said "no runs match" (a clean exit): the
    filter is checked, where it is given and in the API, with the statuses there are."""
    from nb_durable.cli.commands import main
    from nb_durable.errors import SettingError

    store = make_store_url("sqlite", tmp_path)
    with EventLog("r", store) as log:
        log.start_run({"task": "t"})
    for args, said in (
        (["runs", "--status", "complete"], "argument --status: must be one of queued, running, waiting, completed,"),
        (["runs", "--limit", "-1"], "argument --limit: must be 0 or more, not -1"),
        (["runs", "--offset", "-3"], "argument --offset: must be 0 or more, not -3"),
        (["runs", "--after", "page2"], "argument --after: is no cursor (a run id is none: a cursor starts with A); copy the cursor whole"),
        (["runs", "--after", Cursor(1.0, "r").token, "--offset", "1"], "argument --offset: not allowed with argument --after"),
        (["wait", "r", "--timeout", "-1"], "argument --timeout: must be 0 or more, not -1"),  # timed out at once
        (["wait", "r", "--poll", "0"], "argument --poll: must be more than 0, not 0"),  # a loop taking a core
        (["worker", "--poll", "-1"], "argument --poll: must be more than 0, not -1"),
    ):
        with pytest.raises(SystemExit) as exited:
            main([*args, "--store", store])
        assert exited.value.code == 2 and said in capsys.readouterr().err
    with pytest.raises(SettingError, match="status must be one of .*bad_tool_input, unknown_stop, not 'complete'"):
        list_runs(store, status=["complete"])
    with pytest.raises(SettingError, match="limit must be 0 or more, not -1"):
        list_runs(store, limit=-1)
    assert [s.run_id for s in list_runs(store, status=["interrupted"], limit=0)] == []
    assert [s.run_id for s in list_runs(store, status=["interrupted"])] == ["r"]


@pytest.mark.parametrize("kind", ["jsonl", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_page_or_offset_past_what_a_database_counts_is_a_page_as_on_a_folder(kind: str, tmp_path: Path) -> None:
    """--limit or --offset past 2**63 - 1 (or --limit 2**63 - 1, asked as one more) was a
    traceback on SQLite (OverflowError) and "bigint out of range" on PostgreSQL; a JSONL folder
    listed the page: no store holds that many runs, so it is the same page on every store."""
    store = make_store_url(kind, tmp_path)
    with EventLog("r", store) as log:
        log.start_run({"task": "t"})
    for huge in (str(2**63 - 1), "99999999999999999999"):
        whole = cli("runs", "--store", store, "--limit", huge)
        assert whole.returncode == 0 and whole.stdout.splitlines()[1].startswith("r "), (whole.stdout, whole.stderr)
        past = cli("runs", "--store", store, "--offset", huge)
        assert past.returncode == 0 and past.stdout == f"no runs in {store} past the first {huge}\n", (past.stdout, past.stderr)
    assert [s.run_id for s in list_runs(store, limit=2**64, offset=0)] == ["r"] and list_runs(store, offset=2**64) == []


def test_an_empty_batch_is_refused_not_listed_as_a_store_with_no_runs(tmp_path: Path) -> None:
    """--batch "" (an unset shell variable) matched no run and runs said "no runs in STORE", of a
    store holding runs; wait took it for no --batch and waited on the runs named beside it."""
    store = make_store_url("sqlite", tmp_path)
    submit("one task", store=store, run_id="r", demo=True, workspace=str(tmp_path))
    said = "nb-durable: batch must name a batch: its id, or (to a listing or a wait) the batch file it was queued from, not ''\n"
    for args in (["runs"], ["wait"]):
        told = cli(*args, "--batch", "", "--store", store)
        assert (told.returncode, told.stdout, told.stderr) == (2, "", said), told
    both = cli("wait", "r", "--batch", "", "--timeout", "0", "--store", store)
    assert both.returncode == 2 and both.stderr == "nb-durable: give run ids or --batch, not both\n", both
    with pytest.raises(SettingError, match="^batch must name a batch"):
        list_runs(store, batch="")
    assert [s.run_id for s in list_runs(store)] == ["r"]


def test_an_empty_jsonl_log_is_said_by_runs_never_left_out_silently(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A run whose first line was never written (its process died as it began) left no word."""
    from nb_durable.cli.commands import main

    store = make_store_url("jsonl", tmp_path)
    Path(store).mkdir(parents=True, exist_ok=True)
    Path(store, "empty.jsonl").write_bytes(b"")
    assert main(["runs", "--store", store]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("no readable runs in "), out
    assert "skipped " in err and "empty.jsonl: it is empty, a run created with nothing recorded" in err, err
    delete = f"nb-durable delete empty --store {store}"
    assert delete in err, err  # the command that removes it, not "delete the file"


def test_an_empty_jsonl_log_is_no_run_to_check_index_and_show_names_the_command_that_deletes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """check-index said an empty log's store "equals its logs (1 run(s))" and show said to
    delete the file; the command named works and leaves the store with nothing to check."""
    from nb_durable.cli.commands import main

    store = make_store_url("jsonl", tmp_path)
    Path(store).mkdir(parents=True, exist_ok=True)
    Path(store, "empty.jsonl").write_bytes(b"")
    assert main(["check-index", "--store", store]) == 0
    out = capsys.readouterr().out
    delete = f"nb-durable delete empty --store {store}"
    assert f"empty: an empty log, no run (created with nothing recorded); {delete} removes it" in out, out
    assert "holds no runs, so its run index has nothing to check" in out and "1 run(s)" not in out, out
    assert main(["show", "empty", "--store", store]) == 2
    assert f"Start it again, or delete it: {delete}." in capsys.readouterr().err
    assert main(delete.split()[1:]) == 0
    assert not Path(store, "empty.jsonl").exists()


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_a_damaged_log_is_said_by_runs_and_by_check_index_never_left_out_silently(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    """check-index said a store whose log was damaged "equals its logs" (on JSONL the run had no
    row on either side), and runs printed Python's warning with its source line, then "no runs in"."""
    from nb_durable.cli.commands import main

    store = make_store_url(kind, tmp_path)
    with EventLog("hurt", store) as log:
        log.start_run({"task": "t"})
        for i in range(3):
            run_step(log, f"s{i}", lambda: "x" * 40)
    damage_line(store, tmp_path, "hurt", seq=2)

    assert main(["runs", "--store", store]) == 0
    out, err = capsys.readouterr()
    if kind == "jsonl":  # its index is made from the logs, so the run cannot be listed: said why
        assert out.startswith("no readable runs in ") and "UserWarning" not in err, out + err
        assert err.startswith("nb-durable: warning: skipped ") and "'hurt' is damaged at line 3" in err, err
    else:  # the row was written with the events: listed from it (show and resume name the damage)
        assert out.splitlines()[1].split()[:2] == ["hurt", "interrupted"] and err == "", out + err
    assert main(["check-index", "--store", store]) == 1
    out, err = capsys.readouterr()
    assert out.splitlines()[0].startswith("hurt: its log cannot be read, so its row cannot be checked: run 'hurt' is damaged")
    assert f"with nb-durable fork hurt NEW --at 1 --store {shlex.quote(store)}." in out and "new_id" not in out, out  # the CLI's words, not Python's
    assert "differs from its logs for 1 run(s)" in out and err == "", err
    assert main(["show", "hurt", "--store", store]) == 1
    err = capsys.readouterr().err
    assert f"into a new run with nb-durable fork hurt NEW --at 1 --store {shlex.quote(store)}." in err, err
    # The fork it advises works (the command read the damaged run's summary first, and failed on
    # it), and keeps no more than the whole steps: s1's result is the damaged line, so at 2 s1
    # would look in flight and run again.
    assert main(["fork", "hurt", "saved", "--at", "2", "--store", store]) == 2
    err = capsys.readouterr().err
    assert "--at of a fork of run 'hurt', whose log holds 1 step whole before its damage at line 3" in err, err
    assert "from 0 to 1, not 2" in err, err
    assert main(["fork", "hurt", "saved", "--at", "1", "--store", store]) == 0
    assert "forked hurt at step 1 into saved" in capsys.readouterr().out
    assert [s.step_id for s in read_run("saved", store).steps] == ["s0"]
    # A copy of the whole store reads every run first: the damaged one stops it, said as such.
    copy_to = str(tmp_path / "copy")
    assert main(["copy", store, copy_to]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("nb-durable copy: nothing was copied, because run 'hurt' cannot be read (below); "), err
    assert "name the runs to copy to leave it out" in err and list_runs(copy_to) == []
    assert main(["copy", store, copy_to, "saved"]) == 0
    assert [s.run_id for s in list_runs(copy_to)] == ["saved"]
    if kind == "jsonl":  # every command says a warning in its words, a worker's look at the runs too
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            assert main(["worker", "--store", store, "--once"]) == 0
        err = capsys.readouterr().err
        assert "nb-durable: warning: skipped " in err and "UserWarning" not in err and ".py:" not in err, err


def damage_line(store: str, tmp_path: Path, run_id: str, *, seq: int) -> None:
    """Change a byte of one stored line of a run (its checksum then fails), as a disk might."""
    if store.startswith("sqlite"):
        conn = sqlite3.connect(tmp_path / "runs.db")
        line = conn.execute("SELECT line FROM nb_durable_events WHERE seq = ?", (seq,)).fetchone()[0]
        hurt = line.replace(b"xxxx", b"xyxx") if isinstance(line, bytes) else line.replace("xxxx", "xyxx")
        conn.execute("UPDATE nb_durable_events SET line = ? WHERE seq = ?", (hurt, seq))
        conn.commit()
        conn.close()
        return
    path = tmp_path / "runs" / f"{run_id}.jsonl"
    lines = path.read_bytes().split(b"\n")
    lines[seq] = lines[seq].replace(b"xxxx", b"xyxx")
    path.write_bytes(b"\n".join(lines))


def test_a_copy_of_a_store_a_worker_is_writing_in_says_how_to_copy_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It said only that the run was being written and nothing was copied: with a worker always
    busy on some run, a person copying the store was not told that naming the others copies them."""
    from nb_durable.cli.commands import main

    store, copy_to = str(tmp_path / "runs"), str(tmp_path / "copy")
    for run_id in ("done", "busy"):
        with EventLog(run_id, store) as log:
            run_step(log, "a", lambda: 1)
    with EventLog("busy", store):
        assert main(["copy", store, copy_to]) == 3
        out, err = capsys.readouterr()
        assert out == "" and err.startswith("nb-durable copy: nothing was copied, because run 'busy' is being written (below); "), err
        assert "name the runs to copy to leave it out" in err and "nb-durable: run 'busy' in " in err, err
        assert main(["copy", store, copy_to, "done"]) == 0
    assert [s.run_id for s in list_runs(copy_to)] == ["done"]


def test_priority_is_a_flag_of_run_batch(tmp_path: Path) -> None:
    store = make_store_url("sqlite", tmp_path)
    ws = tmp_path / "ws"
    ws.mkdir()
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"task": "a", "run": "a"}\n{"task": "b", "run": "b", "priority": 2}\n{"task": "c", "run": "c", "priority": 2}\n')
    with EventLog("done", store) as log:  # a run no worker takes: it has no priority to show
        log.start_run({"task": "done", "priority": 9})
        log.finish_run("completed")
    queued = cli("run", "--batch", str(tasks), "--store", store, "--workspace", str(ws), "--demo", "--priority", "7")
    assert queued.returncode == 0, queued.stdout + queued.stderr
    assert "queued a (line 1, priority 7)" in queued.stdout and "queued b (line 2, priority 2)" in queued.stdout
    assert {s.run_id: s.settings["priority"] for s in list_runs(store)} == {"a": 7, "b": 2, "c": 2, "done": 9}

    # The listings show the priority of the runs waiting for a worker, and, filtered by status,
    # the order workers take them in: by priority, then the longest waiting (b before c), where
    # the listing's own order is the newest first (c, b, a).
    listed = cli("runs", "--store", store).stdout.splitlines()
    assert listed[0].split()[:4] == ["run", "status", "priority", "steps"], listed
    assert [line.split()[:3] for line in listed[1:]] == [["c", "queued", "2"], ["b", "queued", "2"], ["a", "queued", "7"], ["done", "completed", "-"]]
    order = "workers take these runs highest priority first, then the oldest: a, b, c"
    assert order not in listed
    by_status = cli("runs", "--store", store, "--status", "queued").stdout.splitlines()
    assert by_status[-1] == order, by_status
    assert "priority" not in cli("runs", "--store", store, "--status", "completed").stdout.splitlines()[0]
    paged = cli("runs", "--store", store, "--status", "queued", "--limit", "2").stdout.splitlines()
    assert paged[-2] == "workers take this page's runs highest priority first, then the oldest: b, c", paged

    from nb_durable.jupyter.runs_table import runs_table

    table = runs_table(store, status=["queued"])
    text = repr(table).splitlines()
    assert text[1].split()[:4] == ["run", "status", "priority", "steps"] and text[-1] == order, text
    assert [line.split()[:3] for line in text[2:5]] == [["c", "queued", "2"], ["b", "queued", "2"], ["a", "queued", "7"]], text
    assert "<th>priority</th>" in table._repr_html_() and f'<p class="nbd-claim-order">{order}</p>' in table._repr_html_()
    whole = runs_table(store)
    assert repr(whole).splitlines()[5].split()[:3] == ["done", "completed", "-"] and order not in repr(whole)
    finished = runs_table(store, status=["completed"])
    assert "priority" not in repr(finished).splitlines()[1] and "<th>priority</th>" not in finished._repr_html_()
    alone = cli("run", "a task", "--store", store, "--priority", "3")
    assert alone.returncode == 2 and "give it with --batch FILE" in alone.stderr


def test_a_run_waiting_on_a_message_batch_lists_as_running_with_the_batch_beside_it(tmp_path: Path) -> None:
    """A batch-mode run polls its Message Batch for up to a day: both listings say running, as
    it is (waiting is for a person), and what it waits on, from its lease's mark, no log read."""
    from nb_durable.core.holders import Awaiting
    from nb_durable.jupyter.runs_table import runs_table

    store = make_store_url("sqlite", tmp_path)
    with EventLog("batched", store) as log:
        log.start_run({"task": "t"})
        run_step(log, "s", lambda: 1)
        wait = Awaiting.now("model:1", "Message Batch msgbatch_01abc")
        log.writer.mark_asking(wait)
        said = f"in Message Batch msgbatch_01abc since {time.strftime('%H:%M:%S', time.localtime(wait.since))}"
        assert wait.in_words() == said
        listed = cli("runs", "--store", store).stdout.splitlines()
        assert listed[1].split()[:2] == ["batched", "running"] and listed[2] == f"  {said}", listed
        table = runs_table(store)
        assert repr(table).splitlines()[2].split()[:2] == ["batched", "running"] and repr(table).splitlines()[3] == f"  {said}"
        assert f'running</span> <span class="nbd-awaiting">{said}</span>' in table._repr_html_()
        log.writer.mark_asking(None)
        assert len(cli("runs", "--store", store).stdout.splitlines()) == 2


@contextlib.contextmanager
def asleep_worker(store: str, poll: float, what: str) -> Iterator[tuple[ResumeWorker, list[Taken]]]:
    """A worker on its own thread, once it is asleep (``what`` says why it has nothing to do),
    with the list of what it took; stopped when the block ends."""
    taken: list[Taken] = []
    worker = ResumeWorker(store, poll=poll, report=taken.append)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        wait_until(lambda: worker.asleep, f"the worker asleep ({what})")
        yield worker, taken
    finally:
        worker.stop()
        thread.join(30)


@pytest.mark.postgres
def test_a_notify_wakes_an_idle_worker_within_a_second(tmp_path: Path) -> None:
    store = make_store_url("postgres", tmp_path)
    ws = tmp_path / "ws"
    ws.mkdir()
    # It would not poll again for two minutes.
    with asleep_worker(store, 120, "having looked since it began to listen") as (worker, taken):
        before = worker.polls
        started = time.monotonic()
        run_id = submit("say hello", store=store, run_id="woken", workspace=str(ws), demo=True)
        wait_until(lambda: read_summary(run_id, store).status != "queued", "the worker to take the run", timeout=10)
        woke_in = time.monotonic() - started
        assert worker.polls > before
        assert woke_in < 1.0, f"the worker took {woke_in:.2f} s to wake"
        wait_until(lambda: taken, "the run to end")
        assert taken[0].run_id == "woken" and taken[0].outcome == "completed", taken


def test_a_submit_wakes_an_idle_sqlite_worker(tmp_path: Path) -> None:
    """SQLite cannot notify: the worker's wakeups watch ``PRAGMA data_version`` and the rows a
    write makes takeable. Its next poll is two minutes away, so only that watch explains the run
    being taken within the wait (about 0.2 s; the wait allows 10 for a loaded machine)."""
    store = make_store_url("sqlite", tmp_path)
    ws = tmp_path / "ws"
    ws.mkdir()
    with asleep_worker(store, 120, "having looked since its watch began") as (worker, taken):
        before = worker.polls
        run_id = submit("say hello", store=store, run_id="woken", workspace=str(ws), demo=True)
        wait_until(lambda: read_summary(run_id, store).status != "queued", "the worker to take the run", timeout=10)
        assert worker.polls > before
        wait_until(lambda: taken, "the run to end")
        assert taken[0].run_id == "woken" and taken[0].outcome == "completed", taken


def test_a_submit_to_a_sqlite_file_made_again_wakes_an_idle_worker(tmp_path: Path) -> None:
    """The watch kept its connection to the deleted file, so a run submitted to the file made
    there again was taken only at the worker's next poll (two minutes away here)."""
    folder = tmp_path / "store"
    folder.mkdir()
    store = f"sqlite:///{folder / 'runs.db'}"
    ws = tmp_path / "ws"
    ws.mkdir()
    open_store(store).close()
    with asleep_worker(store, 120, "having looked since its watch began") as (_, taken):
        shutil.rmtree(folder)
        folder.mkdir()
        submit("say hello", store=store, run_id="again", workspace=str(ws), demo=True)
        wait_until(lambda: taken, "the worker to take the run of the new file", timeout=10)
        assert taken[0].run_id == "again" and taken[0].outcome == "completed", taken


def test_a_sqlite_watch_marks_nothing_while_its_file_is_gone_then_the_runs_of_the_file_made_again(tmp_path: Path) -> None:
    folder = tmp_path / "store"
    folder.mkdir()
    path = folder / "runs.db"
    store = open_store(f"sqlite:///{path}")
    try:
        submit("say hello", store=f"sqlite:///{path}", run_id="first", workspace=str(tmp_path), demo=True)
        watch = store.watch()  # type: ignore[attr-defined]
        try:
            before = watch.mark()
            assert before[0] == 1
            shutil.rmtree(folder)
            assert watch.mark() == ()  # a poll now says the file is gone; nothing raised
            with pytest.raises(StoreError, match="cannot watch"):
                store.watch().close()  # type: ignore[attr-defined]
            folder.mkdir()
            with pytest.raises(StoreError, match="cannot watch"):
                store.watch().close()  # type: ignore[attr-defined]
            assert not path.exists(), "a watch made an empty file where the store was deleted"
            submit("say hello", store=f"sqlite:///{path}", run_id="second", workspace=str(tmp_path), demo=True)
            submit("say hello", store=f"sqlite:///{path}", run_id="third", workspace=str(tmp_path), demo=True)
            assert watch.mark()[0] == 2
        finally:
            watch.close()
    finally:
        store.close()


@pytest.mark.postgres
def test_a_worker_still_finds_work_with_notifications_lost(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from nb_durable.core.stores.postgres import PostgresStore
    from nb_durable.core.stores.postgres.listening import Listening

    def deaf(self: PostgresStore) -> Listening:  # listens on a channel nobody notifies: every NOTIFY is lost
        conn = self.reading_session()
        conn.execute("LISTEN nb_durable_nobody")
        return Listening(self, conn)

    monkeypatch.setattr(PostgresStore, "listen", deaf)
    store = make_store_url("postgres", tmp_path)
    ws = tmp_path / "ws"
    ws.mkdir()
    with asleep_worker(store, 0.5, "listening to a channel nobody notifies") as (_, taken):
        run_id = submit("say hello", store=store, run_id="unannounced", workspace=str(ws), demo=True)
        wait_until(lambda: taken, "the worker to find the run by polling", timeout=30)
        assert taken[0].run_id == run_id and taken[0].outcome == "completed", taken


def test_the_runs_table_shows_from_the_index_what_the_log_says_it_cost(tmp_path: Path) -> None:
    from nb_durable.agent.display.views import views_of
    from nb_durable.agent.run.loop import resume_agent, run_agent
    from nb_durable.core.runs import read_run
    from nb_durable.jupyter.runs_table import runs_table
    from nb_durable.testing import ScriptedModel, text_message, tool_use_message

    store = str(tmp_path / "runs.db")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("n\n")
    replies = [
        tool_use_message([("read_file", {"path": "notes.txt"})], model="claude-sonnet-4-5", input_tokens=1200, output_tokens=80),
        text_message("done", model="claude-sonnet-4-5", input_tokens=1500, output_tokens=30),
    ]
    first = run_agent("read the notes", client=ScriptedModel(replies[:1]), model="claude-sonnet-4-5", workspace=ws, store=store, run_id="costly", max_turns=1)
    assert first.status == "interrupted"
    resume_agent("costly", store=store, client=ScriptedModel(replies[1:]), max_turns=5)  # turn 0 replayed: saved
    table = runs_table(store)
    [(summary, view)] = table.rows
    logged = views_of(read_run("costly", store))[0]
    assert view.cost.paid.total == logged.cost.paid.total == 1200 + 80 + 1500 + 30
    assert view.cost.saved.total == logged.cost.saved.total > 0
    assert view.cost.paid_dollars == pytest.approx(logged.cost.paid_dollars) and view.cost.paid_dollars > 0
    assert view.cost.saved_dollars == pytest.approx(logged.cost.saved_dollars)
    assert view.cost.cache_saved_dollars == pytest.approx(logged.cost.cache_saved_dollars)
    assert view.task == "read the notes" and summary.status == "completed"
    assert "2,810" in repr(table)
    assert runs_table(store, status=["failed"]).rows == []



def test_the_runs_table_says_a_filter_that_matches_nothing_and_where_the_next_page_starts(tmp_path: Path) -> None:
    """%agent_runs with a filter that matched nothing said "No runs yet", and a full page gave
    no sign of the runs after it (the magic had no --offset)."""
    from nb_durable.jupyter.runs_table import runs_table

    store = make_store_url("sqlite", tmp_path)
    for i in range(3):
        with EventLog(f"r{i}", store) as log:
            log.start_run({"task": f"task {i}", "tags": ["t"]})
            run_step(log, "s", lambda: 1)
        time.sleep(0.002)  # distinct update times: the order is the runs' own
    page = runs_table(store, limit=2)
    assert [s.run_id for s, _ in page.rows] == ["r2", "r1"]
    r1 = read_summary("r1", store)
    more = f"%agent_runs --store {store} --limit 2 --after {r1.cursor}"  # the store and filters given, or another page
    assert repr(page).splitlines()[0].endswith(f"2 runs in {store}, the newest first; more: {more} (or --limit 0 for all)")
    tagged = runs_table(store, tags=["t"], limit=1)
    assert f"more: %agent_runs --store {store} --tag t --limit 1 --after {read_summary('r2', store).cursor} (" in repr(tagged)
    last = runs_table(store, limit=2, after=Cursor.parse(r1.cursor))
    assert [s.run_id for s, _ in last.rows] == ["r0"] and "more:" not in repr(last)
    assert repr(last).splitlines()[0] == f"1 run in {store} after r1"  # not "1 run in" all the store holds
    assert repr(runs_table(store, offset=1)).splitlines()[0] == f"2 runs in {store} past the first 1"
    assert repr(runs_table(store, limit=1, after=Cursor.parse(read_summary("r2", store).cursor))).splitlines()[0].startswith(
        f"1 run in {store} after r2, the newest first; more: %agent_runs --store {store} --limit 1 --after "
    )
    assert repr(runs_table(store, limit=2, after=Cursor.at(0.0, "r0"))) == f"No more runs in {store} after r0."
    assert repr(runs_table(store, tags=["t"], after=Cursor.at(0.0, "r0"))) == f"No runs in {store} match these filters after r0."
    assert repr(runs_table(store, limit=2, offset=3)) == f"No more runs in {store} past the first 3."
    assert repr(runs_table(store, tags=["other"])) == f"No runs in {store} match these filters."
    (tmp_path / "empty").mkdir()
    empty = make_store_url("sqlite", tmp_path / "empty")
    open_store(empty).close()  # an empty store is there: a missing one is said, not made
    assert "No runs yet" in repr(runs_table(empty))

def test_a_warning_raised_meanwhile_is_no_skipped_run_in_the_runs_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ResourceWarning of an object collected while %agent_runs listed (another test's, in the
    suite; the kernel's own, in a notebook) was shown as a line of the table, as if a log were skipped."""
    import nb_durable.agent.fleet.listing as listing
    import nb_durable.jupyter.runs_table as table

    store = make_store_url("sqlite", tmp_path)
    with EventLog("r0", store) as log:
        run_step(log, "s", lambda: 1)
    listed = listing.list_runs  # type: ignore[attr-defined]

    def collected_meanwhile(*args: Any, **kwargs: Any) -> Any:
        warnings.warn("unclosed file <_io.BufferedReader name=44>", ResourceWarning, stacklevel=1)
        return listed(*args, **kwargs)

    monkeypatch.setattr(listing, "list_runs", collected_meanwhile)  # the listing both front ends page with
    with pytest.warns(ResourceWarning, match="unclosed file"):  # still a warning, where it belongs
        shown = table.runs_table(store)
    assert [s.run_id for s, _ in shown.rows] == ["r0"] and shown.skipped == [] and "unclosed" not in repr(shown)


HOLD = """
import sys, time
from nb_durable.core.log import EventLog
log = EventLog(sys.argv[2], sys.argv[1])
print("holding", flush=True)
time.sleep(600)
"""


def _a_killed_writer_wakes_the_worker(store: str, run_id: str, while_held: Any = None) -> None:
    """SIGKILL a process holding ``run_id``'s lease while a worker sleeps (holding ``while_held``
    open meanwhile, another run's writer): the worker wakes within a second and runs it."""
    import os
    import signal

    writer = forkserver.Popen([sys.executable, "-c", HOLD, store, run_id], env=subprocess_env(), stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout is not None and writer.stdout.readline() == "holding\n"
        with asleep_worker(store, 120, "the run's lease is held: nothing to take") as (worker, taken), while_held or contextlib.nullcontext():
            assert read_summary(run_id, store).status == "running" and not taken
            before = worker.polls
            killed = time.monotonic()
            os.kill(writer.pid, signal.SIGKILL)
            writer.wait()
            wait_until(lambda: worker.polls > before, "the worker to wake", timeout=10)
            assert time.monotonic() - killed < 1.5, "a killed writer's lease ending wakes the worker, whatever else is held"
            wait_until(lambda: taken, "the worker to run it")
            assert taken[0].run_id == run_id and taken[0].outcome == "completed", taken
    finally:
        if writer.poll() is None:
            writer.kill()
        writer.communicate(timeout=30)  # reaped, and its stdout pipe closed (killed above or in the test)


@pytest.mark.postgres
def test_a_killed_writer_wakes_an_idle_worker_and_a_graceful_stop_notifies(tmp_path: Path) -> None:
    from nb_durable.core.index.rows import STOPPED_BY_WORKER

    store = make_store_url("postgres", tmp_path)
    ws = tmp_path / "ws"
    ws.mkdir()
    _a_killed_writer_wakes_the_worker(store, submit("say hello", store=store, run_id="held", workspace=str(ws), demo=True))
    # A writer that dies as another takes a lease (a busy fleet): the count of leases held is
    # the same at the next look, so a worker watching the count slept on till its next poll.
    again = submit("say hello again", store=store, run_id="held-again", workspace=str(ws), demo=True)
    _a_killed_writer_wakes_the_worker(store, again, while_held=EventLog("other", store))
    # A worker's graceful stop records the run stopped, and that very append notifies listeners.
    with open_store(store) as opened:
        listener = opened.listen()  # type: ignore[attr-defined]
        try:
            with EventLog("stopped", opened) as log:
                log.start_run({"task": "t"})
                log.finish_run("interrupted", error=f"{STOPPED_BY_WORKER} h:1 before step model:1")
            heard = [n.payload for n in listener.notifies(timeout=5, stop_after=1)]
        finally:
            listener.close()
    assert heard == ["stopped"]


@pytest.mark.postgres
@pytest.mark.parametrize("first", ["the listener", "the first poll"])
def test_a_worker_is_asleep_only_once_it_has_looked_since_it_began_to_listen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, first: str
) -> None:
    # Under load the listening session may be ready before the worker's first poll, or after
    # it: either way the worker ends asleep, and not before a poll that began while listening.
    from nb_durable.core.stores.postgres import PostgresStore

    store = make_store_url("postgres", tmp_path)
    listened = threading.Event()
    polled = threading.Event()
    listen, candidates, loop = PostgresStore.listen, ResumeWorker.candidates, ResumeWorker._run
    count = PostgresStore.leases_held
    seen: list[tuple[bool, bool]] = []  # (listening, asleep) at each look
    polls = [0]

    def slow_count(self: PostgresStore, conn: Any) -> Any:
        # The server slow to count the leases held (up to a second): a poll that runs meanwhile
        # must not pass for one begun while listening unless the wake-up it answers says so.
        deadline = time.monotonic() + 1.0
        while polls[0] < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        return count(self, conn)

    def ordered_listen(self: PostgresStore) -> Any:
        if first == "the first poll":
            polled.wait(30)
        conn = listen(self)
        listened.set()
        return conn

    def ordered_loop(self: ResumeWorker, once: bool, wakeups: Any) -> Any:
        if first == "the listener":
            wakeups.ready.wait(30)
        return loop(self, once, wakeups)

    def looked(self: ResumeWorker, **kw: Any) -> Any:
        seen.append((listened.is_set(), self.asleep))
        found = candidates(self, **kw)
        polls[0] += 1
        polled.set()
        return found

    monkeypatch.setattr(PostgresStore, "listen", ordered_listen)
    monkeypatch.setattr(PostgresStore, "leases_held", slow_count)
    monkeypatch.setattr(ResumeWorker, "_run", ordered_loop)
    monkeypatch.setattr(ResumeWorker, "candidates", looked)
    with asleep_worker(store, 120, f"{first} first") as (worker, _):
        assert seen[-1][0], "the look before sleeping began while listening"
        assert not any(asleep for _, asleep in seen), "never asleep while it looks"
        assert worker.polls == (1 if first == "the listener" else 2)


@pytest.mark.postgres
def test_a_worker_whose_listening_session_drops_is_not_asleep_until_it_listens_and_looks_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A wake-up sent while the session is down reaches nobody: a test (or anything) waiting for
    # an asleep worker must wait until it listens again and has looked since.
    from nb_durable.core.stores.postgres import PostgresStore
    from tests.pg import server

    store = make_store_url("postgres", tmp_path)
    sessions: list[int] = []
    listen = PostgresStore.listen

    def kept_listen(self: PostgresStore) -> Any:
        conn = listen(self)
        sessions.append(conn.info.backend_pid)
        return conn

    monkeypatch.setattr(PostgresStore, "listen", kept_listen)
    ws = tmp_path / "ws"
    ws.mkdir()
    with asleep_worker(store, 120, "listening") as (worker, taken):
        polls = worker.polls
        server().admin().execute("SELECT pg_terminate_backend(%s, 10000)", (sessions[0],))
        wait_until(lambda: not worker.asleep, "the worker no longer asleep once its session dropped")
        wait_until(lambda: len(sessions) == 2 and worker.asleep, "the worker listening again and asleep")
        assert worker.polls > polls, "it looked again once it listened again"
        run_id = submit("say hello", store=store, run_id="after", workspace=str(ws), demo=True)
        wait_until(lambda: taken, "the submitted run taken on the new session's wake-up", timeout=10)
        assert taken[0].run_id == run_id


def test_a_look_from_before_the_session_dropped_does_not_make_the_worker_asleep_once_it_listens_again(tmp_path: Path) -> None:
    """The race behind a flaky run of the test above: listening again set ``ready`` a moment
    before its wake-up, and in that moment the worker counted as asleep on its look from before
    the drop, though a wake-up sent while the session was down had reached nobody."""
    from types import SimpleNamespace

    wakeups = SimpleNamespace(listening=True, ready=threading.Event(), event=threading.Event(), span=1)
    worker = ResumeWorker(make_store_url("sqlite", tmp_path))
    worker._wakeups = wakeups  # type: ignore[assignment]  # the state the listening thread keeps, without its thread
    worker._idle, worker._looked_while = True, 1
    wakeups.ready.set()
    assert worker.asleep, "looked while the store could wake it, idle, not woken"
    wakeups.ready.clear()  # the session dropped
    assert not worker.asleep
    wakeups.span += 1  # listening again, before its wake-up is sent
    wakeups.ready.set()
    assert not worker.asleep, "its last look began before the drop"
    worker._looked_while = wakeups.span  # a look begun since
    assert worker.asleep



def test_wait_on_a_store_that_is_not_there_says_so_and_makes_nothing(tmp_path: Path) -> None:
    """``wait RUN --store mistyped.db`` made an empty database before saying the run was not there."""
    for store, what in ((tmp_path / "mistyped.db", "SQLite file"), (tmp_path / "mistyped", "folder")):
        said = f"nb-durable: there is no store at the {what} {store}: that {what.split()[-1]} does not exist (is the store's name right?)\n"
        for args in (("some-run",), ("--batch", "batch-0123456789")):
            waited = cli("wait", *args, "--store", str(store))
            assert waited.returncode == 2 and waited.stderr == said, waited.stdout + waited.stderr
        assert not store.exists()


def test_check_index_offers_repair_only_for_rows_it_can_write_again(tmp_path: Path) -> None:
    """A log that cannot be read is a person's to restore, not a row to write again: the check
    offered '--repair rewrites those rows' for it, and --repair then left it (exit 1)."""
    store = str(tmp_path / "runs")
    with EventLog("damaged", store) as log:
        log.start_run({"task": "t"})
        run_step(log, "s0", lambda: 1)
        run_step(log, "s1", lambda: 2)
    path = tmp_path / "runs" / "damaged.jsonl"
    lines = path.read_bytes().split(b"\n")
    lines[1] = lines[1].replace(b'"s0"', b'"s9"')
    path.write_bytes(b"\n".join(lines))
    checked = cli("check-index", "--store", store)
    assert checked.returncode == 1 and "damaged: its log cannot be read" in checked.stdout, checked.stdout
    assert "--repair" not in checked.stdout, checked.stdout
    repaired = cli("check-index", "--repair", "--store", store)
    assert repaired.returncode == 1 and "nb-durable fork damaged" in repaired.stdout and "fork(" not in repaired.stdout, repaired.stdout
