"""Fixtures shared by every test (isolated folders, one store of each kind), and the hooks that
mark, group and order the tests for the xdist workers (the rules are in ``tests/markers.py``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

STORE_KINDS = ["memory", "jsonl", "sqlite", "postgres"]

# The suite starts well over a thousand Python processes (xdist workers, kernels, the CLI, MCP
# servers, crash-test children) that import the package from this checkout. Where bytecode
# writing is off (some CI images set PYTHONDONTWRITEBYTECODE), each of them compiles every
# module it imports again: measured on the 2-core machine, the whole suite took 8m57 and 15.0
# min of CPU with it off, 7m39 and 12.3 with it on. So this session's processes get Python's
# default back; the caches go to the __pycache__ folders .gitignore names.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False


def pytest_configure(config: pytest.Config) -> None:
    from tests.markers import MARKERS

    for name, meaning in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {meaning}")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    from tests.markers import mark_and_group, write_groups

    mark_and_group(items)
    write_groups(config, items)


_GROUPS = pytest.StashKey[Path]()


def _groups_path(config: pytest.Config) -> Path:
    """The controller's file for the workers' groups (tests/markers.py), made once a session."""
    if _GROUPS not in config.stash:
        folder = Path(tempfile.mkdtemp(prefix="nb-durable-groups-"))
        config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))
        config.stash[_GROUPS] = folder / "groups.json"
    return config.stash[_GROUPS]


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    node.workerinput["nb_durable_groups"] = str(_groups_path(node.config))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") != "loadgroup":
        return None
    from tests.markers import scheduler

    return scheduler(config, log, _groups_path(config))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    from tests.markers import running

    with running(item):
        return (yield)


def make_store_url(kind: str, tmp_path: Path) -> str:
    """A fresh, empty store of the given kind, as a user would name it."""
    if kind == "memory":
        return f"memory://test-{uuid.uuid4().hex}"
    if kind == "jsonl":
        return str(tmp_path / "runs")
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / 'runs.db'}"
    if kind == "postgres":
        from tests.pg import postgres_url

        return postgres_url()
    raise ValueError(kind)


@pytest.fixture(params=STORE_KINDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Each test using this runs once per store kind."""
    return make_store_url(request.param, tmp_path)


@pytest.fixture(autouse=True)
def _no_ambient_store(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("NB_DURABLE_STORE", raising=False)
    yield


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run the test with the working directory in a fresh temporary folder."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


REPO = Path(__file__).resolve().parent.parent


def subprocess_env(**extra: str) -> dict[str, str]:
    """The environment for child Python processes: this checkout importable, no API keys, and no
    terminal size of the test runner's (pytest-xdist exports COLUMNS=80): a child's output is a
    pipe, as a user's redirected output is, unless a test gives COLUMNS itself."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_") and k not in ("COLUMNS", "LINES")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.update(extra)
    return env


NOBODY = 65534
"""The uid and gid of Debian's 'nobody', whom file modes stop as they stop any user but root."""


def as_nobody(fn: Any) -> Any:
    """``fn()``'s JSON result, run by 'nobody' in a forked child if this is root (whom no file
    or folder mode stops), else here."""
    if os.geteuid() != 0:
        return json.loads(json.dumps(fn()))
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.close(read)
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            os.write(write, json.dumps(fn()).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as f:
        said = f.read()
    os.waitpid(pid, 0)
    return json.loads(said)


def nb_durable_cli(*args: str, cwd: Path | None = None, timeout: float = 120, **env: str) -> subprocess.CompletedProcess[str]:
    """``python -m nb_durable.cli ARGS`` as a forked child (``tests/forkserver.py``), in ``cwd``,
    with ``subprocess_env(**env)``: its exit code and what it printed, never raising for either."""
    from tests import forkserver

    return forkserver.run(
        [sys.executable, "-m", "nb_durable.cli", *args], cwd=cwd, env=subprocess_env(**env), capture_output=True,
        text=True, timeout=timeout, check=False,
    )  # fmt: skip


# One browser for the whole session: Playwright's sync API keeps its event loop running
# while a browser is open, so a second sync_playwright() in the same process would fail.
@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """Headless Debian chromium; fails (never skips) with the install command if it cannot start."""
    from tests.e2e.browser import INSTALL_HINT, launch_chromium

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
