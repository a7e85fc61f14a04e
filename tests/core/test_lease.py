"""One writer per run across processes; a killed holder frees the run at once."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from nb_durable import EventLog, RunLockedError, list_runs, read_run, run_step
from nb_durable.core.holders import locked_message, name_this_process, this_holder
from nb_durable.core.runs import latest_unfinished
from nb_durable.core.stores import Store, StoreWriter, open_store
from nb_durable.errors import StoreError
from tests import forkserver
from tests.conftest import make_store_url, subprocess_env

HOLDER = """
import sys, time
from nb_durable import EventLog, run_step
log = EventLog("shared", sys.argv[1])
run_step(log, "held", lambda: "by child")
print("holding", flush=True)
sys.stdin.readline()
"""


def start_holder(store: str) -> subprocess.Popen[str]:
    child = forkserver.Popen(
        [sys.executable, "-c", HOLDER, store],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=subprocess_env(),
    )
    assert child.stdout is not None
    said = child.stdout.readline().strip()
    if said != "holding":  # reaped first: a holder still running would keep its stderr open, and reading it would hang
        child.kill()
        _, err = child.communicate(timeout=30)
        raise AssertionError(f"the holder said {said!r}, not 'holding': {err}")
    return child


@pytest.mark.parametrize("store_kind", ["jsonl", "sqlite", "postgres"])
def test_a_second_process_is_refused_and_told_who_holds_the_run(tmp_path: Path, store_kind: str) -> None:
    store = make_store_url(store_kind, tmp_path)
    child = start_holder(store)
    try:
        with pytest.raises(RunLockedError) as info:
            EventLog("shared", store)
        assert info.value.holder is not None
        assert info.value.holder["pid"] == child.pid
        assert f"pid {child.pid} on host {socket.gethostname()}" in str(info.value)
        assert "read_run('shared')" in str(info.value)
        # Readers need no lease, and see who writes.
        assert read_run("shared", store).steps[0].result == "by child"
        assert [(s.run_id, s.status) for s in list_runs(store)] == [("shared", "running")]
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.communicate(timeout=30)  # reaped, and its three pipes closed
    assert list_runs(store)[0].status == "interrupted"
    with EventLog("shared", store) as log:
        assert run_step(log, "held", lambda: "by parent") == "by child"
        assert run_step(log, "next", lambda: "mine") == "mine"


@pytest.mark.kernel
def test_the_refusal_says_how_to_stop_the_holder_by_what_program_it_is(tmp_path: Path) -> None:
    """It said "stop that kernel" to every second writer, a terminal command's or a worker's too."""
    from tests.jupyter.kernels import Kernel

    store = str(tmp_path / "runs")
    script = forkserver.Popen(  # imports ipykernel, as a script driving kernels does, and is no kernel
        [sys.executable, "-c", "import ipykernel.kernelapp\n" + HOLDER, store],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=subprocess_env(),
    )  # fmt: skip
    try:
        assert script.stdout is not None and script.stdout.readline().strip() == "holding"
        with pytest.raises(RunLockedError) as info:
            EventLog("shared", store)
    finally:
        os.kill(script.pid, signal.SIGKILL)
        script.communicate(timeout=30)  # reaped, and its pipes closed
    assert "stop that process" in str(info.value)
    kernel = Kernel(tmp_path)  # a kernel that writes through the Python API, the extension unloaded
    try:
        held = kernel.run(f"from nb_durable import EventLog\nlog = EventLog('shared', {store!r})")
        assert held.error is None, held.text()
        with pytest.raises(RunLockedError) as info:
            EventLog("shared", store)
    finally:
        kernel.close()
    assert "stop it in that kernel (interrupt its cell, %agent_stop shared for a background run" in str(info.value)
    worker = {"pid": 42, "host": "elsewhere", "since": 0, "program": "nb-durable worker"}
    assert "stop that worker (kill 42 on host elsewhere: SIGTERM records the run interrupted" in locked_message("r", worker)
    with name_this_process("nb-durable worker"):
        assert this_holder()["program"] == "nb-durable worker"
    assert "program" not in this_holder()
    assert "wait for it to finish, stop that process, or read" in locked_message("r", {"pid": 42, "host": "h", "since": 0})


@pytest.mark.parametrize("store_kind", ["jsonl", "sqlite", "postgres"])
def test_exactly_one_of_many_racing_processes_gets_the_run(tmp_path: Path, store_kind: str) -> None:
    racer = """
