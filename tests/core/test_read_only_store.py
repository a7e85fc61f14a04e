"""A SQLite store on read-only media is read as any other; a write to it is refused, saying so.

WAL mode writes beside the database (its -wal and -shm files) even to read it, so a store on a
read-only mount could not even be listed: ``runs``, ``show``, ``read_run`` all failed. On a real
tmpfs remounted read-only (mounting needs root): a store left as a closed store leaves it (no
-wal, no -shm: opened ``immutable``), one copied with its -wal and -shm (writes not yet in the
database: opened ``mode=ro``, which reads them), and one whose -wal has lost its -shm (refused,
never read without its writes). A JSONL runs folder there is read as ever, its writes refused the
same way; a worker pointed at either refuses to start. A store named there that does not exist
is no store to read, and none is made; a copy or fork into a read-only store is told to choose
another destination, not to copy that one elsewhere.
"""

from __future__ import annotations

import contextlib
import functools
import shutil
import sqlite3
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from nb_durable import EventLog, list_runs, read_run, run_step
from nb_durable.core.stores.sqlite import SqliteStore
from nb_durable.core.whole_runs.transfer import copy_runs
from nb_durable.errors import RunNotFoundError, StoreError, StoreReadOnlyError
from tests.conftest import subprocess_env
from tests.core.test_full_disk import small_disk


def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nb_durable.cli", *args], check=False, capture_output=True, text=True,
        env=subprocess_env(), timeout=timeout,
    )  # fmt: skip


def _refused(store: str, doing: str) -> str:
    return (
        f"{doing}: the store {store} can only be read (the file system holding it is mounted read-only), so nothing "
        "was written; its runs can still be listed, shown and exported. To go on with them, copy the store to a disk "
        "you can write (nb-durable copy) and point the store there, or make it writable."
    )


@contextlib.contextmanager
def read_only(disk: Path) -> Iterator[Path]:
    subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
    try:
        yield disk
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(disk)], check=True)


def _two_runs(store: str) -> None:
    for run_id in ("kept", "other"):
        with EventLog(run_id, store) as log:
            run_step(log, "a", functools.partial(str.format, "{} result", run_id))
            log.finish_run("completed")


