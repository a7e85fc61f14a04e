"""The JSONL store's sidecar index against what people and other processes do to a runs folder."""

from __future__ import annotations

import os
import shutil
import warnings
from pathlib import Path

from nb_durable import EventLog, list_runs, run_step
from nb_durable.core.stores.jsonl_index import SIDECAR


def _runs(root: Path, count: int) -> None:
    for i in range(count):
        with EventLog(f"r{i}", root) as log:
            log.start_run({"task": "t"})
            run_step(log, "s", lambda i=i: i)  # type: ignore[misc]
            log.finish_run("completed")


def _sidecar_key(root: Path) -> tuple[int, int, int]:
    st = os.stat(root / SIDECAR)
    return st.st_ino, st.st_size, st.st_mtime_ns


def test_a_log_no_row_comes_from_leaves_the_sidecar_unwritten_listing_after_listing(tmp_path: Path) -> None:
    # Each listing rewrote the whole sidecar while one damaged or empty log sat in the folder:
    # at 100,000 runs that is every `runs` and every JSONL worker poll rewriting all the rows.
    root = tmp_path / "runs"
    _runs(root, 3)
    shutil.copy(root / "r1.jsonl", root / "copied.jsonl")  # records run r1: no row of its own
    (root / "empty.jsonl").touch()
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        assert sorted(s.run_id for s in list_runs(root)) == ["r0", "r1", "r2"]
        written = _sidecar_key(root)
        assert sorted(s.run_id for s in list_runs(root)) == ["r0", "r1", "r2"]
    assert _sidecar_key(root) == written
    assert sum("copied.jsonl" in str(w.message) for w in said) == 2, "each listing still says what it left out"
    assert sum("empty.jsonl" in str(w.message) for w in said) == 2
