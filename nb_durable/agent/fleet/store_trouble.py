"""What a long-running worker says about a store it cannot reach, and when.

A worker outlives a database restart: it tries again at every poll. The reason is said once,
again when it changes, recalled once a minute while it lasts, and the store's return is said
too. The same line at every poll (every 5 s by default, for as long as the store is down)
would bury every other line of a worker's log.
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["RECALL_AFTER", "StoreTrouble"]

RECALL_AFTER = 60.0
"""Seconds before the same reason is said again."""


class StoreTrouble:
    """Whether a worker's store could be listed at its last look, said to ``say`` as it changes."""

    def __init__(self, store: str, poll: float, say: Callable[[str], None]) -> None:
        self.store = store
        self.poll = poll
        self.say = say
        self._said: tuple[str, float] | None = None  # the reason last said, and when (monotonic)

    def failed(self, why: str) -> None:
        """The store could not be listed, for reason ``why``."""
        now, said = time.monotonic(), self._said
        if said is None or said[0] != why:
            self.say(f"cannot list the runs of {self.store} ({why}); trying again every {self.poll:g} s")
        elif now - said[1] >= RECALL_AFTER:
            self.say(f"still cannot list the runs of {self.store} (as said above); trying again every {self.poll:g} s")
        else:
            return
        self._said = (why, now)

    def listed(self) -> None:
        """The store was listed."""
        if self._said is not None:
            self._said = None
            self.say(f"can list the runs of {self.store} again")
