"""The real parts for browser tests: a ``jupyter lab`` server, Debian's chromium through
Playwright, and a collector of the browser's console errors.

Everything follows shared/STACK.md ("JupyterLab in headless Chromium"):

* ``jupyter lab`` on 127.0.0.1 with a token, ``--allow-root``, ``--ServerApp.port_retries=0``
  and its config, data, runtime, settings and workspaces dirs in a temporary folder; the news
  toast is off and ``windowingMode`` is ``"none"`` (Lab 4 virtualises cells otherwise); the
  theme comes from ``themes.jupyterlab-settings``. The server gets this checkout on
  ``PYTHONPATH`` and, for the kernels it starts, the loopback Messages API in
  ``ANTHROPIC_BASE_URL``.
* Chromium is ``/usr/bin/chromium`` (``playwright install`` cannot download here). If it is
  missing or does not start, the tests FAIL with the command that fixes it; they never skip.
* A page is 1280x900; every console error and uncaught page error is collected, and a test
  fails on any that is not on the commented allow-list below.

The helpers (``LabServer``, ``NotebookPage``, ``launch_chromium``) are plain classes so that
``benchmarks/bench_browser.py`` drives the browser the same way.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import subprocess_env
from tests.fakes import (
    MessagesAPIServer,
    RecordedRequest,
    Scenario,
    ScenarioExhausted,
    ScriptedScenario,
    turn_stats,
)

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--disable-quic",
]
INSTALL_HINT = (
    "The browser tests need Debian's chromium and the playwright package: run "
    "`apt-get update && apt-get install -y chromium` and `pip install playwright` "
    "(never `playwright install`: it downloads a browser build and there is no network for that)."
)
VIEWPORT = {"width": 1280, "height": 900}
LIGHT = "JupyterLab Light"
DARK = "JupyterLab Dark"

# Console messages that are not ours. Each entry: a regex on the message as ConsoleErrors records
# it, and why it is noise. Anything else a page logs as an error fails the test, so an error of
# the widget or of nb_durable cannot hide.
CONSOLE_ALLOW = [
    # Notebook 7.6's shortcuts plugin reads `plugins[id].schema` for every settings change, also
    # for plugins Notebook 7 does not load; it throws on every /notebooks/ page, even for a
    # notebook holding only `1+1` and with no user settings at all.
    (
        re.compile(r"^uncaught: Cannot read properties of undefined \(reading 'schema'\) @ "
                   r"http://127\.0\.0\.1:\d+/static/notebook/notebook_core\.[0-9a-f]+\.js"),
        "Notebook 7's own shortcuts plugin",
    ),
    # Notebook 7.6's file browser, restoring itself on a /notebooks/ page, runs the command
    # `filebrowser:open-path` for the routed file, and that page does not register it (seen on
    # some loads, not all, also without any query string in the URL).
    (
        re.compile(r"^uncaught: Command 'filebrowser:open-path' not registered\. @ "
                   r"http://127\.0\.0\.1:\d+/static/notebook/notebook_core\.[0-9a-f]+\.js"),
        "Notebook 7's own file browser",
    ),
]


# ---------------------------------------------------------------------------------------------
# The loopback Messages API, shared by every kernel of every Lab server in the session


class ByModel(Scenario):
    """One script per model name, with attempts counted per model and turn, so that tests
    sharing one server (the Lab server knows one ``ANTHROPIC_BASE_URL``) never mix."""

    def __init__(self) -> None:
        self.scripts: dict[str, ScriptedScenario] = {}
        self.attempts: dict[tuple[str, int], int] = {}

    def action(self, request: RecordedRequest) -> Any:
        model = str(request.body.get("model")) if isinstance(request.body, dict) else ""
        if model not in self.scripts:
            raise ScenarioExhausted(f"no script for model {model!r}")
        key = (model, request.turn or 0)
        self.attempts[key] = self.attempts.get(key, 0) + 1
        return self.scripts[model].action(dataclasses.replace(request, attempt=self.attempts[key]))


@dataclass
class Script:
    """A test's view of the shared server: its own script, its own requests."""

    server: MessagesAPIServer
    model: str

    def requests(self) -> list[RecordedRequest]:
        return [r for r in self.server.requests if isinstance(r.body, dict) and r.body.get("model") == self.model]

    def requests_at(self, turn: int) -> list[RecordedRequest]:
        return [r for r in self.requests() if r.turn == turn]

    def assert_no_repeats(self) -> None:
        """No completed turn was asked again, and no request was refused as malformed."""
        records = self.requests()
        stats = turn_stats(records)
        assert all(s.repeats == 0 for s in stats.values()), stats
        assert not [r for r in records if r.rejected], [r.error_message for r in records if r.rejected]


