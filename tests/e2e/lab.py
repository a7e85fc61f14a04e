"""A real ``jupyter lab`` server for browser tests, and the files it serves.

As shared/STACK.md ("JupyterLab in headless Chromium") has it: ``jupyter lab`` on 127.0.0.1
with a token, ``--allow-root``, ``--ServerApp.port_retries=0`` and its config, data, runtime,
settings and workspaces dirs in a temporary folder; the news toast is off and
``windowingMode`` is ``"none"`` (Lab 4 virtualises cells otherwise); the theme comes from
``themes.jupyterlab-settings`` (``set_theme`` changes it for the pages opened next). One server
serves JupyterLab and Notebook 7 alike. The server gets this checkout on ``PYTHONPATH`` and, for the
kernels it starts, the loopback Messages API in ``ANTHROPIC_BASE_URL``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.conftest import subprocess_env

LIGHT = "JupyterLab Light"
DARK = "JupyterLab Dark"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_settings(settings_dir: Path, theme: str) -> None:
    """Lab user settings: no news toast, no cell virtualisation, the given theme."""
    files = {
        "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false", "checkForUpdates": False},
        "@jupyterlab/apputils-extension/themes.jupyterlab-settings": {"theme": theme},
        "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    }
    for name, value in files.items():
        path = settings_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value), encoding="utf-8")


@dataclass
class LabServer:
    """A running ``jupyter lab`` on 127.0.0.1, serving ``root``."""

    root: Path
    port: int
    token: str
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def api(self, method: str, path: str, body: Any = None, timeout: float = 10) -> Any:
        """A REST call with the token; the decoded JSON answer (None when empty)."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.url + path, data=data, method=method,
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            raw = answer.read()
        return json.loads(raw) if raw else None

    def set_theme(self, theme: str) -> None:
        """Make ``theme`` the user's theme, as Settings > Theme does: pages opened from now on
        (Lab and Notebook 7, which read the same settings) show it."""
        write_settings(self.root.parent / "settings", theme)
        themes = self.api("GET", "/lab/api/settings/@jupyterlab/apputils-extension:themes")
        assert themes["settings"].get("theme") == theme, f"the server still serves the theme {themes['settings']}"

    def kernel_id(self, notebook: str) -> str:
        """The id of the kernel of the session that has ``notebook`` (a path under root) open."""
        for session in self.api("GET", "/api/sessions"):
            if session["path"] == notebook and session.get("kernel"):
                return str(session["kernel"]["id"])
        raise AssertionError(f"no session for {notebook}: {self.api('GET', '/api/sessions')}")

    def kernel_pid(self, kernel_id: str) -> int:
        """The pid of a kernel, found in /proc by its connection file (kernel-<id>.json)."""
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if any(arg.endswith(f"kernel-{kernel_id}.json".encode()) for arg in argv) and b"ipykernel_launcher" in argv:
                return int(entry.name)
        raise AssertionError(f"no process for kernel {kernel_id}")

    def kill_kernel(self, notebook: str) -> int:
        """SIGKILL the notebook's kernel process, as a crash would; returns the dead pid."""
        pid = self.kernel_pid(self.kernel_id(notebook))
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while not _gone(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        return pid

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)

    def tail(self, chars: int = 4000) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")[-chars:]


def _gone(pid: int) -> bool:
    """True once the process has exited (reaped, or a zombie its parent has not reaped yet)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def start_lab(base: Path, *, theme: str = LIGHT, **env: str) -> LabServer:
    """Start ``jupyter lab`` serving ``base/root`` with isolated dirs under ``base``; wait for it."""
    root = base / "root"
    for name in ("root", "config", "data", "runtime", "settings", "workspaces"):
        (base / name).mkdir(parents=True, exist_ok=True)
    write_settings(base / "settings", theme)
    environment = subprocess_env(
        JUPYTER_CONFIG_DIR=str(base / "config"),
        JUPYTER_DATA_DIR=str(base / "data"),
        JUPYTER_RUNTIME_DIR=str(base / "runtime"),
        JUPYTERLAB_SETTINGS_DIR=str(base / "settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(base / "workspaces"),
        **env,
    )
    token = os.urandom(16).hex()
    log = base / "lab.log"
    for _attempt in range(3):
        port = free_port()
        with open(log, "ab") as out:
            process = subprocess.Popen(
                [
                    sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", "--ip=127.0.0.1",
                    f"--port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
                    f"--ServerApp.root_dir={root}",
                ],
                env=environment, stdout=out, stderr=subprocess.STDOUT, cwd=root,
            )
        server = LabServer(root, port, token, process, log)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and process.poll() is None:
            with contextlib.suppress(OSError, urllib.error.URLError):
                server.api("GET", "/api/status", timeout=2)
                return server
            time.sleep(0.2)
        server.stop()
        if "address already in use" not in server.tail().lower():
            break
    raise RuntimeError(f"jupyter lab did not start; its log ends with:\n{server.tail()}")


def write_notebook(path: Path, cells: list[str]) -> None:
    """A notebook (nbformat 4.5) of code cells with the python3 kernelspec, so Lab starts it without asking.

    Plain JSON: importing nbformat costs seconds on a loaded machine, for nothing a test needs.
    """
    notebook = {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {
            "kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"},
            "language_info": {"name": "python"},
        },
        "cells": [
            {"cell_type": "code", "id": f"cell-{i}", "metadata": {}, "execution_count": None, "outputs": [], "source": source}
            for i, source in enumerate(cells)
        ],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(notebook, indent=1), encoding="utf-8")
