"""A PostgreSQL server out of capacity (SQLSTATE class 53: no connection to spare, a full disk,
no memory, a configured limit) is said as what it is, with what to do, never with the password.

It was told the generic thing: "check that the server runs ... and the user, password and
database in the URL" for a connection the server refused as too many, and, for a run opened
while the role's connections were all taken, that "the connection dropped". Every test runs
against the private server of ``tests/pg.py`` (a role with a CONNECTION LIMIT, a trigger that
raises the server's own disk_full, a role whose temp_file_limit a listing's sort exceeds);
without one they fail.
"""

from __future__ import annotations

import contextlib
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from nb_durable import EventLog, open_store
from nb_durable.core.stores.postgres import reconnect
from nb_durable.errors import StoreError, StoreWaitWarning
from tests.conftest import nb_durable_cli
from tests.pg import postgres_url, server

pytestmark = pytest.mark.postgres

PASSWORD = "s3cret-capacity"


@contextlib.contextmanager
def _role(connections: int) -> Iterator[str]:
    """A store URL (with a password) of a role of its own, which may hold ``connections`` at a time (-1: any)."""
    admin = server().admin()
    role = f"capped_{uuid.uuid4().hex[:10]}"
    admin.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{PASSWORD}' CONNECTION LIMIT {connections}")
    admin.execute(f"CREATE SCHEMA {role} AUTHORIZATION {role}")
    yield f"postgresql://{role}:{PASSWORD}@127.0.0.1:{server().port}/postgres?options=-csearch_path%3D{role}"
    admin.execute(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{role}'")
    admin.execute(f"DROP SCHEMA {role} CASCADE")
    admin.execute(f"DROP ROLE {role}")


@pytest.fixture
def capped() -> Iterator[str]:
    """A store URL (with a password) whose role may hold one connection at a time."""
    with _role(1) as url:
        yield url


def said_of(error: pytest.ExceptionInfo[Any]) -> str:
    said = str(error.value)
    assert PASSWORD not in said, said
    return said


def test_a_store_refused_for_want_of_connections_says_so_and_what_to_do(capped: str) -> None:
    with psycopg.connect(capped):  # the role's one connection, taken
        with pytest.raises(StoreError) as refused:
            open_store(capped)
    said = said_of(refused)
    assert 'too many connections for role "capped_' in said, said
    assert "The server has no connection to spare (its max_connections, or the role's CONNECTION LIMIT, is reached)" in said
    assert "fewer workers, or each with a lower concurrency" in said and "PgBouncer" in said, said
    assert "user, password and database in the URL" not in said, "the generic hint: the URL was right"


def test_a_run_opened_with_no_connection_to_spare_waits_then_says_why_not_that_a_connection_dropped(
    capped: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reconnect, "RECONNECT_SECONDS", 1.5)
    monkeypatch.setattr(reconnect, "SAY_AFTER", 0.2)
    with open_store(capped) as store:  # its reading connection is the role's one: a writer gets none
        with warnings.catch_warnings(record=True) as warned, pytest.raises(StoreError) as refused:
            warnings.simplefilter("always")
            EventLog("r1", store).__enter__()
    said = said_of(refused)
    assert "cannot open run 'r1' in the PostgreSQL store" in said and "dropped" not in said, said
    assert "no new connection could open it within 1.5 s" in said and "too many connections for role" in said, said
    assert "The server has no connection to spare" in said and "Nothing of the run was changed" in said, said
    waits = [str(w.message) for w in warned if issubclass(w.category, StoreWaitWarning)]
    assert len(waits) == 1 and "has no connection to spare" in waits[0] and "dropped" not in waits[0], waits
    # A second store of a server that answered this process (a worker's thread opens its own) waits too.
    with open_store(capped), pytest.raises(StoreError) as second, warnings.catch_warnings():
        warnings.simplefilter("ignore", StoreWaitWarning)
        open_store(capped)
    said = said_of(second)
    assert "which answered this process before: no new connection could reach it within 1.5 s" in said, said
    assert "The server has no connection to spare" in said and "dropped" not in said, said


def test_a_write_the_server_refuses_for_a_full_disk_says_to_free_disk_on_the_server() -> None:
    url = postgres_url().replace("postgres@", f"postgres:{PASSWORD}@", 1)  # the server trusts 127.0.0.1: any password
    with open_store(url) as store, EventLog("full", store) as log:
        log.start_run({"task": "t"})
        schema = url.rsplit("%3D", 1)[1]
        with psycopg.connect(server().url(), autocommit=True) as admin:  # the server's own SQLSTATE 53100
            admin.execute(
                f"CREATE FUNCTION {schema}.disk_is_full() RETURNS trigger LANGUAGE plpgsql AS "
                "$$BEGIN RAISE EXCEPTION 'could not extend file: No space left on device' USING ERRCODE = 'disk_full'; END$$"
            )
            admin.execute(f"CREATE TRIGGER disk_full BEFORE INSERT ON {schema}.nb_durable_events FOR EACH ROW EXECUTE FUNCTION {schema}.disk_is_full()")
        with pytest.raises(StoreError) as refused:
            log.record_decision("model:0", "go", by="test")
    said = said_of(refused)
    assert "No space left on device" in said, said
    assert "The database server's disk is full: free space on it (or give the database a larger volume), then try again" in said


def test_a_listing_past_the_servers_temp_file_limit_names_that_setting(tmp_path: Path) -> None:
    """SQLSTATE 53400 (configuration_limit_exceeded) was told "such as max_locks_per_transaction or
    max_files_per_process": a setting the server had not named, when its words named another."""
    with _role(-1) as url:
        role = url.split("@", 1)[0].rsplit("/", 1)[1].split(":", 1)[0]
        with open_store(url) as store:
            for i in range(300):  # a sort of their rows larger than work_mem spills to a temporary file
                with EventLog(f"run-{i:04d}", store) as log:
                    log.start_run({"task": "a task of some length " * 4})
        admin = server().admin()
        admin.execute(f"ALTER ROLE {role} SET work_mem = '64kB'")
        admin.execute(f"ALTER ROLE {role} SET temp_file_limit = 0")  # as an administrator may, to keep a disk from filling
        done = nb_durable_cli("runs", "--limit", "0", "--store", url, cwd=tmp_path)
    said = done.stderr
    assert done.returncode == 2 and PASSWORD not in said, said
    assert said.startswith("nb-durable: cannot read the PostgreSQL store postgresql://capped_"), said
    assert "temporary file size exceeds temp_file_limit (0kB)" in said, said
    assert "A limit of the server's configuration was reached (temp_file_limit): have it raised on the server" in said, said
    assert "max_locks_per_transaction" not in said, said
