"""PostgreSQL setup mistakes are said, not waited out: a role the server does not have, a wrong
or missing password, a user without the right to use the schema or make the tables in it. Each
was taken for an outage: a worker warned at every poll, for ever, and a front end said only
"check that the server runs". Now each is a ``StoreAccessError`` (a worker exits 2 before its
first line) that names the store, never the password, and says what to do; a server that is
down or restarting is still waited for (``test_worker_store_down``, ``test_postgres_reconnect``).

Every test runs against the private server of ``tests/pg.py``; without one they fail.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from nb_durable import EventLog, read_run, run_step
from nb_durable.core.stores import open_store, postgres
from nb_durable.core.stores.postgres import MIGRATIONS
from nb_durable.errors import StoreAccessError
from tests import forkserver, markers
from tests.conftest import nb_durable_cli, subprocess_env
from tests.pg import PostgresServer, postgres_url, server
from tests.waiting import wait_until


def _role(*options: str) -> str:
    """A new login role of the private server (which trusts 127.0.0.1 unless told otherwise)."""
    name = f"r_{uuid.uuid4().hex[:12]}"
    server().admin().execute(f"CREATE ROLE {name} LOGIN {' '.join(options)}")
    return name


def _refused_worker(store: str, cwd: Path) -> str:
    """What a worker on ``store`` said as it exited 2 before its first line (a worker that waits
    instead runs out the timeout, and the test fails)."""
    worker = nb_durable_cli("worker", "--store", store, "--poll", "0.1", cwd=cwd, timeout=60)
    assert worker.returncode == 2, (worker.stdout, worker.stderr)
    assert worker.stdout == "" and "cannot list the runs" not in worker.stderr, (worker.stdout, worker.stderr)
    return worker.stderr


@pytest.mark.postgres
def test_a_worker_as_a_role_the_server_lacks_exits_2_saying_how_to_create_it(tmp_path: Path) -> None:
    url = postgres_url().replace("postgres@", "nosuch_role:s3cret@")
    said = _refused_worker(url, tmp_path)
    port = server().port
    assert 'role "nosuch_role" does not exist' in said and f"host 127.0.0.1, port {port}, database postgres" in said, said
    assert f"create it (as a superuser: createuser -h 127.0.0.1 -p {port} --pwprompt nosuch_role" in said, said
    assert "fix the user's name in the URL (or PGUSER)" in said and "s3cret" not in said, said


@pytest.mark.postgres
def test_a_worker_with_a_wrong_password_exits_2_showing_it_nowhere(tmp_path: Path) -> None:
    role = _role("PASSWORD 'the-right-one'")
    server().ask_password_of(role)
    url = postgres_url().replace("postgres@", f"{role}:Wr0ngPw-9f2@")
    worker = nb_durable_cli("worker", "--store", url, "--poll", "0.1", cwd=tmp_path, timeout=60)
    assert worker.returncode == 2 and worker.stdout == "", (worker.stdout, worker.stderr)
    assert "Wr0ngPw" not in worker.stdout + worker.stderr, worker.stderr
    assert f'password authentication failed for user "{role}"' in worker.stderr, worker.stderr
    assert "fix it in the URL (or PGPASSWORD, or ~/.pgpass)" in worker.stderr, worker.stderr
    # None at all, where the server asks one: said too, and so from PGPASSWORD, shown nowhere either.
    bare = url.replace(":Wr0ngPw-9f2@", "@")
    said = _refused_worker(bare, tmp_path)
    assert "no password supplied" in said and f"The server asks {role} for a password and none was given" in said, said
    listing = nb_durable_cli("runs", "--store", bare, cwd=tmp_path, timeout=60, PGPASSWORD="Wr0ngPw-9f2")
    assert listing.returncode == 2 and "Wr0ngPw" not in listing.stdout + listing.stderr, (listing.stdout, listing.stderr)
    assert "password authentication failed" in listing.stderr and "PGPASSWORD" in listing.stderr, listing.stderr


@pytest.mark.postgres
def test_a_user_without_create_or_usage_on_the_schema_is_told_the_grant_to_run(tmp_path: Path) -> None:
    """Without CREATE the first open said "permission denied for schema" and advised a GRANT on
    public whatever the schema, as a StoreError a worker waited out; without USAGE the server
    leaves the schema out of the path, and the store was said not to exist."""
    url = postgres_url()
    schema = url.rsplit("%3D", 1)[1]
    role = _role()
    as_role = url.replace("postgres@", f"{role}@")
    grant = f"GRANT CREATE, USAGE ON SCHEMA {schema} TO {role}"
    for reading in (False, True):
        with pytest.raises(StoreAccessError) as refused:
            open_store(as_role, existing=reading)
        said = str(refused.value)
        assert f"User {role} has no USAGE or CREATE right on schema {schema}" in said and grant in said, said
    assert grant in _refused_worker(as_role, tmp_path)
    server().admin().execute(f"GRANT USAGE ON SCHEMA {schema} TO {role}")
    with pytest.raises(StoreAccessError) as refused:
        open_store(as_role)
    said = str(refused.value)
    create = f"GRANT CREATE ON SCHEMA {schema} TO {role}"  # USAGE it has: the advice names only what is missing
    assert f"permission denied for schema {schema}" in said and f"has no CREATE right on schema {schema}" in said and create in said, said
    open_store(url).close()  # its tables, made by their owner: the role may not use them either
    with pytest.raises(StoreAccessError) as refused:
        open_store(as_role)
    said = str(refused.value)
    assert f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {role}" in said, said
    server().admin().execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {role}")
    open_store(as_role).close()  # the advice, followed, opens it


@pytest.mark.postgres
def test_a_worker_waiting_out_a_server_down_exits_2_once_it_is_up_without_its_role(tmp_path: Path) -> None:
    """Down, the server is waited for (an outage); up, it refuses the role: that no wait mends."""
    markers.require("postgres", "a PostgreSQL server of its own")
    pg = PostgresServer().start()
    out = tmp_path / "worker.out"
    try:
        url = pg.url().replace("postgres@", "nosuch_role@")
        pg.down()
        with open(out, "w") as f:
            worker = forkserver.Popen(
                [sys.executable, "-m", "nb_durable.cli", "worker", "--store", url, "--poll", "0.2"],
                env=subprocess_env(), stdout=f, stderr=subprocess.STDOUT, text=True,
            )  # fmt: skip
        try:
            said = out.read_text
            wait_until(lambda: "cannot list the runs of" in said(), "the worker to find the server down", alive=[worker], seen=said)
            assert worker.poll() is None, said()  # a server down is an outage: waited for
            pg.up()
            assert worker.wait(60) == 2, said()
            assert 'role "nosuch_role" does not exist' in said() and "createuser" in said(), said()
        finally:
            if worker.poll() is None:
                worker.kill()
                worker.wait(30)
    finally:
        pg.stop()


@pytest.mark.postgres
def test_a_worker_as_a_role_pg_hba_rejects_exits_2_saying_what_to_change(tmp_path: Path) -> None:
    """A pg_hba.conf line rejecting the role was taken for an outage, as the other refusals were."""
    role = _role()
    server().reject(role)
    said = _refused_worker(postgres_url().replace("postgres@", f"{role}@"), tmp_path)
    assert f'pg_hba.conf rejects connection for host "127.0.0.1", user "{role}", database "postgres"' in said, said
    assert f"A line of the server's pg_hba.conf rejects user {role} connecting to database postgres from host 127.0.0.1" in said, said
    assert "have an administrator of the server change that line" in said and "SELECT pg_reload_conf()" in said, said
    assert "?sslmode=require in the URL if the line for them is hostssl" in said, said


@pytest.mark.postgres
def test_a_role_no_pg_hba_line_lets_in_is_told_to_have_one_added() -> None:
    """A server of its own, whose pg_hba.conf lets only postgres in over TCP: no line for the role."""
    markers.require("postgres", "a PostgreSQL server of its own")
    pg = PostgresServer().start()
    try:
        role = f"r_{uuid.uuid4().hex[:12]}"
        pg.admin().execute(f"CREATE ROLE {role} LOGIN")
        (pg.data / "pg_hba.conf").write_text("local all all trust\nhost all postgres 127.0.0.1/32 trust\n")
        assert pg.admin().execute("SELECT pg_reload_conf()").fetchone() == (True,)

        def refused() -> str | None:
            try:
                open_store(pg.url().replace("postgres@", f"{role}@")).close()
            except StoreAccessError as e:
                return str(e)
            return None  # the postmaster has not reread the file yet

        said = wait_until(refused, "the server to reread its pg_hba.conf")
        assert said is not None
        assert f'no pg_hba.conf entry for host "127.0.0.1", user "{role}", database "postgres"' in said, said
        assert f"No line of the server's pg_hba.conf lets in user {role} connecting to database postgres from host 127.0.0.1 without encryption" in said, said
        assert "add one for them to the server's pg_hba.conf and reload it" in said and "sslmode=require" in said, said
    finally:
        pg.stop()


@pytest.mark.postgres
def test_a_role_with_table_rights_cannot_upgrade_an_older_store_and_is_told_to_have_its_owner_open_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Upgrading alters the tables, which only their owner may do: the role was told the table
    GRANT it already had ("must be owner of table"), or, without CREATE on the schema, the same."""
    url = postgres_url()
    schema = url.rsplit("%3D", 1)[1]
    monkeypatch.setattr(postgres.schema, "MIGRATIONS", MIGRATIONS[:6])
    with EventLog("old", url) as log:  # made by postgres at schema version 6
        run_step(log, "a", lambda: 1)
    monkeypatch.undo()
    role = _role()
    as_role = url.replace("postgres@", f"{role}@")
    server().admin().execute(f"GRANT USAGE ON SCHEMA {schema} TO {role}")
    server().admin().execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {role}")
    for right in ("", "CREATE"):  # without CREATE on the schema; with it, up to the ALTER TABLE
        if right:
            server().admin().execute(f"GRANT {right} ON SCHEMA {schema} TO {role}")
        with pytest.raises(StoreAccessError) as refused:
            open_store(as_role)
        said = str(refused.value)
        assert f"schema {schema} are at schema version 6" in said and f"to version {len(MIGRATIONS)}" in said, said
        assert "only their owner, postgres, may do: open the store once as postgres" in said and "GRANT" not in said, said
    open_store(url).close()  # the advice, followed: its owner opens it once
    with open_store(as_role):
        assert [s.result for s in read_run("old", as_role).steps] == [1]


