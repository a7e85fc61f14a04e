"""The PostgreSQL store when the server or its URL misbehaves: what a user is told, and what
the store keeps to itself.

* A password holding ``#`` or ``?`` (libpq takes both as the password's, ``urlsplit`` does not)
  is shown nowhere: not in the store's name, a run's location, an error, nor a tool's environment.
* A server that ends idle sessions (``idle_session_timeout``) does not end a writer's session,
  which holds the run's lease and idles through every step, nor a shared limiter's call slots.

Every test runs against the private server of ``tests/pg.py``; without one they fail.
"""

from __future__ import annotations

import time

import pytest

from nb_durable import EventLog, StoreError, list_runs, open_store, read_run, run_step
from nb_durable.agent.secrets import tool_environment
from nb_durable.core.stores import shown_store
from nb_durable.core.stores.postgres import PostgresStore
from tests.pg import postgres_url, server


@pytest.mark.postgres
@pytest.mark.parametrize("password", ["Hx#9qZr7", "Hx?9qZr7", "Hx9q#Zr7?"])
def test_a_password_with_url_delimiters_is_shown_nowhere(password: str) -> None:
    url = postgres_url().replace("postgres@", f"postgres:{password}@")  # the server trusts 127.0.0.1
    secret = "Zr7"
    store = open_store(url)
    with EventLog("named", store) as log:
        run_step(log, "a", lambda: 1)
        shown = [store.url, store.key, log.location, shown_store(url), read_run("named", url).summary.location]
    shown += [s.location for s in list_runs(url)]
    assert all(secret not in text for text in shown), shown
    with pytest.raises(StoreError, match='database "no_db_here" does not exist') as info:
        open_store(server().url("no_db_here").replace("postgres@", f"postgres:{password}@"))
    assert secret not in str(info.value), info.value
    # nb_durable's own store reaches no tool when its URL carries a password, whatever the password.
    assert "NB_DURABLE_STORE" not in tool_environment({"NB_DURABLE_STORE": url, "PATH": "/bin"})


def _after(seconds: float, value: int) -> int:
    time.sleep(seconds)
    return value


@pytest.mark.postgres
def test_a_server_ending_idle_sessions_ends_no_lease_nor_call_slot_mid_step() -> None:
    """A step longer than the server's idle_session_timeout (a model call, a long tool) lost
    the run's lease with the session it idled in: its result was never recorded."""
    url = server().fresh_database()
    open_store(url).close()  # its tables, before the server ends idle sessions
    server().admin().execute(f"ALTER DATABASE {url.rsplit('/', 1)[1]} SET idle_session_timeout = '300ms'")
    store = open_store(url)
    assert isinstance(store, PostgresStore)
    slot = store.limiter().try_slot("endpoint", 0)
    assert slot is not None
    with EventLog("long", store) as log:
        run_step(log, "a", lambda: 1)
        assert run_step(log, "b", lambda: _after(0.8, 2)) == 2
        log.finish_run("completed")
    assert [s.state for s in read_run("long", url).steps] == ["completed", "completed"]
    with open_store(url) as other:
        assert isinstance(other, PostgresStore)
        assert other.limiter().try_slot("endpoint", 0) is None, "the slot's session was ended while it idled"
    slot.release()
    store.close()
