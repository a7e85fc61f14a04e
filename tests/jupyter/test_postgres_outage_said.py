"""A notebook whose PostgreSQL server restarts under its background runs: each run rides the
restart out, and the cell running meanwhile shows the wait once for the restart, not once per
run; a later restart is shown again. The server is one of this test's own (``tests/pg.py``)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from nb_durable.core.runs import read_summary
from nb_durable.core.stores.postgres import reconnect
from tests import markers
from tests.fakes import Delay, FunctionScenario, MessagesAPIServer, RecordedRequest, reply
from tests.jupyter.kernels import Kernel
from tests.pg import PostgresServer

WAITED = "StoreWaitWarning: the connection to"


@pytest.mark.postgres
@pytest.mark.kernel
def test_a_notebook_shows_each_server_restart_once_however_many_runs_ride_it_out(tmp_path: Path) -> None:
    """The second restart went unseen: Python shows a warning's text once per line of code, and
    a background run's warning is made at one line (threading's), in the same words each time."""
    markers.require("postgres", "a PostgreSQL server of its own")
    release = [threading.Event()]

    def held(request: RecordedRequest) -> Delay:
        return Delay(60.0, reply("Done."), until=release[0])  # each run's model call in flight until the server is down

    pg = PostgresServer().start()
    try:
        with MessagesAPIServer(FunctionScenario(held)) as api:
            kernel = Kernel(tmp_path, ANTHROPIC_BASE_URL=api.url, ANTHROPIC_API_KEY="sk-test-outage")
            try:
                assert kernel.run("%load_ext nb_durable").status == "ok"
                url = pg.url()
                for restart, runs in enumerate([("a", "b"), ("c", "d")]):
                    release[0] = threading.Event()
                    for run in runs:
                        started = kernel.run(f"%%agent --background --store {url} --run {run} --model claude-test-1 --workspace .\nDo it.")
                        assert started.status == "ok", started.text()
                    api.wait_for_requests(2 * (restart + 1), timeout=60)
                    pg.down()
                    release[0].set()  # each run's next write finds its session gone
                    back = threading.Timer(reconnect.SAY_AFTER + 2.5, pg.up)  # both runs wait past SAY_AFTER, at once
                    back.start()
                    try:
                        waited = kernel.run(f"%agent_wait {runs[0]}\n%agent_wait {runs[1]}", timeout=120)
                    finally:
                        back.join()
                    said = waited.text()
                    assert said.count(WAITED) == 1, f"restart {restart + 1}: {said}"
                    assert f"{WAITED} the PostgreSQL store {url.split('?')[0]}" in said, said  # the store's, not one run's
                    assert all(read_summary(run, url).status == "completed" for run in runs), said
                    time.sleep(0.2)
            finally:
                kernel.close()
    finally:
        pg.stop()
