"""A private PostgreSQL server for the test session (and the benchmarks): never a shared one.

``postgres_url()`` starts the server on first use (``initdb`` into a temporary folder, then
``pg_ctl start`` on 127.0.0.1 and a free port, as shared/STACK.md describes; as root through
``runuser -u postgres``) and returns a URL naming a fresh, empty schema of its one database,
so every call is an isolated store. Schemas rather than databases: a schema costs a
millisecond, a database ~8 MB of disk, and stores in schemas of one database also exercise
the lease's collision-safe lock keys (every schema numbers its runs from 1).

``server().down()`` and ``up()`` stop and start it again (its sessions end, its data stays), as
an administrator's restart does. The server stops when this process exits (``atexit``), and a
small watchdog process stops it too if this one is killed, so CI never keeps a stray postgres
holding its output open.

If the server cannot be found or started, ``postgres_url()`` raises ``PostgresUnavailable``
with what to install or fix: the PostgreSQL tests then fail loudly. They never skip.
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["PostgresServer", "PostgresUnavailable", "find_binaries", "postgres_url", "server"]

DATABASE = "postgres"  # made by initdb: no createdb to wait for

# Stops the server if the process that started it disappears without running atexit
# (SIGKILL, a CI timeout): argv = parent pid, then the stop command.
_WATCHDOG = """
import os, subprocess, sys, time
parent = int(sys.argv[1])
while True:
    try:
        os.kill(parent, 0)
    except ProcessLookupError:
        break
    time.sleep(1)