# ---------------------------------------------------------------------------------------------
# The server


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


# ---------------------------------------------------------------------------------------------
# The browser


def launch_chromium(playwright: Any) -> Any:
    """Debian's chromium, headless, with the flags from STACK.md; a loud error if it cannot start."""
    if not Path(CHROMIUM).exists():
        raise RuntimeError(f"{CHROMIUM} does not exist. {INSTALL_HINT}")
    try:
        return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS, headless=True)
    except Exception as e:
        raise RuntimeError(f"{CHROMIUM} did not start ({type(e).__name__}: {e}). {INSTALL_HINT}") from e


@dataclass
class ConsoleErrors:
    """Every console error and uncaught exception of the pages it watches.

    Uncaught exceptions are recorded as ``uncaught: <message> @ <script of the top frame>``, so
    the allow-list can name where noise comes from, not only what it says.
    """

    seen: list[str] = field(default_factory=list)

    def watch(self, page: Any) -> None:
        page.on("console", lambda msg: self.seen.append(msg.text) if msg.type == "error" else None)
        page.on("pageerror", lambda exc: self.seen.append(f"uncaught: {exc.message} @ {_top_frame(exc.stack or '')}"))

    def unexpected(self) -> list[str]:
        """The errors not on the allow-list."""
        return [text for text in self.seen if not any(rx.search(text) for rx, _ in CONSOLE_ALLOW)]

    def assert_clean(self) -> None:
        bad = self.unexpected()
        assert not bad, "the browser logged errors:\n" + "\n".join(bad)


def _top_frame(stack: str) -> str:
    for line in stack.splitlines():
        found = re.search(r"(https?://[^\s)]+?)(?::\d+){1,2}\)?$", line.strip())
        if line.strip().startswith("at ") and found:
            return found.group(1)
    return "?"


KERNEL_READY = """() => {
  const indicator = document.querySelector('.jp-Notebook-ExecutionIndicator');
  const name = document.querySelector('.jp-Toolbar-kernelName');
  return !!indicator && indicator.getAttribute('data-status') === 'idle'
      && !!name && name.textContent.trim() !== '' && !/No Kernel/.test(name.textContent);
}"""


# Marks the cell with data-nbd-ran="1" once its prompt shows [*] (or a new number) after this.
WATCH_PROMPT = """(cell) => {
  const prompt = cell.querySelector('.jp-InputPrompt');
  const before = prompt.textContent.trim();
  cell.dataset.nbdRan = '0';
  const look = () => {
    const now = prompt.textContent.trim();
    if (now === '[*]:' || (now !== before && /^\\[\\d+\\]:$/.test(now))) cell.dataset.nbdRan = '1';
  };
  if (cell.nbdObserver) cell.nbdObserver.disconnect();
  cell.nbdObserver = new MutationObserver(look);
  cell.nbdObserver.observe(prompt, {subtree: true, childList: true, characterData: true});
}"""


