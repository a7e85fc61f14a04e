"""A real IPython shell with nb_durable loaded, working in a fresh folder, offline; and real
kernels (``kernels()`` starts one with nb_durable loaded) against a loopback Messages API."""

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
    shell.run_line_magic("load_ext", "nb_durable")
    yield shell
    shell.run_line_magic("unload_ext", "nb_durable")
    shell.user_ns.pop("res", None)


@pytest.fixture
def server() -> Iterator[MessagesAPIServer]:
    with MessagesAPIServer(ScriptedScenario([reply("unused")])) as s:
        yield s


@pytest.fixture
def kernels(tmp_path: Path, server: MessagesAPIServer) -> Iterator[Callable[[], Kernel]]:
    started: list[Kernel] = []

    def start() -> Kernel:
        kernel = Kernel(tmp_path, ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="test-key")
        started.append(kernel)
        assert kernel.run("%load_ext nb_durable").status == "ok"
        return kernel

    yield start
    for kernel in started:
        with contextlib.suppress(Exception):
            kernel.close()
