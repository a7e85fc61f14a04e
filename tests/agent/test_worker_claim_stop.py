"""A worker stopped (SIGTERM) between its claim and the runs it claimed: it takes none of them,
and gives their claims back, so another worker takes each at once and it stays queued, not
interrupted (no run started only to be stopped before its first step). A worker stopped while
its claim waits for a SQLite write lock held elsewhere stops waiting: it would claim nothing."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

import pytest

from nb_durable.agent.fleet.batch import submit
from nb_durable.agent.fleet.taken import Taken
from nb_durable.agent.fleet.worker import ResumeWorker
from nb_durable.core.index.rows import CLAIM_SECONDS
from nb_durable.core.runs import read_summary
from tests import forkserver
from tests.conftest import subprocess_env
from tests.waiting import wait_until


class StoppedAtItsClaim(ResumeWorker):
    """A worker whose stop comes just after its claim, as a SIGTERM may."""

    def candidates(self, busy: Iterable[str] = (), limit: int | None = None, *, claim: bool = False) -> list[str]:
        found = super().candidates(busy, limit, claim=claim)
        if claim and found:
            self.stop()
        return found


@pytest.mark.postgres
def test_a_worker_stopped_after_its_claim_takes_nothing_and_gives_its_claims_back(tmp_path: Path) -> None:
    """It started each run it had claimed only to stop it before its first step: the queued run
    was listed interrupted by the worker, and the claims it did not use held other workers off."""
    from tests.pg import postgres_url

    url = postgres_url()
    queued = [submit(f"say hello {i}", store=url, run_id=f"q{i}", workspace=str(tmp_path), demo=True) for i in range(2)]
    taken: list[Taken] = []
    stopped = StoppedAtItsClaim(store=url, concurrency=2, poll=0.2, report=taken.append)
    assert stopped.run() == [] and taken == []
    assert [read_summary(r, url).status for r in queued] == ["queued", "queued"]
    other = ResumeWorker(store=url, concurrency=2)
    looked = time.monotonic()
    assert sorted(other.candidates(limit=2, claim=True)) == sorted(queued)
    assert time.monotonic() - looked < CLAIM_SECONDS, "found at once, not once the stopped worker's claims ran out"


def test_a_worker_stopped_while_its_claim_waits_for_a_sqlite_lock_exits_without_waiting_it_out(tmp_path: Path) -> None:
    """It heard SIGTERM at once and said "stopping", but its claim went on waiting for the write
    lock another program's open transaction held: it exited only when that program let go, or
    after SQLite's 30 s busy wait."""
    path = tmp_path / "runs.db"
    out = tmp_path / "worker.out"
    with open(out, "w") as f:
        worker = forkserver.Popen(
            [sys.executable, "-m", "nb_durable.cli", "worker", "--store", f"sqlite:///{path}", "--poll", "0.2"],
            env=subprocess_env(), stdout=f, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
    said = out.read_text
    holder: sqlite3.Connection | None = None
    try:
        wait_until(lambda: "at a time" in said(), "the worker's banner (its store made)", alive=[worker], seen=said)
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # another program's write transaction, left open
        time.sleep(1)  # several polls: the worker's claim now waits for the lock
        worker.send_signal(signal.SIGTERM)
        stopped = time.monotonic()
        wait_until(lambda: worker.poll() is not None, "the stopping worker to exit while the lock is held", timeout=10, seen=said)
        assert time.monotonic() - stopped < 5, said()
        assert "stopping" in said() and worker.returncode == 0, said()
        assert holder.in_transaction, "the lock was held all along"
    finally:
        if holder is not None:
            holder.close()
        if worker.poll() is None:
            worker.kill()
        worker.wait(30)
