"""A long PostgreSQL outage through a worker's polls: each poll's wait gives up after
``RECONNECT_SECONDS`` and the next begins at once, so each said "the connection ... dropped"
again (every 30 s, for as long as the server was down) and none said its end. The outage is said
once, and its end once, by the first read to get through. The server is one of this test's own."""

from __future__ import annotations

import warnings

import pytest

from nb_durable import list_runs, open_store
from nb_durable.core.stores.postgres import reconnect
from nb_durable.errors import StoreError, StoreWaitWarning
from tests import markers
from tests.pg import PostgresServer


@pytest.mark.postgres
def test_waits_that_follow_one_another_through_an_outage_say_it_once_and_its_end_once(monkeypatch: pytest.MonkeyPatch) -> None:
    markers.require("postgres", "a PostgreSQL server of its own")
    monkeypatch.setattr(reconnect, "RECONNECT_SECONDS", 1.0)  # each wait gives up after a second, as a poll's after 30
    monkeypatch.setattr(reconnect, "SAY_AFTER", 0.2)
    pg = PostgresServer().start()
    try:
        url = pg.url()
        store = open_store(url)  # a worker's poll store, kept open
        try:
            assert list_runs(store) == []
            pg.down()
            with warnings.catch_warnings(record=True) as warned:
                warnings.simplefilter("always")
                for _ in range(3):  # three polls, one after another, each waiting and giving up
                    with pytest.raises(StoreError):
                        list_runs(store)
                pg.up()
                assert list_runs(store) == [] and list_runs(store) == []
        finally:
            store.close()
    finally:
        pg.stop()
    said = [str(w.message) for w in warned if issubclass(w.category, StoreWaitWarning)]
    assert len(said) == 2, said
    assert said[0].startswith(f"the connection to the PostgreSQL store {url} (") and " dropped (" in said[0], said
    assert said[1].startswith(f"the server of the PostgreSQL store {url} (") and " answers again after " in said[1], said
