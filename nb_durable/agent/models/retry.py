"""Surviving the cause: retry transient model failures with jittered exponential backoff.

Durability gets a run back to the point of failure, not past its cause: a 529 or a timeout
would simply happen again. So a model call that fails transiently (``TransientModelError``:
429, 529, 5xx, timeouts, connection errors, a mid-stream overload) is tried again after a
wait: the server's ``retry-after-ms``/``retry-after`` when it gives one, otherwise
``base_delay * 2**(n-1)`` with jitter, capped at ``max_delay``, for at most ``max_attempts``
attempts. Every failed attempt is reported (the loop records it as an ``attempt_failed``
event, with the wait before the next one) before the wait starts, so a timeline can say
"retrying 2/5 after 529" and a crash during the wait loses nothing. A caller may also move
on (``Moving``: another model, after so many overloads): the failure is reported with no
wait, the move made, and the next model gets attempts of its own.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar

from ...errors import TransientModelError

__all__ = ["Moving", "RetryPolicy", "call_with_retries"]

T = TypeVar("T")


class Retryable(Protocol):
    """A failure worth another attempt; ``retry_after`` is the wait its server asked for, if any."""

    @property
    def retry_after(self) -> float | None: ...


class Moving(Protocol):
    """A way around a failure: asked after each one whether it is due, then taken.
    ``exhausted``: the policy has no attempt left on this road."""

    def due(self, error: TransientModelError, exhausted: bool) -> bool: ...

    def move(self) -> None: ...


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How long to keep trying a transient failure."""

    max_attempts: int = 6
    base_delay: float = 1.0
    max_delay: float = 60.0
    jitter: float = 0.25
    """Each computed wait is scaled by a random factor in [1 - jitter, 1]."""
    max_retry_after: float = 300.0
    """A server's requested wait is honoured up to this many seconds."""

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, not {self.max_attempts}")
        if self.base_delay < 0 or self.max_delay < 0 or not 0 <= self.jitter <= 1:
            raise ValueError("delays must be >= 0 and jitter between 0 and 1")

    def delay(self, attempt: int, error: Retryable, rng: random.Random | None = None) -> float:
        """The wait after failed attempt number ``attempt`` (1-based)."""
        if error.retry_after is not None:
            return min(error.retry_after, self.max_retry_after)
        backoff: float = min(self.max_delay, self.base_delay * 2 ** (attempt - 1))
        return backoff * (1 - self.jitter * (rng or random).random())

    def to_json(self) -> dict[str, float]:
        return {
            "max_attempts": self.max_attempts,
            "base_delay": self.base_delay,
            "max_delay": self.max_delay,
            "jitter": self.jitter,
            "max_retry_after": self.max_retry_after,
        }

    @classmethod
    def from_json(cls, data: dict[str, float]) -> RetryPolicy:
        default = cls()
        return cls(
            max_attempts=int(data.get("max_attempts", default.max_attempts)),
            base_delay=float(data.get("base_delay", default.base_delay)),
            max_delay=float(data.get("max_delay", default.max_delay)),
            jitter=float(data.get("jitter", default.jitter)),
            max_retry_after=float(data.get("max_retry_after", default.max_retry_after)),
        )


def call_with_retries(
    fn: Callable[[], T],
    policy: RetryPolicy,
    *,
    on_failure: Callable[[int, TransientModelError, float | None], None],
    sleep: Callable[[float], None] = time.sleep,
    rng: random.Random | None = None,
    moving: Moving | None = None,
) -> T:
    """Call ``fn`` until it succeeds, retrying ``TransientModelError`` per ``policy``.

    ``on_failure(attempt, error, delay)`` hears of every failure first; ``delay`` is None
    when the policy is exhausted, and the last error is then re-raised. ``moving``, when a
    failure makes it due (the last of the policy's attempts may, and so may a server's
    ``retry-after`` longer than ``max_delay``), is taken at once (the failure reported with a
    wait of 0), and the policy's attempts start again from there.
    """
    attempt, tries = 1, 1
    while True:
        try:
            return fn()
        except TransientModelError as error:
            last = tries >= policy.max_attempts
            wait = None if last else policy.delay(tries, error, rng)
            # A server asking for a longer wait than the policy's own longest is a road to leave
            # now, when there is another: waiting it out is what the fallback is there to avoid.
            if moving is not None and moving.due(error, last or (wait is not None and wait > policy.max_delay)):
                on_failure(attempt, error, 0.0)
                moving.move()
                attempt, tries = attempt + 1, 1
                continue
            if wait is None:
                on_failure(attempt, error, None)
                raise
            on_failure(attempt, error, wait)
            sleep(wait)
            attempt, tries = attempt + 1, tries + 1
