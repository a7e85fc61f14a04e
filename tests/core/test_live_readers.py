"""Readers of a run being written never call the writer's line in progress torn."""

from __future__ import annotations

import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

from nb_durable import EventLog, list_runs, read_run
from nb_durable.core.runs import read_summary
from nb_durable.core.stores import opened
from nb_durable.errors import TornLineWarning
from tests import forkserver
from tests.conftest import subprocess_env

WRITER = """
import sys, time
from nb_durable import EventLog, run_step
big = "x" * 1_000_000
with EventLog("live", sys.argv[1], durability="none") as log:
    print("writing", flush=True)
    for i in range(150):
        run_step(log, f"big:{i}", lambda: big)
    time.sleep(60)  # still holding the lease
"""

CLI = [sys.executable, "-m", "nb_durable.cli"]


def test_readers_do_not_warn_about_the_line_a_live_writer_is_writing(tmp_path: Path) -> None:
    runs = str(tmp_path / "runs")
    writer = forkserver.Popen(
        [sys.executable, "-c", WRITER, runs], stdout=subprocess.PIPE, text=True, env=subprocess_env()
    )
    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "writing"
        seen = 0
        deadline = time.monotonic() + 30
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            while seen < 150 and time.monotonic() < deadline:
                summaries = list_runs(runs)
                if summaries:
                    assert summaries[0].status == "running"
                    seen = max(seen, read_run("live", runs).summary.steps)
        torn = [w for w in caught if issubclass(w.category, TornLineWarning)]
        assert not torn, f"{len(torn)} reads warned: {torn[0].message}"
        assert seen == 150  # every read happened while the writer wrote
        shown = forkserver.run([*CLI, "runs", "--store", runs], check=False, capture_output=True, text=True, env=subprocess_env(), timeout=60)
        assert shown.returncode == 0 and "running" in shown.stdout and "torn" not in shown.stderr, shown.stderr
    finally:
        writer.kill()
        writer.wait()
        writer.stdout.close()  # type: ignore[union-attr]


class EndsWhileRead:
    """A store whose run's writer records its end and releases its lease just after a reader
    has read the log, before the reader looks at the lease: the moment a reader can meet."""

    def __init__(self, store: Any, log: EventLog) -> None:
        self.store, self.log = store, log

    def load(self, run_id: str) -> Any:
        data = self.store.load(run_id)
        if self.log.writable:
            self.log.finish_run("interrupted", error="stopped by ada with the Stop button")
            self.log.close()
        return data

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


def test_a_run_that_ends_between_the_read_and_the_look_at_its_lease_is_read_as_it_ended(tmp_path: Path) -> None:
    with opened(str(tmp_path / "runs")) as store:
        log = EventLog("stopped", store)
        log.start_run({"task": "count"})
        summary = read_summary("stopped", EndsWhileRead(store, log))
    # Never a status that was not: the writer's end was on disk when the lease was seen free.
    assert (summary.status, summary.error, summary.holder) == ("interrupted", "stopped by ada with the Stop button", None)
