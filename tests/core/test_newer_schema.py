"""A log line written by a newer nb_durable is never dropped as torn: the reader says to upgrade."""

from __future__ import annotations

import sys
import zlib
from pathlib import Path

import pytest

from nb_durable import EventLog, run_step
from nb_durable.errors import NewerLogError
from tests import forkserver
from tests.conftest import subprocess_env


def newer_line(seq: int) -> bytes:
    """A valid line of log schema v2 (its checksum right), as a future nb_durable would write it."""
    raw = b'{"v":2,"seq":%d,"kind":"step_completed","ts":1764504000.123,"step":"later","result":1,"ms":0.1' % seq
    return b'%s,"crc":"%08x"}\n' % (raw, zlib.crc32(raw))


@pytest.mark.parametrize("where", ["last", "first"])
def test_a_newer_schema_line_says_upgrade_and_drops_nothing(tmp_path: Path, where: str) -> None:
    runs = tmp_path / "runs"
    with EventLog("future", str(runs)) as log:
        run_step(log, "now", lambda: "kept")
    path = runs / "future.jsonl"
    if where == "last":
        with open(path, "ab") as f:
            f.write(newer_line(2))
    else:
        path.write_bytes(newer_line(0))
    before = path.read_bytes()
    shown = forkserver.run(
        [sys.executable, "-m", "nb_durable.cli", "show", "future", "--store", str(runs)],
        check=False, capture_output=True, text=True, env=subprocess_env(), timeout=60,
    )  # fmt: skip
    assert shown.returncode == 2, shown.stdout + shown.stderr
    assert "upgrade nb_durable" in shown.stderr and "v2" in shown.stderr and "torn" not in shown.stderr
    with pytest.raises(NewerLogError):
        EventLog("future", str(runs))
    assert path.read_bytes() == before  # not truncated as a torn line
