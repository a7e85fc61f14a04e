"""Settings a kernel takes from its environment, refused or read before a run starts.

A bad value was taken and failed the run later, in words that named nothing the person set:
``NB_DURABLE_DEMO_LATENCY=inf`` started the run and stopped it at its first model call with
``OverflowError: timestamp out of range for platform time_t``. A blank ``NB_DURABLE_STORE``
(``export NB_DURABLE_STORE=" "``) was refused as "the store is empty: pass a folder", naming a
--store nobody gave; blank, as every other NB_DURABLE_* setting, it is unset.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.jupyter.kernels import Kernel

CELL = "%%agent --run {run} --max-turns 1\nThe tests in this project fail. Find out why."


@pytest.mark.kernel
def test_a_kernels_environment_is_refused_or_read_before_a_run_starts(tmp_path: Path) -> None:
    kernel = Kernel(tmp_path, NB_DURABLE_DEMO_LATENCY="inf", NB_DURABLE_STORE="  ")
    try:
        assert kernel.run("%load_ext nb_durable").status == "ok"
        refused = kernel.run(CELL.format(run="slow"))
        assert refused.status == "error"
        said = refused.text()
        assert "NB_DURABLE_DEMO_LATENCY must be a number from 0 to 1000 (the demo's pace: 1 is about a real model's, 0 no waiting), not 'inf'" in said
        assert "OverflowError" not in said and "Traceback" not in said, said
        assert not (tmp_path / "runs" / "slow.jsonl").exists(), "refused before the run started"
        assert kernel.run("import os; os.environ['NB_DURABLE_DEMO_LATENCY'] = '0'").status == "ok"
        ran = kernel.run(CELL.format(run="quick"))
        assert ran.status == "ok", ran.text()
        assert (tmp_path / "runs" / "quick.jsonl").exists(), "a blank NB_DURABLE_STORE is unset: the default store"
    finally:
        kernel.close()
