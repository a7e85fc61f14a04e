"""The PostgreSQL store when the server or its URL misbehaves: what a user is told, and what
the store keeps to itself.

* A password holding ``#`` or ``?`` (libpq takes both as the password's, ``urlsplit`` does not)
  is shown nowhere: not in the store's name, a run's location, an error, nor a tool's environment.
* A server that ends idle sessions (``idle_session_timeout``) does not end a writer's session,
  which holds the run's lease and idles through every step, nor a shared limiter's call slots.
* A server whose settings refuse a statement (read-only: a standby or
  ``default_transaction_read_only``; ``statement_timeout``; ``lock_timeout``) gets an error that
  names the run, the setting and what to do; what was recorded stays recorded.
* A server with no connection left for a run being opened (``max_connections``, a role's
  ``CONNECTION LIMIT``) is named as what stopped that run.

Every test runs against the private server of ``tests/pg.py``; without one they fail.
"""

from __future__ import annotations

import time
import uuid

import psycopg
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


@pytest.mark.postgres
def test_the_password_of_a_client_key_is_shown_nowhere() -> None:
    """``sslpassword`` (libpq's password for an encrypted client key) is as secret as the user's."""
    secret = "KeyPw-7f3a9c"
    url = postgres_url() + ("&" if "?" in postgres_url() else "?") + f"sslpassword={secret}"
    store = open_store(url)
    with EventLog("keyed", store) as log:
        run_step(log, "a", lambda: 1)
        shown = [store.url, store.key, log.location, shown_store(url), read_run("keyed", url).summary.location]
    shown += [s.location for s in list_runs(url)]
    assert all(secret not in text for text in shown), shown
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


@pytest.mark.postgres
def test_a_server_whose_settings_refuse_a_write_is_named_with_what_to_do() -> None:
    """The server's words alone ('cannot execute UPDATE in a read-only transaction', 'canceling
    statement due to statement timeout') said neither which setting did it nor what to change."""
    url = server().fresh_database()
    database = url.rsplit("/", 1)[1]
    admin = server().admin()
    with EventLog("kept", url) as log:
        run_step(log, "a", lambda: 1)

    admin.execute(f"ALTER DATABASE {database} SET default_transaction_read_only = on")
    with pytest.raises(StoreError) as info:
        EventLog("kept", url)
    said = str(info.value)
    assert "cannot open run 'kept'" in said and "read-only transaction" in said, said
    assert "point the URL at the primary" in said and "target_session_attrs=read-write" in said, said
    assert [s.state for s in read_run("kept", url).steps] == ["completed"]  # reads go on
    admin.execute(f"ALTER DATABASE {database} RESET default_transaction_read_only")

    with psycopg.connect(url, autocommit=True) as slow:  # a write the server takes its time over
        slow.execute(
            "CREATE FUNCTION dawdle() RETURNS trigger AS $$ BEGIN PERFORM pg_sleep(0.5); RETURN NEW; END $$ LANGUAGE plpgsql"
        )
        slow.execute("CREATE TRIGGER dawdle BEFORE INSERT ON nb_durable_events FOR EACH ROW EXECUTE FUNCTION dawdle()")
    admin.execute(f"ALTER DATABASE {database} SET statement_timeout = '100ms'")
    with EventLog("kept", url, durability="full") as log, pytest.raises(StoreError) as info:
        run_step(log, "a", lambda: 2)
        run_step(log, "b", lambda: 2)
    said = str(info.value)
    assert "cannot write run 'kept'" in said and "statement timeout" in said, said
    assert "statement_timeout" in said and "?options=-cstatement_timeout%3D0" in said, said
    admin.execute(f"ALTER DATABASE {database} RESET statement_timeout")
    with psycopg.connect(url, autocommit=True) as fast:
        fast.execute("DROP TRIGGER dawdle ON nb_durable_events")

    admin.execute(f"ALTER DATABASE {database} SET lock_timeout = '100ms'")
    with EventLog("kept", url) as log, psycopg.connect(url) as holding:
        run_step(log, "a", lambda: 3)
        holding.execute("SELECT * FROM nb_durable_index FOR UPDATE")  # a transaction left open on its rows
        with pytest.raises(StoreError) as info:
            run_step(log, "b", lambda: 3)
    said = str(info.value)
    assert "cannot write run 'kept'" in said and "lock timeout" in said, said
    assert "lock_timeout" in said and "?options=-clock_timeout%3D0" in said, said
    admin.execute(f"ALTER DATABASE {database} RESET lock_timeout")
    assert [s.state for s in read_run("kept", url).steps] == ["completed"]  # b was never recorded
    with EventLog("kept", url) as log:
        assert run_step(log, "a", lambda: 4) == 1
        assert run_step(log, "b", lambda: 4) == 4


@pytest.mark.postgres
def test_a_run_the_server_has_no_connection_for_is_named() -> None:
    """Each run being written holds a connection of its own: when the server had none left, the
    error said 'cannot connect to the PostgreSQL store' and not which run was being opened."""
    url = postgres_url()
    role = f"r_{uuid.uuid4().hex[:12]}"
    admin = server().admin()
    admin.execute(f"CREATE ROLE {role} LOGIN CONNECTION LIMIT 2")  # the server trusts 127.0.0.1
    admin.execute(f"GRANT ALL ON SCHEMA {url.rsplit('%3D', 1)[1]} TO {role}")
    store = open_store(url.replace("postgres@", f"{role}@"))  # its reading connection: one
    try:
        with EventLog("first", store) as log:  # its session: two
            run_step(log, "a", lambda: 1)
            with pytest.raises(StoreError) as info:
                EventLog("second", store)
            said = str(info.value)
            assert "cannot open run 'second' in the PostgreSQL store" in said and f'too many connections for role "{role}"' in said, said
            assert said.count(store.url) == 1, said  # the store named once, not again inside the driver's reason
    finally:
        store.close()
