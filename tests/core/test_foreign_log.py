"""A log copied into place under another run id is refused, naming both ids."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from nb_durable import EventLog, run_step
from nb_durable.errors import ForeignRunError, LogCorruptedError
from tests import forkserver
from tests.conftest import subprocess_env

CLI = [sys.executable, "-m", "nb_durable.cli"]


def _record(store: str, run_id: str) -> None:
    with EventLog(run_id, store) as log:
        run_step(log, "charge", lambda: "charged once", effect="external")
        log.finish_run("completed", output="done")


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return forkserver.run([*CLI, *args], check=False, capture_output=True, text=True, env=subprocess_env(), timeout=60)


def test_a_copied_jsonl_log_is_refused_by_show_and_by_a_writer(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    _record(str(runs), "alpha")
    shutil.copy(runs / "alpha.jsonl", runs / "beta.jsonl")
    shown = _cli("show", "beta", "--store", str(runs))
    assert shown.returncode == 2, shown.stdout + shown.stderr
    assert "'alpha'" in shown.stderr and "'beta'" in shown.stderr and "copied" in shown.stderr
    # "fork 'alpha' into it" named no command, and alpha cannot be forked until it is back.
    assert f"put it back first, then fork it: nb-durable fork alpha NEW --at N --store {runs}." in shown.stderr, shown.stderr
    assert "charged once" not in shown.stdout
    listed = _cli("runs", "--store", str(runs))
    assert listed.returncode == 0 and "alpha" in listed.stdout and "beta" not in listed.stdout
    assert "records run 'alpha', not 'beta'" in listed.stderr  # warned about, passed over
    before = (runs / "beta.jsonl").read_bytes()
    with pytest.raises(ForeignRunError) as info:
        EventLog("beta", str(runs))
    assert isinstance(info.value, LogCorruptedError) and info.value.recorded == "alpha"
    assert (runs / "beta.jsonl").read_bytes() == before  # nothing written, nothing truncated
    assert _cli("show", "alpha", "--store", str(runs)).returncode == 0


def test_sqlite_rows_moved_under_another_run_id_are_refused(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    _record(f"sqlite:///{db}", "alpha")
    with sqlite3.connect(db) as conn:
        conn.execute(
            "INSERT INTO nb_durable_events SELECT 'beta', seq, line FROM nb_durable_events WHERE run_id = 'alpha'"
        )
    shown = _cli("show", "beta", "--store", f"sqlite:///{db}")
    assert shown.returncode == 2
    assert "'alpha'" in shown.stderr and "'beta'" in shown.stderr
