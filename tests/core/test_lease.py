"""One writer per run across processes; a killed holder frees the run at once."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from nb_durable import EventLog, RunLockedError, list_runs, read_run, run_step
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
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, store],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=subprocess_env(),
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "holding", child.stderr.read() if child.stderr else ""
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
        child.wait()
    assert list_runs(store)[0].status == "interrupted"
    with EventLog("shared", store) as log:
        assert run_step(log, "held", lambda: "by parent") == "by child"
        assert run_step(log, "next", lambda: "mine") == "mine"


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
        subprocess.Popen(
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


def test_a_clean_close_leaves_no_lease_file_behind(tmp_path: Path) -> None:
    store = make_store_url("jsonl", tmp_path)
    with EventLog("tidy", store) as log:
        run_step(log, "a", lambda: 1)
        assert (Path(store) / ".leases" / "tidy.lock").exists()
    assert not (Path(store) / ".leases" / "tidy.lock").exists()
