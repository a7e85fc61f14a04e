"""nb_durable imports on every OS, and each file-lock implementation keeps the lease contract."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from nb_durable.core.lease import FileLease, FlockLocks, Locks, MsvcrtLocks
from nb_durable.errors import RunLockedError
from tests.conftest import subprocess_env

IMPLEMENTATIONS: list[Locks] = [FlockLocks(), MsvcrtLocks()]
RUNNABLE = [locks for locks in IMPLEMENTATIONS if locks.available()]


def test_this_machine_runs_at_least_one_lock_implementation() -> None:
    assert RUNNABLE, "no file lock implementation is available here"


@pytest.mark.parametrize("locks", RUNNABLE, ids=lambda locks: locks.name)
def test_the_lease_contract(tmp_path: Path, locks: Locks) -> None:
    path = tmp_path / "leases" / "run.lock"
    assert FileLease.holder(path, locks) is None  # never taken
    lease = FileLease.acquire(path, "run", locks)
    holder = FileLease.holder(path, locks)
    assert holder is not None and holder["pid"] == os.getpid()
    with pytest.raises(RunLockedError) as info:
        FileLease.acquire(path, "run", locks)  # another handle, even in this process
    assert info.value.holder == holder
    lease.release()
    lease.release()  # twice is harmless
    assert FileLease.holder(path, locks) is None
    assert not path.exists()
    again = FileLease.acquire(path, "run", locks)
    again.release()


@pytest.mark.parametrize("locks", RUNNABLE, ids=lambda locks: locks.name)
def test_a_lease_file_left_behind_is_free(tmp_path: Path, locks: Locks) -> None:
    path = tmp_path / "run.lock"
    path.write_text('{"pid": 1, "host": "elsewhere", "since": 0}')  # what a killed holder leaves
    assert FileLease.holder(path, locks) is None
    FileLease.acquire(path, "run", locks).release()


NO_FCNTL = """
import sys
sys.modules["fcntl"] = None  # as on Windows: importing it raises ImportError
import nb_durable
from nb_durable import EventLog, StoreError, run_step
with EventLog("portable", "memory://portable") as log:
    assert run_step(log, "a", lambda: 41 + 1) == 42
print(nb_durable.read_run("portable", "memory://portable").steps[0].result)
try:
    EventLog("portable", sys.argv[1])
except StoreError as e:
    print("refused:", e)
"""


def test_import_and_the_memory_store_work_without_fcntl(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", NO_FCNTL, str(tmp_path / "runs")],
        check=False, capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "42"
    # Where no lock exists, a file store says so instead of writing without one.
    assert lines[1].startswith("refused:") and "no file locking" in lines[1] and "PostgreSQL" in lines[1]
