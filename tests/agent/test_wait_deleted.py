"""``nb-durable wait`` says each run as it ends. One deleted while it waits is said so, and the
wait goes on for the others, then exits 1, as for a run that did not complete."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from nb_durable.agent.fleet.batch import submit
from nb_durable.agent.fleet.waiting import wait_elsewhere
from nb_durable.core.log import EventLog
from nb_durable.core.whole_runs.retention import delete_run
from nb_durable.errors import EXIT_CODES, RunNotFoundError
from tests import forkserver
from tests.conftest import make_store_url, nb_durable_cli, subprocess_env
from tests.waiting import wait_until


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_a_run_deleted_while_waited_for_is_said_and_the_wait_goes_on_for_the_others(tmp_path: Path, kind: str) -> None:
    """It stopped with "no run 'x1' in ... It has 1 run(s)", as for a mistyped id, and waited no
    more for x2."""
    store = make_store_url(kind, tmp_path)
    for run_id in ("x1", "x2"):
        with EventLog(run_id, store) as log:  # no end: its writer died, and it waits for a worker
            log.start_run({"task": "t"})
    out, err = tmp_path / "wait.out", tmp_path / "wait.err"
    with open(out, "w") as o, open(err, "w") as e:
        waiter = forkserver.Popen(
            [sys.executable, "-m", "nb_durable.cli", "wait", "x1", "x2", "--poll", "0.05", "--store", store],
            env=subprocess_env(), stdout=o, stderr=e, text=True,
        )  # fmt: skip
    try:
        wait_until(lambda: "waiting for 2 run(s)" in err.read_text(), "the wait to begin", alive=[waiter], seen=err.read_text)
        if kind == "jsonl":
            (tmp_path / "runs" / "x1.jsonl").unlink()  # its log removed
        else:
            deleted = nb_durable_cli("delete", "x1", "--store", store)
            assert deleted.returncode == 0, deleted.stdout + deleted.stderr
        for _ in range(20):  # the wait looks every 0.05 s: it sees x1 gone, and must go on
            assert waiter.poll() is None, out.read_text() + err.read_text()
            time.sleep(0.05)
        with EventLog("x2", store) as log:
            log.finish_run("completed")
        assert waiter.wait(30) == EXIT_CODES["failed"], out.read_text() + err.read_text()
        assert out.read_text() == (
            "x1: deleted while it was waited for (pruned, or its log removed), so it did not complete\n"
            "x2: completed\n"
            "1 of 2 run(s) completed\n"
        ), out.read_text() + err.read_text()
    finally:
        if waiter.poll() is None:
            waiter.kill()
        waiter.wait(30)


def test_a_single_run_deleted_while_a_notebook_waits_for_it_is_said_so(tmp_path: Path) -> None:
    """``%agent_wait RUN`` for a run another process runs (``wait_elsewhere``): its deletion meanwhile
    is said as such, not as a run that never was."""
    store = make_store_url("sqlite", tmp_path)
    submit("say hello", store=store, run_id="q1", workspace=str(tmp_path), demo=True)

    def say(line: str) -> None:  # said as the wait begins: the run is deleted a moment later
        assert line.startswith("waiting for run q1, queued"), line
        deleting.start()

    deleting = threading.Timer(1.0, delete_run, ("q1", store))
    with pytest.raises(RunNotFoundError, match=r"^run 'q1' was deleted from .* while it was waited for \(pruned, or its log removed\)"):
        wait_elsewhere("q1", store, 30, say)
    deleting.join()


def test_wait_says_each_run_as_it_ends_not_all_at_the_end(tmp_path: Path) -> None:
    """A wait for a night's batch printed nothing until its last run ended: every line came at once."""
    store = make_store_url("sqlite", tmp_path)
    for run_id in ("early", "late"):
        with EventLog(run_id, store) as log:
            log.start_run({"task": "t"})
    out = tmp_path / "wait.out"
    with open(out, "w") as o:
        waiter = forkserver.Popen(
            [sys.executable, "-m", "nb_durable.cli", "wait", "late", "early", "--poll", "0.05", "--store", store],
            env=subprocess_env(), stdout=o, stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip
    try:
        with EventLog("early", store) as log:
            log.finish_run("failed", error="the tool broke")
        wait_until(out.read_text, "the wait to say the run that ended", alive=[waiter], seen=out.read_text)
        assert waiter.poll() is None, "the wait ended with a run still going"
        assert out.read_text() == "early: failed: the tool broke\n"
        with EventLog("late", store) as log:
            log.finish_run("completed")
        assert waiter.wait(30) == EXIT_CODES["failed"], out.read_text()
        assert out.read_text() == "early: failed: the tool broke\nlate: completed\n1 of 2 run(s) completed\n"
    finally:
        if waiter.poll() is None:
            waiter.kill()
        waiter.wait(30)
