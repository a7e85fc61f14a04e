"""What a long-running worker says about a store it cannot reach, and when.

A worker outlives a database restart: it tries again at every poll, and sooner where its store
can wake it (``trying_again``). The reason is said once, again when it changes, recalled once
a minute while it lasts, and the store's return is said too. The same line at every poll
(every 5 s by default, for as long as the store is down) would bury every other line of a
worker's log.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ...core.stores import shown_store, store_kind

__all__ = ["RECALL_AFTER", "StoreTrouble", "trying_again"]

RECALL_AFTER = 60.0
"""Seconds before the same reason is said again."""


def trying_again(spec: str, poll: float) -> str:
    """When a long-running worker of store ``spec`` looks again at a store it could not list.

    Besides its polls, a worker's wake-ups (``core.index.claim.Wakeups``) try a store they lost
    every second, and wake the worker once it is back: a PostgreSQL server answering again
    (listened to again), a SQLite file or folder there again (watched again, or its mark
    changed). A JSONL folder wakes no one: only the polls look again."""
    every = f"trying again every {poll:g} s"
    kind = store_kind(spec)
    if kind == "postgresql":
        return f"{every}, and within a second of the server answering again"
    if kind == "sqlite":
        return f"{every}, and within a second of its file being there again"
    return every


class StoreTrouble:
    """Whether a worker's store could be listed at its last look, said to ``say`` as it changes."""

    def __init__(self, spec: str, poll: float, say: Callable[[str], None]) -> None:
        self.store = shown_store(spec)
        self.again = trying_again(spec, poll)
        self.say = say
        self._said: tuple[str, float] | None = None  # the reason last said, and when (monotonic)

    def failed(self, why: str) -> None:
        """The store could not be listed, for reason ``why``."""
        now, said = time.monotonic(), self._said
        if said is None or said[0] != why:
            self.say(f"cannot list the runs of {self.store} ({why}); {self.again}")
        elif now - said[1] >= RECALL_AFTER:
            self.say(f"still cannot list the runs of {self.store} (as said above); {self.again}")
        else:
            return
        self._said = (why, now)

    def listed(self) -> None:
        """The store was listed."""
        if self._said is not None:
            self._said = None
            self.say(f"can list the runs of {self.store} again")
