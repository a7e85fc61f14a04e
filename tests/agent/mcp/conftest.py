"""Real MCP servers for the tests: ``ledger_server.py`` over stdio, or over streamable HTTP on
loopback, and the agent on the real anthropic SDK against the loopback Messages API."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import subprocess_env

SERVER = Path(__file__).with_name("ledger_server.py")
TOKEN = "ledger-secret-7f3a9c2e41"
"""The value of the server's LEDGER_TOKEN: it must never be written to any file."""
HEADER_TOKEN = "header-secret-55d1e0b7a9"


def stdio_config(folder: Path, *, changed: bool = False, name: str = "ledger", **server: Any) -> dict[str, Any]:
    """An mcpServers config starting ``ledger_server.py`` on ``folder`` over stdio."""
    args = [str(SERVER), str(folder)] + (["--changed"] if changed else [])
    env = {"LEDGER_TOKEN": TOKEN, **server.pop("env", {})}
    return {"mcpServers": {name: {"command": sys.executable, "args": args, "env": env, **server}}}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _listens(pid: int, port: int) -> bool:
    """Whether process ``pid`` itself listens on 127.0.0.1:``port`` (/proc/net/tcp and its fds)."""
    inodes = set()
    with open("/proc/net/tcp") as table:
        for row in table.readlines()[1:]:
            fields = row.split()
            if fields[1] == f"0100007F:{port:04X}" and fields[3] == "0A":  # 127.0.0.1, LISTEN
                inodes.add(fields[9])
    try:
        links = {os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
    except OSError:
        return False
    return any(f"socket:[{inode}]" in links for inode in inodes)


class HttpLedger:
    """``ledger_server.py`` serving streamable HTTP on a loopback port, in a process of its own.

    Ready once that process itself listens on the port: a free port can be taken by another
    process between the test choosing it and the server binding it (then the server exits and
    another port is tried), and a connection to the port proves nothing about who answers.
    """

    def __init__(self, folder: Path, *, changed: bool = False) -> None:
        self.folder = folder
        for _attempt in range(3):
            self.port = _free_port()
            cmd = [sys.executable, str(SERVER), str(folder), "--http", str(self.port)] + (["--changed"] if changed else [])
            self.proc = subprocess.Popen(cmd, env=subprocess_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            deadline = time.monotonic() + 30
            while self.proc.poll() is None and time.monotonic() < deadline:
                if _listens(self.proc.pid, self.port):
                    return
                time.sleep(0.1)
            if self.proc.poll() is None:
                self.stop()
                raise TimeoutError("the HTTP ledger server did not listen")
        raise RuntimeError(f"the HTTP ledger server exited (status {self.proc.returncode}) three times: its port was taken?")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def config(self, **server: Any) -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {HEADER_TOKEN}"}
        return {"mcpServers": {"ledger": {"type": "http", "url": self.url, "headers": headers, **server}}}

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def http_ledger(tmp_path: Path) -> Iterator[Callable[..., HttpLedger]]:
    started: list[HttpLedger] = []

    def start(changed: bool = False) -> HttpLedger:
        server = HttpLedger(tmp_path / "ledger", changed=changed)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture(autouse=True)
def _no_ambient_anthropic(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


def lines(path: Path) -> list[str]:
    """A file's lines ([] if it does not exist)."""
    return path.read_text().splitlines() if path.exists() else []


def alive(pid: int) -> bool:
    """Whether a process exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def files_containing(root: Path, secret: str) -> list[Path]:
    """Every file under ``root`` whose bytes contain ``secret``."""
    return [p for p in root.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]
