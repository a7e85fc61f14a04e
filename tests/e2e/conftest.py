"""Fixtures for the browser tests: the shared loopback Messages API, one ``jupyter lab`` server
(its theme light, or dark for a test that asks), pages whose console errors are collected, and
a folder for screenshots.

Everything follows shared/STACK.md ("JupyterLab in headless Chromium"). The real parts are
plain classes in their own modules, so that ``benchmarks/bench_browser.py`` drives the browser
the same way: ``lab`` (``start_lab``, ``LabServer``, ``write_notebook``), ``browser``
(``launch_chromium``, ``ConsoleErrors`` and its allow-list), ``notebook_page``
(``NotebookPage``) and ``shared_api`` (``ByModel``, ``Script``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.browser import VIEWPORT, ConsoleErrors
from tests.e2e.lab import DARK, LIGHT, LabServer, start_lab
from tests.e2e.shared_api import ByModel, Script
from tests.fakes import MessagesAPIServer, ScriptedScenario


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


@pytest.fixture(scope="session")
def lab(tmp_path_factory: pytest.TempPathFactory, api_server: MessagesAPIServer) -> Iterator[LabServer]:
    """The one Jupyter server of the browser tests (JupyterLab and Notebook 7), in the light
    theme, its kernels pointed at the loopback Messages API."""
    server = start_lab(
        tmp_path_factory.mktemp("lab"), theme=LIGHT, ANTHROPIC_BASE_URL=api_server.url, ANTHROPIC_API_KEY="test-key"
    )
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def dark_lab(lab: LabServer) -> Iterator[LabServer]:
    """The same server in the dark theme, for one test: a user setting, as a person changes it
    (the browser tests run one at a time, on one worker)."""
    lab.set_theme(DARK)
    try:
        yield lab
    finally:
        lab.set_theme(LIGHT)


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