@pytest.mark.postgres
@pytest.mark.parametrize("revoke", ["ALL ON ALL TABLES IN SCHEMA {schema}", "USAGE ON SCHEMA {schema}"])
def test_rights_revoked_while_a_run_writes_stop_its_next_write_with_the_grant_keeping_its_steps(revoke: str) -> None:
    """A write refused for want of rights was a plain StoreError, so a worker passed the run
    over and went on to fail the next the same way; without USAGE on the schema the server
    says its tables do not exist at all."""
    url = postgres_url()
    schema = url.rsplit("%3D", 1)[1]
    open_store(url).close()  # its tables, made by postgres
    role = _role()
    server().admin().execute(f"GRANT USAGE ON SCHEMA {schema} TO {role}")
    server().admin().execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {role}")
    with EventLog("r", url.replace("postgres@", f"{role}@")) as log:
        run_step(log, "a", lambda: 1)
        server().admin().execute(f"REVOKE {revoke.format(schema=schema)} FROM {role}")
        with pytest.raises(StoreAccessError) as refused:
            run_step(log, "b", lambda: 2)
    said = str(refused.value)
    assert "cannot write run 'r' in the PostgreSQL store" in said, said
    grant = f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {role}" if "ALL" in revoke else (
        # Its tables are made: using them needs USAGE alone, so CREATE is neither missing nor granted.
        f"User {role} has no USAGE right on schema {schema}, where the store's tables are: have its owner "
        f"(or a superuser) run GRANT USAGE ON SCHEMA {schema} TO {role}"
    )  # fmt: skip
    assert grant in said, said
    assert [(s.step_id, s.result) for s in read_run("r", url).steps] == [("a", 1)]  # nothing recorded was lost
