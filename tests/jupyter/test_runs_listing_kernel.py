"""The run index's notebook surface as a new user meets it, in a real kernel: what ``%agent_runs``
and ``%agent_show`` make (nothing) and refuse (an empty ``--store``), as ``nb-durable runs`` does.

* A store set with ``%config AgentMagics.store`` before any run was there: ``%agent_runs`` said
  "No runs yet" but left an empty SQLite file behind (and made a PostgreSQL schema's tables),
  where the same store as a folder was left unmade; ``%agent_show`` did the same.
* ``%agent_runs --store ""`` (``--store $UNSET``) listed the configured store as if no
  ``--store`` were given, where ``nb-durable runs --store ""`` says the store is empty.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from nb_durable.core.stores import open_store
from nb_durable.errors import StoreNotFoundError
from tests.jupyter.kernels import Kernel
from tests.pg import postgres_url


def refused(kernel: Kernel, line: str) -> str:
    """The UsageError ``line`` gets: a message, no traceback."""
    done = kernel.run(line)
    said = done.text()
    assert done.status == "error" and said.startswith("UsageError: ") and "Traceback" not in said, (line, said)
    return said.removeprefix("UsageError: ").strip()


@pytest.mark.kernel
@pytest.mark.postgres
def test_the_reading_magics_make_no_store_and_refuse_an_empty_one(tmp_path: Path, kernels: Callable[[], Kernel]) -> None:
    kernel = kernels()
    pg = postgres_url().replace("postgres@", "postgres:s3cret@")  # the server trusts 127.0.0.1: any password logs in
    for store, said in (("sqlite:///later.db", "sqlite:///later.db"), (pg, pg.replace(":s3cret@", "@"))):
        assert kernel.run(f'%config AgentMagics.store = "{store}"').status == "ok"
        listed = kernel.run("%agent_runs")
        assert listed.status == "ok" and listed.text() == f"No runs yet. Runs are kept in {said}.", listed.text()
        shown = refused(kernel, "%agent_show")
        assert "is the store's name right?" in shown or "no run" in shown, shown
        assert "s3cret" not in repr(listed.outputs) + shown
    assert not (tmp_path / "later.db").exists(), "listing made the SQLite file"
    with pytest.raises(StoreNotFoundError):  # nor the schema's tables
        open_store(pg, existing=True).close()

    for magic in ("%agent_runs", "%agent_show"):
        said = refused(kernel, f'{magic} --store ""')
        assert said.startswith("the store is empty: pass a folder such as 'runs'"), said
