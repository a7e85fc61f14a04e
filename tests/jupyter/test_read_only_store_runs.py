"""``%agent_runs`` lists a SQLite store or a runs folder on a read-only mount, as ``nb-durable runs``
does (tests/core/test_read_only_store.py: the rule, and the writes it refuses)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

from nb_durable import EventLog, run_step
from tests.core.test_full_disk import small_disk
from tests.core.test_read_only_store import read_only


@pytest.mark.parametrize("name", ["sqlite:///runs.db", "runs"])
def test_agent_runs_lists_a_store_on_a_read_only_mount(ip: Any, tmp_path: Path, name: str) -> None:
    with small_disk(tmp_path / "disk") as disk:
        url = f"sqlite:///{disk / 'runs.db'}" if name.startswith("sqlite") else str(disk / name)
        with EventLog("kept", url) as log:
            run_step(log, "a", lambda: "kept result")
            log.finish_run("completed")
        with read_only(disk), warnings.catch_warnings():
            # A runs folder's index, unwritable there, is made again in silence: nb_durable warns in
            # UserWarnings. Not every warning: an unclosed file another test left, collected now,
            # is the kernel's ResourceWarning, not the listing's.
            warnings.simplefilter("error", UserWarning)
            table = ip.run_line_magic("agent_runs", f"--store {url}")
            again = ip.run_line_magic("agent_runs", f"--store {url}")
    assert [s.run_id for s, _ in again.rows] == ["kept"]
    assert [s.run_id for s, _ in table.rows] == ["kept"]
