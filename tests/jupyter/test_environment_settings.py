"""Settings a kernel takes from its environment, refused or read before a run starts.

A blank ``NB_DURABLE_STORE`` (``export NB_DURABLE_STORE=" "``) was refused as "the store is
empty: pass a folder", naming a --store nobody gave; blank, as every other NB_DURABLE_*
setting, it is unset.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.jupyter.kernels import Kernel

CELL = "%%agent --run {run} --max-turns 1\nThe tests in this project fail. Find out why."


@pytest.mark.kernel
def test_a_kernels_environment_is_refused_or_read_before_a_run_starts(tmp_path: Path) -> None:
    kernel = Kernel(tmp_path, NB_DURABLE_DEMO_LATENCY="0", NB_DURABLE_STORE="  ")
    try:
        assert kernel.run("%load_ext nb_durable").status == "ok"
        ran = kernel.run(CELL.format(run="quick"))
        assert ran.status == "ok", ran.text()
        assert (tmp_path / "runs" / "quick.jsonl").exists(), "a blank NB_DURABLE_STORE is unset: the default store"
    finally:
        kernel.close()
