"""Rows written by a process that counts no figures (``nb_durable.core`` alone), checked by one that does."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from nb_durable.core.index.check import check_index
from nb_durable.core.index.rows import ROW_RULE, current_rule
from nb_durable.core.stores import open_store
from tests.conftest import make_store_url, subprocess_env

_PLAIN_WRITER = """
import sys
from nb_durable import EventLog, run_step
from nb_durable.core.index.figures import counts_figures
assert not counts_figures(), "the agent was imported: this writer must count no figures"
with EventLog("plain", sys.argv[1]) as log:
    log.start_run({"task": "t"})
    run_step(log, "s", lambda: 1)
    log.finish_run("completed")
"""


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_row_a_process_with_no_counter_wrote_is_the_log_s_when_its_figures_are(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A run of plain steps (EventLog, durable_run: the agent never imported) was named by every
    # check-index as "written by an older nb_durable", exit 1, however often --repair ran: its
    # next writer stamped its row with no counter again.
    from nb_durable.cli.commands import main

    store_url = make_store_url(kind, tmp_path)
    subprocess.run([sys.executable, "-c", _PLAIN_WRITER, store_url], check=True, env=subprocess_env(), timeout=120)
    with open_store(store_url) as store:
        (row,) = store.index_rows()  # type: ignore[attr-defined]
        assert row.rule == f"{ROW_RULE}.0" != current_rule()
        assert check_index(store) == []
    assert main(["check-index", "--store", store_url]) == 0, capsys.readouterr().out


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_row_with_no_counter_whose_figures_the_log_does_not_give_is_named_for_what_it_is(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from nb_durable.cli.commands import main
    from tests.core.test_run_index import _make_stale

    store_url = make_store_url(kind, tmp_path)
    subprocess.run([sys.executable, "-c", _PLAIN_WRITER, store_url], check=True, env=subprocess_env(), timeout=120)
    _make_stale(store_url, "plain", rule=f"{ROW_RULE}.0")
    assert main(["check-index", "--store", store_url]) == 1
    out = capsys.readouterr().out
    assert "plain: figures {'tokens': 7.0} (the log says {})" in out, out
    assert "older nb_durable" not in out, out
    assert main(["check-index", "--repair", "--store", store_url]) == 0
    with open_store(store_url) as store:
        assert check_index(store) == []
