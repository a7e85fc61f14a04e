"""A store that hands every call of the ``Store`` protocol to another: what a test's odd store
(one that loses a line, one with no run index) overrides is all it has to say."""

from __future__ import annotations

from typing import Any

from nb_durable import Store
from nb_durable.core.stores import StoreWriter
from nb_durable.core.stores.base import StoredLog

__all__ = ["WrappedStore"]


class WrappedStore:
    """The ``Store`` protocol alone, each call passed to ``inner``: no run index, no limiter,
    nothing a built-in store has beyond the protocol (``index_of`` finds none)."""

    def __init__(self, inner: Store) -> None:
        self.inner, self.url, self.key = inner, inner.url, inner.key

    def run_ids(self) -> list[str]:
        return self.inner.run_ids()

    def load(self, run_id: str) -> StoredLog:
        return self.inner.load(run_id)

    def open_writer(self, run_id: str) -> StoreWriter:
        return self.inner.open_writer(run_id)

    def holder(self, run_id: str) -> dict[str, Any] | None:
        return self.inner.holder(run_id)

    def location(self, run_id: str) -> str:
        return self.inner.location(run_id)

    def close(self) -> None:
        self.inner.close()

    def __enter__(self) -> WrappedStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
