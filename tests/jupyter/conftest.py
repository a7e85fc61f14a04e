"""A real IPython shell with nb_durable loaded, working in a fresh folder, offline."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


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