def test_a_closed_store_on_a_read_only_mount_is_listed_shown_and_read(tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk") as disk:
        url = f"sqlite:///{disk / 'runs.db'}"
        _two_runs(url)
        assert sorted(p.name for p in disk.iterdir()) == ["runs.db", "runs.db.leases"], "closed: no -wal, no -shm"
        before = (disk / "runs.db").read_bytes()
        with read_only(disk):
            listed = cli("runs", "--store", url)
            assert listed.returncode == 0, listed.stderr
            assert "kept" in listed.stdout and "other" in listed.stdout, listed.stdout
            shown = cli("show", "kept", "--store", url)
            assert shown.returncode == 0, shown.stderr
            assert "kept result" in shown.stdout, shown.stdout
            assert read_run("kept", url).steps[0].result == "kept result"
            assert sorted(r.run_id for r in list_runs(url)) == ["kept", "other"]

            with pytest.raises(StoreReadOnlyError) as refused:
                with EventLog("new", url) as log:
                    run_step(log, "a", lambda: "never")
            assert str(refused.value) == (
                f"cannot write run 'new': the store {disk / 'runs.db'} can only be read (the file system holding it "
                "is mounted read-only), so nothing was written; its runs can still be listed, shown and exported. To "
                "go on with them, copy the store to a disk you can write (nb-durable copy) and point the store "
                "there, or make it writable."
            )
            ran = cli("run", "--demo", "--store", url, "Look around.")
            assert ran.returncode == 2, ran.stdout + ran.stderr
            assert "can only be read (the file system holding it is mounted read-only), so nothing was written" in ran.stderr
            with SqliteStore(disk / "runs.db") as store, pytest.raises(StoreReadOnlyError, match="cannot claim runs in"):
                store.claim(1)
        assert (disk / "runs.db").read_bytes() == before, "nothing written, nothing lost"
        assert sorted(r.run_id for r in list_runs(url)) == ["kept", "other"]


def test_a_store_copied_with_its_wal_is_read_with_the_writes_the_wal_holds(tmp_path: Path) -> None:
    # Read immutable, the writes still in the -wal file would be missed: here, every run.
    with small_disk(tmp_path / "disk") as disk:
        url = f"sqlite:///{disk / 'live.db'}"
        with SqliteStore(disk / "live.db") as store:  # held open: its writes stay in the -wal file
            store.open_writer("x").close()
            _two_runs(url)
            for name in ("live.db", "live.db-wal", "live.db-shm"):
                shutil.copy(disk / name, disk / name.replace("live", "copy"))
        (disk / "lost.db").write_bytes((disk / "copy.db").read_bytes())
        (disk / "lost.db-wal").write_bytes((disk / "copy.db-wal").read_bytes())
        assert (disk / "copy.db-wal").stat().st_size > 0
        with read_only(disk):
            assert read_run("kept", f"sqlite:///{disk / 'copy.db'}").steps[0].result == "kept result"
            with pytest.raises(StoreError) as refused:
                read_run("kept", f"sqlite:///{disk / 'lost.db'}")
            assert str(refused.value) == (
                f"cannot read the SQLite store {disk / 'lost.db'}: its lost.db-wal file holds writes not yet in the "
                "database, and SQLite needs a lost.db-shm file beside it to read them, which cannot be made in that "
                "folder. Copy the database and its -wal file together to a folder you can write, and open the copy."
            )
        with sqlite3.connect(disk / "lost.db") as conn:  # written again: the -wal's writes were all there
            assert conn.execute("SELECT count(*) FROM nb_durable_index").fetchone() == (2,)


def test_a_runs_folder_on_a_read_only_mount_is_listed_and_read_and_its_writes_refused_in_words(tmp_path: Path) -> None:
    # A write was refused as "the runs folder ... is not writable", a StoreError saying neither why nor
    # that its runs could still be read; the sidecar index, never written there, must not be warned of.
    with small_disk(tmp_path / "disk") as disk:
        runs = disk / "runs"
        _two_runs(str(runs))
        before = {p.name: p.read_bytes() for p in runs.glob("*.jsonl")}
        with read_only(disk):
            listed = cli("runs", "--store", str(runs))
            assert listed.returncode == 0 and not listed.stderr, listed.stderr
            assert "kept" in listed.stdout and "other" in listed.stdout, listed.stdout
            shown = cli("show", "kept", "--store", str(runs))
            assert shown.returncode == 0 and "kept result" in shown.stdout, shown.stdout + shown.stderr
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # the index it cannot write is rebuilt in silence, each time
                for _ in range(2):
                    assert sorted(r.run_id for r in list_runs(str(runs))) == ["kept", "other"]
            assert read_run("kept", str(runs)).steps[0].result == "kept result"
            assert not (runs / ".index").exists()

            for run_id in ("new", "kept"):  # a new run, and one recorded there going on
                with pytest.raises(StoreReadOnlyError) as refused:
                    with EventLog(run_id, str(runs)) as log:
                        run_step(log, "b", lambda: "never")
                assert str(refused.value) == _refused(str(runs), f"cannot write run {run_id!r}")
            ran = cli("run", "--demo", "--store", str(runs), "Look around.")
            assert ran.returncode == 2 and "Traceback" not in ran.stderr, ran.stdout + ran.stderr
            assert "can only be read (the file system holding it is mounted read-only), so nothing was written" in ran.stderr
        assert {p.name: p.read_bytes() for p in runs.glob("*.jsonl")} == before, "nothing written, nothing lost"


def test_a_worker_or_a_batch_pointed_at_a_read_only_store_says_so_and_exits_2(tmp_path: Path) -> None:
    # A worker on a read-only SQLite store warned of every claim for ever; on a read-only runs folder
    # it idled for ever in silence, passing over each run it found. Waiting makes neither writable.
    (tmp_path / "tasks.jsonl").write_text('{"task": "Look around."}\n')
    with small_disk(tmp_path / "disk") as disk:
        sqlite_url = f"sqlite:///{disk / 'runs.db'}"
        for store in (sqlite_url, str(disk / "runs")):
            _two_runs(store)
        with read_only(disk):
            for store, said in ((sqlite_url, str(disk / "runs.db")), (str(disk / "runs"), str(disk / "runs"))):
                for once in ((), ("--once",)):
                    try:
                        worker = cli("worker", *once, "--poll", "1", "--store", store, timeout=30)
                    except subprocess.TimeoutExpired:
                        pytest.fail(f"a worker on the read-only {store} did not stop")
                    assert worker.returncode == 2, worker.stdout + worker.stderr
                    assert worker.stdout == "", "no banner: it never takes a run"
                    assert worker.stderr == f"nb-durable: {_refused(said, 'this worker cannot take runs')}\n"
                batch = cli("run", "--batch", str(tmp_path / "tasks.jsonl"), "--store", store)
                assert batch.returncode == 2 and "Traceback" not in batch.stderr, batch.stderr
                assert _refused(said, "").removeprefix(": ") in batch.stderr, batch.stderr


def test_a_store_not_there_on_a_read_only_mount_is_no_store_to_read_and_none_can_be_made(tmp_path: Path) -> None:
    # A new SQLite file there failed every read ("cannot open the SQLite store") and its writes said
    # so as a plain StoreError; a new runs folder's writes said "Read-only file system", a worker
    # idled on it for ever. Neither is read-only in the words of one that is there: nothing to copy.
    with small_disk(tmp_path / "disk") as disk, read_only(disk):
        for store, said, what in ((f"sqlite:///{disk / 'new.db'}", disk / "new.db", "file"), (str(disk / "new"), disk / "new", "folder")):
            assert list_runs(store) == []
            with pytest.raises(RunNotFoundError, match=f"that {what} does not exist"):
                read_run("x", store)
            refused = (
                f"the store {said} does not exist, and cannot be made there (the file system holding it is mounted "
                "read-only), so nothing was written. Point the store at a disk you can write, or make that one writable."
            )
            with pytest.raises(StoreReadOnlyError) as info:
                EventLog("x", store)
            assert str(info.value) == f"cannot write run 'x': {refused}"
            worker = cli("worker", "--once", "--store", store, timeout=30)
            assert (worker.returncode, worker.stdout) == (2, ""), worker.stdout + worker.stderr
            assert worker.stderr == f"nb-durable: this worker cannot take runs: {refused}\n"
        assert list(disk.iterdir()) == [], "nothing made"


def test_a_copy_or_fork_into_a_read_only_store_is_told_to_choose_another_destination(tmp_path: Path) -> None:
    # Told to copy the destination to a disk it could write, a person would copy a store that
    # holds none of the runs: the runs go to another destination.
    source = str(tmp_path / "source")
    with EventLog("kept-elsewhere", source) as log:
        run_step(log, "a", lambda: "elsewhere")
    with small_disk(tmp_path / "disk") as disk:
        _two_runs(str(disk / "runs"))
        with read_only(disk):
            for store, said, state in (
                (f"sqlite:///{disk / 'new.db'}", disk / "new.db", "does not exist, and cannot be made there"),
                (str(disk / "runs"), disk / "runs", "can only be read"),
            ):
                refused = (
                    f"the store {said} {state} (the file system holding it is mounted read-only), so nothing was "
                    "written. Choose a destination on a disk you can write, or make that one writable."
                )
                with pytest.raises(StoreReadOnlyError) as info:
                    copy_runs(source, store)
                assert str(info.value) == f"cannot copy runs into {store}: {refused}"
                copied = cli("copy", source, store)
                assert (copied.returncode, copied.stderr) == (2, f"nb-durable: cannot copy runs into {store}: {refused}\n")
                forked = cli("fork", "kept-elsewhere", "forked", "--at", "1", "--store", source, "--to", store)
                assert forked.returncode == 2, forked.stdout + forked.stderr
                assert forked.stderr == f"nb-durable: cannot fork run 'kept-elsewhere' into 'forked': {refused}\n"
            # Forked within the store it reads, the store itself is the one to copy elsewhere.
            forked = cli("fork", "kept", "forked", "--at", "1", "--store", str(disk / "runs"))
            assert forked.returncode == 2, forked.stdout + forked.stderr
            assert forked.stderr == f"nb-durable: {_refused(str(disk / 'runs'), 'cannot write run ' + repr('forked'))}\n"
