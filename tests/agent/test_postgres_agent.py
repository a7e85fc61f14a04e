"""The agent on the shared PostgreSQL store: a real process SIGKILLed mid-run, resumed by
another, and runs copied between stores with the CLI; a database URL a tool prints, its
password masked whole as the server's clients read it."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.parse
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from nb_durable import read_run
from nb_durable.agent.models.demo import DEMO_TASK, prepare_demo_workspace
from nb_durable.agent.tools import ToolContext, ToolRegistry, builtin_tools
from tests import forkserver
from tests.conftest import subprocess_env
from tests.pg import postgres_url, server


def cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return forkserver.run(
        [sys.executable, "-m", "nb_durable.cli", *args],
        capture_output=True,
        text=True,
        env=subprocess_env(NB_DURABLE_DEMO_LATENCY="0.2", **env),
        timeout=180,
        check=False,
    )


@pytest.mark.postgres
def test_an_agent_killed_mid_run_on_postgres_resumes_in_another_process(tmp_path: Path) -> None:
    store = postgres_url()
    workspace = prepare_demo_workspace(tmp_path / "project")
    killed = cli("run", "--demo", "--run", "pg", "--workspace", str(workspace), "--store", store, "--kill-at", "7", DEMO_TASK)
    assert killed.returncode == -9, killed.stderr
    assert read_run("pg", store).summary.status == "in_doubt"
    resumed = cli("resume", "pg", "--store", store)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.count(" replayed ") == 6 and "skipped   run_bash" in resumed.stdout
    record = read_run("pg", store)
    assert record.summary.status == "completed" and record.summary.steps == 14
    fixed = subprocess.run([sys.executable, "-m", "unittest", "-q"], cwd=workspace, capture_output=True, check=False)
    assert fixed.returncode == 0

    copied = cli("copy", store, str(tmp_path / "jsonl"))
    assert copied.returncode == 0 and "copied pg" in copied.stdout
    assert [e.kind for e in read_run("pg", tmp_path / "jsonl").events] == [e.kind for e in record.events]
    again = cli("copy", store, str(tmp_path / "jsonl"))
    assert again.returncode == 0 and "already there, the same: pg" in again.stdout, again.stdout + again.stderr
    assert "0 run(s) copied" in again.stdout


@pytest.mark.postgres
def test_a_kernel_less_run_rides_out_its_session_ended_and_the_server_restarted(tmp_path: Path) -> None:
    """A dropped connection ended a ``nb-durable run`` with LeaseLostError, losing the model call in flight."""
    from nb_durable.core.index.check import check_index
    from nb_durable.core.stores import open_store
    from tests.core.test_postgres import backend_holding, terminate
    from tests.pg import server
    from tests.waiting import wait_until

    store = postgres_url()
    workspace = prepare_demo_workspace(tmp_path / "project")
    run = forkserver.Popen(
        [sys.executable, "-m", "nb_durable.cli", "run", "--demo", "--run", "blips", "--workspace", str(workspace), "--store", store, DEMO_TASK],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=subprocess_env(NB_DURABLE_DEMO_LATENCY="0.3"),
    )  # fmt: skip
    try:

        def steps() -> int:
            try:
                return read_run("blips", store).summary.steps
            except Exception:
                return 0

        wait_until(lambda: steps() >= 3, "the run three steps in", timeout=60)
        terminate(backend_holding(store, "blips"))
        wait_until(lambda: steps() >= 7, "the run seven steps in", timeout=60)
        server().down()
        time.sleep(1)
        server().up()
        _, err = run.communicate(timeout=120)
    finally:
        run.kill()
    assert run.returncode == 0, err
    record = read_run("blips", store)
    assert record.summary.status == "completed" and record.summary.steps == 12, err  # as a calm run's
    assert all(s.state == "completed" for s in record.steps)
    assert len({s.step_id for s in record.steps}) == len(record.steps)
    assert subprocess.run([sys.executable, "-m", "unittest", "-q"], cwd=workspace, capture_output=True, check=False).returncode == 0
    with open_store(store) as opened:
        assert check_index(opened) == []


@pytest.mark.postgres
def test_no_command_prints_the_store_s_password_and_its_hints_say_how_to_give_it(tmp_path: Path) -> None:
    """fork printed its resume command, copy its source, runs its store and the worker the URL it
    was given: with the password in it."""
    import shlex

    from nb_durable.core.log import EventLog, run_step

    url = postgres_url().replace("postgres@", "postgres:s3cret@")  # the server trusts 127.0.0.1
    with EventLog("pw1", url) as log:
        log.start_run({"task": "t"})
        run_step(log, "a", lambda: 1)
        run_step(log, "b", lambda: 2)
    said = {
        "fork": cli("fork", "pw1", "pw3", "--at", "1", "--store", url),
        "copy": cli("copy", url, str(tmp_path / "copy.db")),
        "runs": cli("runs", "--store", url, "--limit", "1"),
        "none": cli("runs", "--store", url, "--offset", "9"),
        "worker": cli("worker", "--store", url, "--once", "--poll", "0.1"),
    }
    for command, done in said.items():
        assert done.returncode == 0, (command, done.stderr)
        assert "s3cret" not in done.stdout + done.stderr, (command, done.stdout, done.stderr)
    shown = url.replace(":s3cret@", "@")
    assert f"2 run(s) copied from {shown} to {tmp_path / 'copy.db'}" in said["copy"].stdout
    left_out = " (the store's password is left out of that command: set PGPASSWORD or put the password in ~/.pgpass"
    for command in ("fork", "runs"):
        hint = said[command].stdout.strip().splitlines()[-1]
        assert left_out in hint and f"--store {shlex.quote(shown)}" in hint, hint
    hint = said["runs"].stdout.strip().splitlines()[-1].removeprefix("... more runs: ").partition(" (or")[0]
    typed = cli(*shlex.split(hint)[1:], PGPASSWORD="s3cret")  # as printed, the password given as it says
    assert typed.returncode == 0 and typed.stdout.splitlines()[1].split()[0] == "pw1", typed.stdout + typed.stderr


def _libpq(url: str) -> psycopg.Connection[Any]:
    return psycopg.connect(url)


def _urllib(url: str) -> psycopg.Connection[Any]:
    """As an application reading DATABASE_URL with urllib.parse does (dj-database-url, redis-py)."""
    parts = urllib.parse.urlsplit(url)
    return psycopg.connect(
        host=parts.hostname, port=parts.port, dbname=parts.path[1:], user=parts.username, password=urllib.parse.unquote(parts.password or "")
    )


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("form", "password", "connect"),
    [
        ("{role}:{password}", "Hx#9q?Zr7", _libpq),
        ("{role}:{password}", "Hx?9q#Zr7:W", _libpq),
        (":{password}", "Hx#9q?Zr7", _libpq),  # no user in the URL: ?user= names it
        ("{role}:{password}", "Hx@9q@Zr7", _urllib),  # libpq stops at the first @, urllib at the last
    ],
)
def test_a_password_a_tool_prints_in_a_url_is_masked_whole_as_its_consumer_reads_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, form: str, password: str, connect: Callable[[str], psycopg.Connection[Any]]
) -> None:
    """The redactor masked a URL's password up to its first @ and only after a user: a tool
    printing its DATABASE_URL showed the rest of a password holding @, and all of one of a URL
    with no user (libpq takes ?user= for it)."""
    pg = server()
    role = f"r_{uuid.uuid4().hex[:12]}"
    pg.admin().execute(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")
    hba = pg.data / "pg_hba.conf"
    trusting = hba.read_text()
    hba.write_text(f"host all {role} 127.0.0.1/32 scram-sha-256\n{trusting}")  # this role must give its password
    pg.admin().execute("SELECT pg_reload_conf()")
    try:
        userinfo = form.format(role=role, password=password)
        url = f"postgresql://{userinfo}@127.0.0.1:{pg.port}/postgres" + ("" if userinfo.partition(":")[0] else f"?user={role}")
        with connect(url) as conn:  # the server takes the password as this consumer reads it
            assert conn.execute("SELECT current_user").fetchone() == (role,)
        with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
            connect(url.replace(password, password[:-1])).close()

        monkeypatch.setenv("DATABASE_URL", url)  # not a secret's name: tools see it
        ctx = ToolContext.for_step(tmp_path, "r", "tool:1:0:t")
        out = ToolRegistry(builtin_tools()).run("run_bash", {"command": 'echo "connecting to $DATABASE_URL"'}, ctx).content
        masked = url.replace(f":{password}@", ":[REDACTED:url-password]@")
        assert out == f"connecting to {masked}\n[exit status 0]"
    finally:
        hba.write_text(trusting)
        pg.admin().execute("SELECT pg_reload_conf()")
        pg.admin().execute(f"DROP ROLE {role}")