import sys
from nb_durable import EventLog, RunLockedError
try:
    log = EventLog("race", sys.argv[1])
except RunLockedError:
    print("locked", flush=True)
else:
    print("won", flush=True)
    sys.stdin.readline()
"""
    store = make_store_url(store_kind, tmp_path)
    racers = [
        forkserver.Popen(
            [sys.executable, "-c", racer, store],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=subprocess_env(),
        )
        for _ in range(6)
    ]
    answers = [r.stdout.readline().strip() for r in racers]  # type: ignore[union-attr]
    for r in racers:
        r.communicate("\n", timeout=30)
    assert sorted(answers) == ["locked"] * 5 + ["won"]


def test_exactly_one_of_many_racing_threads_gets_a_memory_run() -> None:
    # A worker's threads share one store object: its lease must be one check-and-take, or two
    # threads that look at once both take the run (about one race in ten here before). The
    # file and server leases are taken by the kernel or the server, whichever thread asks.
    def take(store: Store, run_id: str, start: threading.Barrier, won: list[StoreWriter]) -> None:
        start.wait()
        with contextlib.suppress(RunLockedError):
            won.append(store.open_writer(run_id))

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # a thread switch between any two bytecodes, so a gap shows
    try:
        with open_store(make_store_url("memory", Path())) as store:
            for trial in range(60):
                won: list[StoreWriter] = []
                start = threading.Barrier(6)
                threads = [threading.Thread(target=take, args=(store, f"race-{trial}", start, won)) for _ in range(6)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                for writer in won:
                    writer.close()
                assert len(won) == 1, f"trial {trial}: {len(won)} threads got the run"
    finally:
        sys.setswitchinterval(old)


def test_threads_naming_a_new_memory_store_at_once_all_get_the_one_store() -> None:
    # Two stores of one name would each grant the same run's lease, and keep half its runs
    # (a few races in a thousand here before: so many races, with short switches).
    def name(spec: str, start: threading.Barrier, got: list[Store]) -> None:
        start.wait()
        got.append(open_store(spec))

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for trial in range(3000):
            got: list[Store] = []
            start = threading.Barrier(8)
            spec = make_store_url("memory", Path())
            threads = [threading.Thread(target=name, args=(spec, start, got)) for _ in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert len({id(store) for store in got}) == 1, f"trial {trial}: {spec} named several stores"
    finally:
        sys.setswitchinterval(old)


def test_a_clean_close_leaves_no_lease_file_behind(tmp_path: Path) -> None:
    store = make_store_url("jsonl", tmp_path)
    with EventLog("tidy", store) as log:
        run_step(log, "a", lambda: 1)
        assert (Path(store) / ".leases" / "tidy.lock").exists()
    assert not (Path(store) / ".leases" / "tidy.lock").exists()


@pytest.mark.parametrize("store_kind", ["jsonl", "sqlite"])
def test_a_symlink_to_the_store_does_not_get_a_second_lease(tmp_path: Path, store_kind: str) -> None:
    store = make_store_url(store_kind, tmp_path)
    if store_kind == "sqlite":
        (tmp_path / "alias.db").symlink_to(tmp_path / "runs.db")
        alias = f"sqlite:///{tmp_path / 'alias.db'}"
    else:
        (tmp_path / "alias").symlink_to(tmp_path / "runs", target_is_directory=True)
        alias = str(tmp_path / "alias")
    child = start_holder(store)
    try:
        with pytest.raises(RunLockedError) as info:
            EventLog("shared", alias)
        assert info.value.holder is not None and info.value.holder["pid"] == child.pid
        assert list_runs(alias)[0].status == "running"
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.communicate(timeout=30)  # reaped, and its three pipes closed
    with EventLog("shared", alias) as log:
        assert run_step(log, "held", lambda: "again") == "by child"


def _lease_file(store_kind: str, tmp_path: Path) -> Path:
    if store_kind == "sqlite":
        return tmp_path / "runs.db.leases" / "shared.lock"
    return tmp_path / "runs" / ".leases" / "shared.lock"


@pytest.mark.parametrize("store_kind", ["jsonl", "sqlite"])
@pytest.mark.parametrize("left_behind", ["a reused pid", "another host"])
def test_a_killed_writer_reads_interrupted_whatever_its_lease_file_names(
    tmp_path: Path, store_kind: str, left_behind: str
) -> None:
    import json

    store = make_store_url(store_kind, tmp_path)
    child = start_holder(store)
    os.kill(child.pid, signal.SIGKILL)
    child.communicate(timeout=30)  # reaped, and its three pipes closed
    lease = _lease_file(store_kind, tmp_path)
    holder = json.loads(lease.read_bytes())  # SIGKILL left the file naming the dead writer
    sleeper = forkserver.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        if left_behind == "a reused pid":
            holder["pid"] = sleeper.pid  # a live process now has the dead writer's pid
        else:
            holder["host"] = "another-host.example"
        lease.write_text(json.dumps(holder))
        cli = [sys.executable, "-m", "nb_durable.cli"]
        listed = forkserver.run([*cli, "runs", "--store", store], check=False, capture_output=True, text=True, env=subprocess_env(), timeout=60)
        assert listed.returncode == 0, listed.stderr
        assert "interrupted" in listed.stdout and "running" not in listed.stdout, listed.stdout
        copied = forkserver.run(
            [*cli, "copy", store, str(tmp_path / "copy")], check=False, capture_output=True, text=True, env=subprocess_env(), timeout=60
        )
        assert copied.returncode == 0, copied.stderr
        assert read_run("shared", str(tmp_path / "copy")).steps[0].result == "by child"
        assert latest_unfinished(store) == "shared"  # what resume without an id picks
        with EventLog("shared", store) as log:  # and a writer may open it at once
            assert run_step(log, "held", lambda: "again") == "by child"
    finally:
        sleeper.kill()
        sleeper.wait()


LOCKER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("holding", flush=True)
sys.stdin.readline()
"""


