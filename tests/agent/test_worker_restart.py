"""A worker running several runs when its PostgreSQL server restarts: each run's writer finds
its session dropped and rides the restart out on its own (``reconnect.ride_out``), then takes
its lease back and goes on. The restart is the server's, so the worker says it once, naming
the store, not once per run. The server is one of this test's own (``tests/pg.py``)."""

from __future__ import annotations

import threading
import time
import warnings
from pathlib import Path

import pytest

from nb_durable.agent.fleet.batch import submit
from nb_durable.agent.fleet.taken import Taken
from nb_durable.agent.fleet.worker import ResumeWorker
from nb_durable.core.stores.postgres import reconnect
from nb_durable.errors import StoreWaitWarning
from tests import markers
from tests.fakes import Delay, FunctionScenario, MessagesAPIServer, RecordedRequest, reply
from tests.pg import PostgresServer
from tests.waiting import wait_until

RUNS = 3


@pytest.mark.postgres
def test_a_worker_whose_server_restarts_under_its_runs_says_so_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With --concurrency 3, a restart said "the connection to run ... dropped" three times, once per run."""
    markers.require("postgres", "a PostgreSQL server of its own")
    release = threading.Event()

    def held(request: RecordedRequest) -> Delay:
        return Delay(60.0, reply("Done."), until=release)  # every run's step in flight until the server is down

    pg = PostgresServer().start()
    try:
        with MessagesAPIServer(FunctionScenario(held)) as api:
            monkeypatch.setenv("ANTHROPIC_BASE_URL", api.url)
            monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-restart")
            url = pg.url()
            queued = [submit(f"task {i}", store=url, workspace=str(tmp_path)) for i in range(RUNS)]
            taken: list[Taken] = []
            worker = ResumeWorker(store=url, concurrency=RUNS, poll=0.2, report=taken.append)
            thread = threading.Thread(target=worker.run)
            with warnings.catch_warnings(record=True) as warned:
                warnings.simplefilter("always")  # every one said, as Python's default would not show a repeated text
                thread.start()
                try:
                    api.wait_for_requests(RUNS, timeout=30)
                    pg.down()
                    release.set()  # each writer's next write finds its session gone
                    time.sleep(reconnect.SAY_AFTER + 2.0)  # every writer waits past SAY_AFTER, all of them at once
                    pg.up()
                    wait_until(lambda: len(taken) == RUNS, "the worker to finish its runs", seen=lambda: taken)
                finally:
                    release.set()
                    worker.stop()
                    thread.join(60)
    finally:
        pg.stop()
    assert sorted(t.run_id for t in taken) == sorted(queued) and {t.outcome for t in taken} == {"completed"}, taken
    waits = [str(w.message) for w in warned if issubclass(w.category, StoreWaitWarning)]
    assert len(waits) == 2, waits  # the outage once, and its end once
    assert waits[0].startswith(f"the connection to the PostgreSQL store {url} (") and "dropped (" in waits[0], waits
    assert waits[1].startswith(f"the server of the PostgreSQL store {url} (") and " answers again after " in waits[1], waits
