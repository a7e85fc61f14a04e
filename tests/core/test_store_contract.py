"""The contract every store passes, unchanged: memory, JSONL, SQLite (and PostgreSQL).

The checks live in ``nb_durable.testing`` (``STORE_CONTRACT``), where a third-party store
can run them too (``check_store``); here each check is one test case per store kind, and
``check_store`` itself is shown to pass a sound store and to fail a broken one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from uuid import uuid4

import pytest

from nb_durable import Store, open_store
from nb_durable.core.stores import StoreSpec
from nb_durable.core.stores.base import StoredLog
from nb_durable.testing import STORE_CONTRACT, check_store
from tests.fakes.wrapped import WrappedStore


@pytest.mark.parametrize("check", STORE_CONTRACT, ids=lambda check: check.__name__)
def test_the_store_contract(check: Callable[[StoreSpec], None], store_url: str) -> None:
    check(store_url)


def test_check_store_passes_a_sound_store() -> None:
    passed = check_store(lambda: f"memory://contract-{uuid4().hex}")
    assert passed == [check.__name__ for check in STORE_CONTRACT]


class LosesTheLastLine(WrappedStore):
    """A memory store whose readers never see a run's last line, as if its last append was lost."""

    def __init__(self) -> None:
        super().__init__(open_store(f"memory://lossy-{uuid4().hex}"))

    def load(self, run_id: str) -> StoredLog:
        stored = self.inner.load(run_id)
        lines = stored.data.splitlines(keepends=True)
        return dataclasses.replace(stored, data=b"".join(lines[:-1]))


def test_check_store_fails_a_store_that_loses_the_last_line() -> None:
    stores: list[LosesTheLastLine] = []

    def fresh() -> Store:
        stores.append(LosesTheLastLine())
        return stores[-1]

    assert isinstance(fresh(), Store)
    with pytest.raises(AssertionError, match="store contract checks failed") as caught:
        check_store(fresh)
    message = str(caught.value)
    failed = [check.__name__ for check in STORE_CONTRACT if f"\n  {check.__name__}: " in message]
    assert "events_carry_version_sequence_and_kinds" in failed
    assert "a_store_url_opens_a_store" not in failed  # checks that pass are not named
    assert message.startswith(f"{len(failed)} of {len(STORE_CONTRACT)} store contract checks failed")
    assert len(stores) == 1 + len(STORE_CONTRACT)  # one fresh store per check