def test_a_sqlite_store_another_program_keeps_locked_says_so_and_what_to_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Past the busy timeout the writer said only "database is locked".
    from nb_durable.core.stores import sqlite as sqlite_store

    monkeypatch.setattr(sqlite_store, "BUSY_SECONDS", 0.5)
    db = tmp_path / "runs.db"
    store = f"sqlite:///{db}"
    with EventLog("a", store) as log:
        run_step(log, "s", lambda: 1)
    locker = forkserver.Popen([sys.executable, "-c", LOCKER, str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=subprocess_env())
    try:
        assert locker.stdout is not None and locker.stdout.readline().strip() == "holding"
        with EventLog("b", store) as log, pytest.raises(StoreError) as info:
            run_step(log, "s", lambda: 1)
    finally:
        locker.communicate("\n", timeout=30)
    message = str(info.value)
    assert f"cannot write run 'b' to {db}: the database stayed locked for 0.5 s by another connection's write transaction" in message
    assert "End that transaction or stop that process, then try again (a run resumes from what it recorded)." in message
    with EventLog("b", store) as log:
        assert run_step(log, "s", lambda: 2) == 2


def test_threads_opening_a_new_sqlite_store_at_once_all_open_it(tmp_path: Path) -> None:
    # Two worker threads' first opens of a new file race to make it WAL; SQLite answers that
    # race "database is locked" at once (about one in thirty pairs here before the retry).
    failures: list[str] = []

    def open_and_close(spec: str) -> None:
        try:
            open_store(spec).close()
        except Exception as e:
            failures.append(repr(e))

    for i in range(40):
        spec = f"sqlite:///{tmp_path}/runs-{i}.db"
        threads = [threading.Thread(target=open_and_close, args=(spec,)) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert failures == []
