"""A real IPython shell with nb_durable loaded, working in a fresh folder, offline; and real
kernels (``kernels()``: the module's shared kernel, reset, then fresh ones) against a loopback
Messages API."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes import MessagesAPIServer, ScriptedScenario, reply
from tests.jupyter.kernels import Kernel


@pytest.fixture
def ip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    from IPython.testing.globalipapp import get_ipython

    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NB_DURABLE_DEMO_LATENCY", "0")
    monkeypatch.chdir(tmp_path)
    shell = get_ipython()
    # The shell is the process's: what an earlier test's %config set would stay set (and count as
    # the person's choice, which a resume or a button takes) for every later one.
    shell.config.pop("AgentMagics", None)
    shell.run_line_magic("load_ext", "nb_durable")
    yield shell
    shell.run_line_magic("unload_ext", "nb_durable")
    shell.user_ns.pop("res", None)


@pytest.fixture
def server() -> Iterator[MessagesAPIServer]:
    with MessagesAPIServer(ScriptedScenario([reply("unused")])) as s:
        yield s


def _close(kernel: Kernel) -> None:
    with contextlib.suppress(Exception):
        kernel.close()


@pytest.fixture(scope="module")
def module_kernel() -> Iterator[list[Kernel]]:
    """The kernel the tests of a module share (``kernels``' first), once one has started."""
    held: list[Kernel] = []
    yield held
    for kernel in held:
        _close(kernel)


@pytest.fixture
def kernels(tmp_path: Path, server: MessagesAPIServer, module_kernel: list[Kernel]) -> Iterator[Callable[[], Kernel]]:
    """``kernels()``: a kernel with nb_durable loaded, working in ``tmp_path``, its Messages API
    ``server``. The first of a test is the module's kernel, reset (``in_kernel.reset``: no
    background run, widget, variable, setting or environment change of an earlier test is
    left); a test that kills or shuts it down leaves the next test a new one. Every further
    call starts a fresh kernel, closed when the test ends."""
    api = {"ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": "test-key"}
    started: list[Kernel] = []

    def fresh() -> Kernel:
        kernel = Kernel(tmp_path, **api)
        assert kernel.run("import tests.jupyter.in_kernel").status == "ok"  # its START_ENV, first
        assert kernel.run("%load_ext nb_durable").status == "ok"
        return kernel

    def shared() -> Kernel:
        if module_kernel and module_kernel[0].alive():
            try:
                module_kernel[0].reset(tmp_path, **api)
                return module_kernel[0]
            except (RuntimeError, TimeoutError):
                pass  # not reusable: a fresh one takes its place
        for kernel in module_kernel:
            _close(kernel)
        module_kernel[:] = [fresh()]
        return module_kernel[0]

    def start() -> Kernel:
        if not started:
            started.append(shared())
            return started[0]
        kernel = fresh()
        started.append(kernel)
        return kernel

    yield start
    for kernel in started[1:]:
        _close(kernel)
