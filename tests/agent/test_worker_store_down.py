"""A ``nb-durable worker`` whose PostgreSQL server is down when it starts, or restarts under it:
once the server is up, the worker listens, so a submitted run is taken at once (its NOTIFY), not
at the next poll. The server is one of this test's own (``tests/pg.py``), stopped and started."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nb_durable.agent.fleet.batch import submit
from nb_durable.core.runs import read_summary
from nb_durable.core.stores import open_store
from tests import forkserver, markers
from tests.conftest import subprocess_env
from tests.pg import PostgresServer
from tests.waiting import wait_until

POLL = 30.0
"""The worker's poll: a run taken sooner was taken because the store woke it."""
SOON = 10.0
"""How long a wake-up may take on a loaded machine (about 1 s: the listening session's retry)."""


@pytest.mark.postgres
def test_a_worker_started_while_its_database_is_down_listens_once_it_is_up(tmp_path: Path) -> None:
    """It listened only if the store opened as it started: started while the server was down,
    it polled alone for its life, and took each run up to --poll seconds late."""
    markers.require("postgres", "a PostgreSQL server of its own")
    pg = PostgresServer().start()
    ws = tmp_path / "ws"
    ws.mkdir()
    out = tmp_path / "worker.out"
    try:
        url = pg.url()
        open_store(url).close()  # its tables
        pg.down()
        with open(out, "w") as f:
            worker = forkserver.Popen(
                [sys.executable, "-m", "nb_durable.cli", "worker", "--store", url, "--poll", f"{POLL:g}"],
                env=subprocess_env(), stdout=f, stderr=subprocess.STDOUT, text=True,
            )  # fmt: skip
        try:
            said = out.read_text
            wait_until(lambda: "cannot list the runs of" in said(), "the worker to find the server down", alive=[worker], seen=said)
            # It said it tried again every 30 s (its poll), yet it looks within a second of the server's return.
            assert f"trying again every {POLL:g} s, and within a second of the server answering again" in said(), said()
            pg.up()
            up = time.monotonic()
            wait_until(lambda: "can list the runs of" in said(), "the worker to look once the server is up", timeout=POLL + 15, alive=[worker], seen=said)
            looked_in = time.monotonic() - up
            assert looked_in < SOON, f"the worker looked {looked_in:.1f} s after the server came up: at its poll"

            # Looked at since it listens: its next poll is POLL s away, so only the NOTIFY takes this one soon.
            taken_in = _taken_in(submit("say hello", store=url, run_id="first", workspace=str(ws), demo=True), url, worker)
            assert taken_in < SOON, f"the run was taken {taken_in:.1f} s after its submit: at the worker's poll"

            pg.down()  # a restart: the worker listens again
            pg.up()
            taken_in = _taken_in(submit("say hello", store=url, run_id="second", workspace=str(ws), demo=True), url, worker)
            assert taken_in < SOON, f"the run was taken {taken_in:.1f} s after its submit, after a restart"
            wait_until(lambda: "second: completed" in said(), "the worker to finish the run", alive=[worker], seen=said)
        finally:
            worker.send_signal(signal.SIGTERM)
            worker.wait(30)
    finally:
        pg.stop()


def _taken_in(run_id: str, url: str, worker: subprocess.Popen[str]) -> float:
    """Seconds from now until the worker takes ``run_id`` (it leaves the queue)."""
    submitted = time.monotonic()
    wait_until(lambda: read_summary(run_id, url).status != "queued", f"the worker to take {run_id}", timeout=POLL + 15, every=0.1, alive=[worker])
    return time.monotonic() - submitted
