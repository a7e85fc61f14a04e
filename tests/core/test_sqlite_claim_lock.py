"""A SQLite claim that meets a write lock held elsewhere waits for it where signals are heard."""

from __future__ import annotations

import signal
import sqlite3
import time
from pathlib import Path
from types import FrameType

import pytest

from nb_durable import EventLog, run_step
from nb_durable.core.index.claim import claim_runs
from nb_durable.core.stores import open_store


class Signalled(Exception):
    pass


def _raise(signum: int, frame: FrameType | None) -> None:
    raise Signalled


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="SIGALRM and setitimer are POSIX")
def test_a_claim_waiting_for_a_locked_database_hears_a_signal_at_once(tmp_path: Path) -> None:
    """The claim waited for the write lock in one busy wait inside SQLite (30 s), where Python runs
    no signal handler: an idle worker given SIGTERM, and then the second signal that ends it at
    once, went on for 30 s while another program held a write transaction open."""
    path = tmp_path / "runs.db"
    with EventLog("r", f"sqlite:///{path}") as log:
        run_step(log, "a", lambda: 1)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another program's write transaction, left open
    kept = signal.signal(signal.SIGALRM, _raise)
    try:
        with open_store(f"sqlite:///{path}") as store:
            started = time.monotonic()
            signal.setitimer(signal.ITIMER_REAL, 0.3)
            with pytest.raises(Signalled):
                claim_runs(store, 1)
            assert time.monotonic() - started < 3, "the signal's handler ran only once SQLite gave up"
            holder.execute("ROLLBACK")
            assert claim_runs(store, 1) == [], "the store answers once the lock is free, its busy timeout as it was"
            busy = store._reader().execute("PRAGMA busy_timeout").fetchone()[0]  # type: ignore[attr-defined]
            assert busy == 30_000
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, kept)
        holder.close()
