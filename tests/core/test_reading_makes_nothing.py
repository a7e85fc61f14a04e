"""Reading a store from Python makes nothing: ``list_runs``, ``read_runs``, ``list_runs_from_logs``,
``read_run``, ``read_summary`` and ``latest_run`` on a store that is not there (a mistyped SQLite
file, folder or PostgreSQL schema) find no runs and leave nothing behind.

``list_runs("sqlite:///typo.db")`` made an empty ``typo.db`` (and a PostgreSQL schema its
tables), as a writer opens a store; the magics and the CLI pass an opened store, so only Python
callers met it. ``read_run`` of a run in a store not there is ``RunNotFoundError``, as the code
that catches it to start the run expects, saying the store is not there.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from nb_durable.core.runs import latest_run, list_runs, list_runs_from_logs, read_run, read_runs, read_summary
from nb_durable.errors import NoUnfinishedRunError, RunNotFoundError
from tests.pg import postgres_url, server


@pytest.mark.parametrize("name", ["sqlite:///{tmp}/typo.db", "{tmp}/typo.db", "{tmp}/typo-folder"])
def test_reading_a_store_not_there_finds_no_runs_and_makes_nothing(tmp_path: Path, name: str) -> None:
    store = name.format(tmp=tmp_path)
    assert list_runs(store) == [] and list_runs(store, status="completed", limit=5) == []
    assert read_runs(store) == [] and list_runs_from_logs(store) == []
    for read in (read_run, read_summary):
        with pytest.raises(RunNotFoundError) as missing:
            read("r", store)
        assert str(missing.value).startswith("run 'r' is not there: there is no store at "), missing.value
        assert "is the store's name right?" in str(missing.value)
    with pytest.raises(NoUnfinishedRunError, match="it holds none yet"):
        latest_run("show", store)
    assert list(tmp_path.iterdir()) == [], "nothing was made"


@pytest.mark.postgres
def test_reading_a_schema_without_a_store_makes_no_tables() -> None:
    url = postgres_url()
    schema = url.rsplit("%3D", 1)[1]
    assert list_runs(url) == [] and read_runs(url) == []
    with pytest.raises(RunNotFoundError, match=f"is not there: there is no store at .*: schema {schema} of that database holds no nb_durable tables"):
        read_run("r", url)
    tables = server().admin().execute("SELECT count(*) FROM pg_tables WHERE schemaname = %s", (schema,)).fetchone()
    assert tables == (0,), "no table was made"
