"""A worker listens on its store's reading session (``postgres.listening``), which its runs'
reads share: a notification that comes while another thread's query holds that session is
read by that thread, kept in psycopg's backlog (3.2.4 on; before, it was lost), and heard by
the listener afterwards. Every test runs against the private server of ``tests/pg.py``.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from nb_durable import EventLog, open_store
from nb_durable.core.index.rows import STOPPED_BY_WORKER
from tests.conftest import make_store_url
from tests.waiting import wait_until

pytestmark = pytest.mark.postgres


def test_a_notify_that_comes_during_another_threads_query_on_the_listening_session_is_heard(tmp_path: Path) -> None:
    store = make_store_url("postgres", tmp_path)
    with open_store(store) as listening, open_store(store) as other:
        listener: Any = listening.listen()  # type: ignore[attr-defined]
        try:
            backend = listener.info.backend_pid
            asleep = threading.Thread(target=lambda: listening.reading_session().execute("SELECT pg_sleep(1.5)"))  # type: ignore[attr-defined]
            asleep.start()
            sleeping = "SELECT 1 FROM pg_stat_activity WHERE pid = %s AND state = 'active' AND query LIKE %s"
            with other.reading_session().cursor() as cursor:  # type: ignore[attr-defined]
                wait_until(lambda: cursor.execute(sleeping, (backend, "%pg_sleep%")).fetchone(), "the listening session busy with the sleep")
            # A worker's graceful stop notifies; the server sends it once the sleep's query ends,
            # amid that query's answer, which the sleeping thread reads.
            with EventLog("stopped", other) as log:
                log.start_run({"task": "t"})
                log.finish_run("interrupted", error=f"{STOPPED_BY_WORKER} h:1 before step model:1")
            assert asleep.is_alive(), "the notify came after the other thread's query, not during it"
            asleep.join()
            heard = [n.payload for n in listener.notifies(timeout=3, stop_after=1)]
        finally:
            listener.close()
    assert heard == ["stopped"]