class NotebookPage:
    """One notebook open in a browser page, in Lab (``/lab/tree/``) or Notebook 7 (``/notebooks/``)."""

    def __init__(self, page: Any, lab: LabServer, path: str, *, app: str = "lab") -> None:
        self.page = page
        self.lab = lab
        self.path = path
        # Log in once (the server sets its cookie), then open pages with clean URLs, as a user
        # would have them. ?reset: Lab forgets the tabs and layout it kept for this workspace,
        # so only this notebook opens.
        page.goto(f"{lab.url}/api/status?token={lab.token}")
        where = f"/lab/tree/{path}?reset" if app == "lab" else f"/notebooks/{path}"
        page.goto(lab.url + where, wait_until="domcontentloaded")
        self.notebook = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook").first
        self.notebook.locator(".jp-Cell").first.wait_for(timeout=60_000)
        self.wait_kernel_ready()

    def wait_kernel_ready(self, timeout: float = 60) -> None:
        """Wait until the kernel is idle and named (clicking Run earlier opens Select Kernel)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.accept_dialog()
            if self.page.evaluate(KERNEL_READY):
                return
            self.page.wait_for_timeout(100)
        raise TimeoutError(f"the kernel of {self.path} never became ready")

    def accept_dialog(self) -> bool:
        """Accept a dialog ("Kernel Restarting", "Restart Kernel?") if one shows."""
        button = self.page.locator(".jp-Dialog .jp-mod-accept")
        if button.count():
            title = self.page.locator(".jp-Dialog-header").first.inner_text()
            print(f"accepting the dialog {title!r}")
            button.first.click()
            self.page.locator(".jp-Dialog").wait_for(state="detached", timeout=10_000)
            return True
        return False

    def hide_left_sidebar(self) -> None:
        """Collapse the file browser (Lab keeps the layout per workspace, so it may be closed already)."""
        tab = self.page.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab.lm-mod-current")
        if tab.count():
            tab.first.click()

    def cell(self, index: int) -> Any:
        return self.notebook.locator(".jp-Cell").nth(index)

    def output(self, index: int) -> Any:
        return self.cell(index).locator(".jp-OutputArea")

    def run_cell(self, index: int) -> None:
        """Click into cell ``index`` and run it with Ctrl+Enter, as a person would.

        Lab marks a cell ``[*]`` the moment it sends the request; if that never shows, the key
        press went elsewhere (a dialog took the focus), so it is pressed once more.
        """
        for _attempt in range(2):
            self.wait_kernel_ready()
            cell = self.cell(index)
            cell.evaluate(WATCH_PROMPT)
            cell.locator(".jp-InputArea-editor").click()
            self.page.keyboard.press("Control+Enter")
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                if cell.evaluate("c => c.dataset.nbdRan") == "1":
                    return
                self.page.wait_for_timeout(50)
            self.accept_dialog()
        raise TimeoutError(f"cell {index} of {self.path} never started running")

    def wait_cell_done(self, index: int, timeout: float = 60) -> None:
        """Wait until the cell, once started, has its execution count (its execute_reply came)
        and the kernel is idle."""
        cell = self.cell(index)
        prompt = cell.locator(".jp-InputPrompt")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = prompt.inner_text().strip()
            started = cell.evaluate("c => c.dataset.nbdRan") == "1"
            if started and re.fullmatch(r"\[\d+\]:", text) and self.page.evaluate(KERNEL_READY):
                return
            self.page.wait_for_timeout(100)
        raise TimeoutError(f"cell {index} of {self.path} did not finish in {timeout}s (prompt {prompt.inner_text()!r})")

    def run_and_wait(self, index: int, timeout: float = 60) -> None:
        self.run_cell(index)
        self.wait_cell_done(index, timeout)

    def steps(self, index: int, state: str | None = None) -> Any:
        selector = ".nbd-timeline .nbd-step" + (f".nbd-{state}" if state else "")
        return self.output(index).locator(selector)

    def wait_for(self, condition: Callable[[], bool], what: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if condition():
                return
            self.page.wait_for_timeout(100)
        raise TimeoutError(f"waited {timeout}s for {what}")

    def save(self) -> None:
        self.page.keyboard.press("Control+s")
        self.page.wait_for_timeout(500)
        self.accept_dialog()


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


# ---------------------------------------------------------------------------------------------
# Fixtures


@pytest.fixture(scope="session")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the tests put their screenshots: $NB_DURABLE_SCREENSHOTS, or a folder in pytest's
    temporary dir (pytest keeps the last three); the path is printed at the end of the session."""
    chosen = os.environ.get("NB_DURABLE_SCREENSHOTS")
    folder = Path(chosen) if chosen else tmp_path_factory.getbasetemp() / "e2e-screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    _SCREENSHOT_DIRS.append(folder)
    print(f"\nscreenshots: {folder}")
    return folder


