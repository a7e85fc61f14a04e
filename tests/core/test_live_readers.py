"""Readers of a run being written never call the writer's line in progress torn."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import pytest

from nb_durable import EventLog, list_runs, read_run, run_step
from nb_durable.core.runs import list_runs_from_logs, read_summary
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


class EndsAtLook:
    """A store whose run's writer records its end and lets its lease go right after the reader's
    ``n``th look at the store (a read of a log or of the index, a look at a lease)."""

    def __init__(self, store: Any, log: EventLog, n: int) -> None:
        self.store, self.log, self.n, self.looks = store, log, n, 0

    def _looked(self) -> None:
        self.looks += 1
        if self.looks == self.n and self.log.writable:
            self.log.finish_run("interrupted", error="stopped by ada with the Stop button")
            self.log.close()

    def load(self, run_id: str) -> Any:
        data = self.store.load(run_id)
        self._looked()
        return data

    def holder(self, run_id: str) -> Any:
        holder = self.store.holder(run_id)
        self._looked()
        return holder

    def held(self) -> Any:
        held = self.store.held()
        self._looked()
        return held

    def index_rows(self, run_ids: Any = None) -> Any:
        rows = self.store.index_rows(run_ids)
        self._looked()
        return rows

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


def _stopped_in_a_command(log: EventLog) -> None:
    def killed() -> None:
        raise KeyboardInterrupt

    log.start_run({"task": "count"})
    with contextlib.suppress(KeyboardInterrupt):
        run_step(log, "tool:0:0:push", killed, effect="external")


@pytest.mark.parametrize("store_kind", ["jsonl", "sqlite"])
@pytest.mark.parametrize("reader", ["read_summary", "read_run", "list_runs", "list_runs_from_logs"])
def test_a_reader_shows_a_run_stopped_in_a_command_as_running_or_as_stopped_never_in_between(
    tmp_path: Path, store_kind: str, reader: str
) -> None:
    # A Stop that cuts a command records the run's end (who stopped it), then lets the lease go.
    # Whenever that happens among a reader's looks, the reader shows the run still running, or
    # in doubt with who stopped it: never in doubt with no error and no writer, a state that never was.
    read = {
        "read_summary": lambda s, run_id: read_summary(run_id, s),
        "read_run": lambda s, run_id: read_run(run_id, s).summary,
        "list_runs": lambda s, run_id: list_runs(s)[0],
        "list_runs_from_logs": lambda s, run_id: list_runs_from_logs(s)[0],
    }[reader]
    seen = set()
    for n in range(1, 8):
        root = str(tmp_path / f"runs{n}") if store_kind == "jsonl" else f"sqlite:///{tmp_path / f'runs{n}.db'}"
        with opened(root) as store:
            log = EventLog("cut", store)
            _stopped_in_a_command(log)
            summary = read(EndsAtLook(store, log, n), "cut")
            log.close()
        # Ended, the lease looked at just before may still be shown held: it was, then.
        shown = (summary.status, summary.error)
        assert shown in {("running", None), ("in_doubt", "stopped by ada with the Stop button")}, (n, shown, summary.holder)
        assert summary.holder is not None or summary.status != "running"
        seen.add(shown[0])
    assert seen == {"running", "in_doubt"}  # both sides of the moment were met
