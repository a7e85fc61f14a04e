"""A run's log this user may not read (its mode, another user's file) is skipped by a listing and
refused by a read, each naming the file, whose it is, and what to do: not "[Errno 13] Permission
denied". Root reads any file whatever its mode: as root, the reading is done by 'nobody' in a
child process."""

from __future__ import annotations

import os
import pwd
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any

from nb_durable import EventLog, list_runs, read_run, run_step
from nb_durable.errors import StoreError
from tests.conftest import NOBODY, as_nobody


def _look(runs: Path) -> dict[str, Any]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        listed = [s.run_id for s in list_runs(runs)]
    try:
        read_run("closed", runs)
        refused = ""
    except StoreError as e:
        refused = str(e)
    return {"listed": listed, "warned": [str(w.message) for w in caught], "refused": refused}


def test_a_log_this_user_may_not_read_is_skipped_saying_whose_it_is_and_what_to_do() -> None:
    """The warning was "skipped .../closed.jsonl: [Errno 13] Permission denied: '.../closed.jsonl'"."""
    base = Path(tempfile.mkdtemp(dir="/tmp"))  # pytest's folders are root's alone: nobody could enter them
    try:
        base.chmod(0o755)
        runs = base / "runs"
        for run_id in ("open", "closed"):
            with EventLog(run_id, runs) as log:
                run_step(log, "a", lambda: 1)
        runs.chmod(0o755)
        (runs / "open.jsonl").chmod(0o644)
        (runs / "closed.jsonl").chmod(0o000)
        said = as_nobody(lambda: _look(runs))
        reader = pwd.getpwuid(NOBODY if os.geteuid() == 0 else os.geteuid()).pw_name
        owner = pwd.getpwuid(os.geteuid()).pw_name  # who made the logs
        assert said["listed"] == ["open"], said
        path = runs / "closed.jsonl"
        assert said["refused"] == (
            f"cannot read {path}: the user {reader} may not read it (permission denied: it belongs to {owner}, its mode "
            f"----------). Fix its permissions (chmod, chown) so {reader} can read it"
            + (f", or read the runs as {owner}" if owner != reader else "")
        ), said
        assert said["warned"] == [f"skipped {path}: {said['refused']}"], said
    finally:
        shutil.rmtree(base, ignore_errors=True)