_SCREENSHOT_DIRS: list[Path] = []


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for folder in _SCREENSHOT_DIRS:
        shots = sorted(p.name for p in folder.glob("*.png"))
        terminalreporter.write_line(f"e2e screenshots ({len(shots)}) in {folder}: {', '.join(shots)}")


@pytest.fixture(scope="session")
def api_server() -> Iterator[MessagesAPIServer]:
    """The loopback Messages API that every kernel of the Lab servers talks to."""
    with MessagesAPIServer(ByModel()) as server:
        yield server


@pytest.fixture
def script(api_server: MessagesAPIServer) -> Callable[[str, list[Any]], Script]:
    """``script(model, turns)``: answer requests for ``model`` with ``turns`` (as ScriptedScenario)."""

    def make(model: str, turns: list[Any]) -> Script:
        routes = api_server.scenario
        assert isinstance(routes, ByModel)
        assert model not in routes.scripts, f"model name {model!r} is used by two tests"
        routes.scripts[model] = ScriptedScenario(turns)
        return Script(api_server, model)

    return make


def _lab(tmp_path_factory: pytest.TempPathFactory, api_server: MessagesAPIServer, theme: str) -> Iterator[LabServer]:
    base = tmp_path_factory.mktemp("lab-dark" if theme == DARK else "lab")
    server = start_lab(base, theme=theme, ANTHROPIC_BASE_URL=api_server.url, ANTHROPIC_API_KEY="test-key")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def lab(tmp_path_factory: pytest.TempPathFactory, api_server: MessagesAPIServer) -> Iterator[LabServer]:
    """``jupyter lab`` in the light theme, its kernels pointed at the loopback Messages API."""
    yield from _lab(tmp_path_factory, api_server, LIGHT)


@pytest.fixture(scope="session")
def dark_lab(tmp_path_factory: pytest.TempPathFactory, api_server: MessagesAPIServer) -> Iterator[LabServer]:
    """The same, in the dark theme."""
    yield from _lab(tmp_path_factory, api_server, DARK)


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """Headless Debian chromium; fails (never skips) with the install command if it cannot start."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as e:
        pytest.fail(f"playwright is not installed ({e}). {INSTALL_HINT}", pytrace=False)
    manager = sync_playwright().start()
    chromium, problem = None, ""
    try:
        chromium = launch_chromium(manager)
    except RuntimeError as e:
        problem = str(e)
    try:
        if chromium is None:
            pytest.fail(problem, pytrace=False)
        yield chromium
        chromium.close()
    finally:
        manager.stop()


@pytest.fixture
def console() -> ConsoleErrors:
    return ConsoleErrors()


@pytest.fixture
def page(browser: Any, console: ConsoleErrors) -> Iterator[Any]:
    """A fresh 1280x900 page whose console errors fail the test (checked after it passes)."""
    context = browser.new_context(viewport=VIEWPORT)
    context.set_default_timeout(60_000)
    p = context.new_page()
    console.watch(p)
    yield p
    context.close()