subprocess.run(sys.argv[3:], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
import shutil; shutil.rmtree(sys.argv[2], ignore_errors=True)
"""


class PostgresUnavailable(RuntimeError):
    """The private PostgreSQL server cannot be found or started; the message says what to do."""


def find_binaries() -> Path:
    """The folder holding ``initdb``, ``pg_ctl`` and ``postgres``: PATH first, then Debian's layout."""
    on_path = shutil.which("initdb")
    candidates = [Path(os.path.realpath(on_path)).parent] if on_path else []

    def version(folder: str) -> tuple[int, ...]:
        digits = Path(folder).parent.name
        return tuple(int(p) for p in digits.split(".") if p.isdigit()) or (0,)

    candidates += [Path(p) for p in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=version, reverse=True)]
    for folder in candidates:
        if all((folder / name).is_file() for name in ("initdb", "pg_ctl", "postgres")):
            return folder
    raise PostgresUnavailable(
        "the PostgreSQL server binaries (initdb, pg_ctl, postgres) are not on PATH nor under "
        "/usr/lib/postgresql/*/bin, so the PostgreSQL store tests cannot run. Install the server "
        "(Debian/Ubuntu: apt-get install -y postgresql; macOS: brew install postgresql) or put "
        "its bin folder on PATH."
    )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PostgresServer:
    """One throwaway PostgreSQL cluster in a temporary folder, listening on 127.0.0.1."""

    def __init__(self, *, fsync: bool = False, settings: Mapping[str, str] | None = None, next_oid: int | None = None) -> None:
        # fsync=False for tests (a crash of the test machine loses nothing worth keeping);
        # the benchmarks keep the server's real durability. ``settings``: server settings of
        # this cluster's own (a small max_connections, say), over the defaults below.
        # ``next_oid``: the first OID its objects get (pg_resetwal -o), as on a long-lived cluster.
        self.fsync = fsync
        self.settings = dict(settings or {})
        self.next_oid = next_oid
        self.bin = find_binaries()
        self.root = Path(tempfile.mkdtemp(prefix="nb-durable-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.port = 0
        self._options = ""
        self._as_user: list[str] = []
        self._watchdog: subprocess.Popen[bytes] | None = None
        self._admin: Any = None
        self._lock = threading.Lock()

    def _run(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*self._as_user, *args], capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, check=False
        )

    def start(self) -> PostgresServer:
        """initdb, then pg_ctl start on a free port (three tries: a port can be taken meanwhile)."""
        if os.geteuid() == 0:
            # initdb refuses to run as root: the cluster belongs to the postgres user.
            if shutil.which("runuser") is None:
                raise PostgresUnavailable("running as root, but runuser (util-linux) is missing to start PostgreSQL as postgres")
            try:
                shutil.chown(self.root, user="postgres", group=None)
            except (LookupError, OSError) as e:
                raise PostgresUnavailable(
                    f"running as root, but the temporary folder cannot be given to a 'postgres' user ({e}). "
                    "Install the server with apt-get install -y postgresql (it creates that user), or run "
                    "the tests as an ordinary user."
                ) from e
            self._as_user = ["runuser", "-u", "postgres", "--"]
        init = self._run(str(self.bin / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync")
        if init.returncode != 0:
            raise PostgresUnavailable(f"initdb failed in {self.data}:\n{init.stdout}\n{init.stderr}")
        if self.next_oid is not None:
            reset = self._run(str(self.bin / "pg_resetwal"), "-o", str(self.next_oid), "-D", str(self.data))
            if reset.returncode != 0:
                raise PostgresUnavailable(f"pg_resetwal -o {self.next_oid} failed in {self.data}:\n{reset.stdout}\n{reset.stderr}")
        settings = {
            "listen_addresses": "127.0.0.1",
            "unix_socket_directories": str(self.root),
            "max_connections": "200",
            "fsync": "on" if self.fsync else "off",
            "full_page_writes": "on" if self.fsync else "off",
            **self.settings,
        }
        self._options = " ".join(f"-c {k}={v}" for k, v in settings.items())
        last = ""
        for _ in range(3):
            self.port = _free_port()
            started = self._pg_ctl_start()
            if started.returncode == 0:
                break
            last = started.stdout + started.stderr + self._log_tail()
        else:
            raise PostgresUnavailable(f"pg_ctl could not start PostgreSQL from {self.data}:\n{last}")
        self._watchdog = subprocess.Popen(
            [sys.executable, "-c", _WATCHDOG, str(os.getpid()), str(self.root), *self._stop_command()],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        return self

    def _pg_ctl_start(self) -> subprocess.CompletedProcess[str]:
        options = f"{self._options} -p {self.port}"
        return self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-w", "-t", "60", "-l", str(self.log), "-o", options, "start")

    def down(self) -> None:
        """Stop the server as an administrator would (every session ends), keeping its data for ``up()``."""
        self._close_admin()
        stopped = self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr + self._log_tail()

    def up(self) -> None:
        """Start the server ``down()`` stopped, on the same port."""
        started = self._pg_ctl_start()
        assert started.returncode == 0, started.stdout + started.stderr + self._log_tail()

    def _close_admin(self) -> None:
        if self._admin is not None:
            with contextlib.suppress(Exception):
                self._admin.close()
            self._admin = None

    def _stop_command(self) -> list[str]:
        return [*self._as_user, str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop"]

    def _log_tail(self) -> str:
        try:
            return "\n" + self.log.read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    def url(self, database: str = DATABASE, **params: str) -> str:
        """A URL for this server (user postgres, no password: the cluster trusts 127.0.0.1)."""
        query = "&".join(f"{k}={v}" for k, v in params.items())
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}" + (f"?{query}" if query else "")

    def admin(self) -> Any:
        """A superuser connection to the test database (autocommit)."""
        import psycopg

        if self._admin is None or self._admin.closed:
            self._admin = psycopg.connect(self.url(), autocommit=True)
        return self._admin

    def fresh_schema(self) -> str:
        """A URL whose tables live in a new empty schema (``search_path`` in the URL's options)."""
        name = f"t_{uuid.uuid4().hex[:16]}"
        with self._lock:
            self.admin().execute(f"CREATE SCHEMA {name}")
        return self.url(options=f"-csearch_path%3D{name}")

    def fresh_database(self) -> str:
        """A URL naming a new empty database (for what a schema cannot show)."""
        name = f"d_{uuid.uuid4().hex[:16]}"
        with self._lock:
            self.admin().execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def ask_password_of(self, role: str) -> None:
        """Make the server ask ``role`` for its password (scram-sha-256) on 127.0.0.1, where it
        trusts every other role."""
        self._hba_first(role, "scram-sha-256")

    def reject(self, role: str) -> None:
        """Make the server's pg_hba.conf reject ``role`` on 127.0.0.1, where it trusts every other role."""
        self._hba_first(role, "reject")

    def _hba_first(self, role: str, method: str) -> None:
        """A pg_hba.conf line for ``role`` on 127.0.0.1 ahead of initdb's trust lines, then a
        reload, waited for until the server no longer trusts the role."""
        import psycopg

        hba = self.data / "pg_hba.conf"
        with self._lock:
            hba.write_text(f"host all {role} 127.0.0.1/32 {method}\n" + hba.read_text())
            assert self.admin().execute("SELECT pg_reload_conf()").fetchone() == (True,)
        deadline = time.monotonic() + 30
        while True:  # the postmaster rereads the file a moment after the signal: until then it trusts the role
            try:
                psycopg.connect(self.url().replace("postgres@", f"{role}:not-its-password@"), connect_timeout=5).close()
            except psycopg.OperationalError:
                return
            assert time.monotonic() < deadline, f"the server still trusts {role} 30 s after its pg_hba.conf said {method}"
            time.sleep(0.05)

    def stop(self) -> None:
        """Stop the server at once and delete its folder."""
        self._close_admin()
        self._run(*self._stop_command()[len(self._as_user) :], timeout=60)
        if self._watchdog is not None:
            self._watchdog.kill()
            self._watchdog.wait()
            self._watchdog = None
        shutil.rmtree(self.root, ignore_errors=True)


class _Session:
    """The one server of this process, or why it could not start."""

    server: PostgresServer | None = None
    failed: PostgresUnavailable | None = None
    lock = threading.Lock()


def server() -> PostgresServer:
    """The session's server, started on first use and stopped when the process exits."""
    markers = sys.modules.get("tests.markers")  # in a test session (a benchmark has no markers)
    if markers is not None:
        markers.require("postgres", "the private PostgreSQL server")
    with _Session.lock:
        if _Session.failed is not None:
            raise PostgresUnavailable(str(_Session.failed))
        if _Session.server is None:
            try:
                _Session.server = PostgresServer().start()
            except PostgresUnavailable as e:
                _Session.failed = e
                raise
            atexit.register(_Session.server.stop)
        return _Session.server


def postgres_url() -> str:
    """A URL naming a fresh, empty PostgreSQL store on the session's private server."""
    return server().fresh_schema()
