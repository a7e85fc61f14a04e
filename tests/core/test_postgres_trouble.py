"""The PostgreSQL store when the server or its URL misbehaves: what a user is told, and what
the store keeps to itself.

* A password holding ``#`` or ``?`` (libpq takes both as the password's, ``urlsplit`` does not)
  is shown nowhere: not in the store's name, a run's location, an error, nor a tool's environment.

Every test runs against the private server of ``tests/pg.py``; without one they fail.
"""

from __future__ import annotations

import pytest

from nb_durable import EventLog, StoreError, list_runs, open_store, read_run, run_step
from nb_durable.agent.secrets import tool_environment
from nb_durable.core.stores import shown_store
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
