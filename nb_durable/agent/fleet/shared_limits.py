"""Rate limits a team shares: call slots, tokens per minute and a 429's pause, per endpoint.

Twenty kernels behind one API key share one limit only if they share where it is kept, so it
lives in the run's store (``core.limiter``), keyed by the endpoint (its URL and the kind of
credential, never the credential). Each live model attempt, never a replay, first waits for
any pause another process published, then for room in the endpoint's one-minute token window
(the request's input tokens, estimated before the call), then for one of its call slots, which
it holds until the reply has arrived. A transient failure that names a wait (a 429 or 529 with
``retry-after``) publishes it, up to the retry policy's ``max_retry_after``, so every process
sharing the store waits, not only the one told, and none longer than the told one does.
With ``breaker_failures`` set, the endpoint's circuit breaker (``core.limiter.Breaker``) counts
each failure that says the service is failing (``failures.overload_kind``): once open, every
attempt of every process waits out its cool-down ("waiting: the endpoint is failing (n in the
last minute)"), then one probes; its answer closes the breaker or opens it again.

The limits are options of a session (``SessionOptions``), not of the run: they are not
recorded, not part of the run's identity, and come from the caller or, unset, from the
environment (``NB_DURABLE_MAX_CONCURRENT_CALLS``, ``NB_DURABLE_TOKENS_PER_MINUTE``: the
settings table's ``env`` column), so a whole JupyterHub can set them at once. Waiting is shown
(the step's view says "retrying" with why) and is never a step.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from ...core.limiter import Breaker, Limiter, acquire_slot, limit_key, limiter_of
from ...errors import TransientModelError
from ..models.base import endpoint_of
from ..models.failures import overload_kind
from ..money.budget import input_tokens
from ..settings import SessionOptions

__all__ = ["SharedLimits"]

SLOT_TIMEOUT = 600.0
"""Seconds an attempt waits for a call slot before it fails as a transient error (then retried)."""


class SharedLimits:
    """One session's hold on its endpoint's shared limits: ``call()`` around each live attempt."""

    def __init__(
        self,
        limits: SessionOptions,
        store: object,
        client: Any,
        *,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.limits = limits
        self.client = client
        self.limiter: Limiter = limiter_of(store)
        self._key: str | None = None
        self._sleep = sleep
        self._clock = clock

    @classmethod
    def of(cls, options: SessionOptions, store: object, client: Any, sleep: Callable[[float], None]) -> SharedLimits | None:
        """The limits of a session on ``store`` (unset ones from the environment), or None when none is set."""
        limits = options.with_environment()
        limited = (
            limits.max_concurrent_calls is not None
            or limits.tokens_per_minute is not None
            or limits.breaker_failures is not None
        )
        return cls(limits, store, client, sleep=sleep) if limited else None

    @property
    def breaker(self) -> Breaker | None:
        """The endpoint's circuit breaker rule, if the session has one."""
        failures = self.limits.breaker_failures
        return None if failures is None else Breaker(failures, self.limits.breaker_cooldown)

    @property
    def key(self) -> str:
        """The endpoint's key, asked of the client at the first live call (a replay builds none)."""
        if self._key is None:
            endpoint = endpoint_of(self.client)
            self._key = limit_key(endpoint.get("url", getattr(self.client, "name", "custom")), endpoint.get("credential", ""))
        return self._key

    def _waited(self, seconds: float) -> bool:
        """Sleep; False if the sleep did not wait (a test's), so a wait never turns into a spin."""
        before = self._clock()
        self._sleep(seconds)
        return self._clock() - before >= seconds / 2

    def _wait_pause(self, on_wait: Callable[[str], None]) -> None:
        while True:
            left = self.limiter.paused_for(self.key)
            if left <= 0:
                return
            on_wait(f"waiting {left:.1f}s: the endpoint asked every caller to wait (retry-after)")
            if not self._waited(left):
                return

    def _wait_breaker(self, on_wait: Callable[[str], None]) -> None:
        breaker = self.breaker
        if breaker is None:
            return
        while True:
            left, failing = self.limiter.breaker_state(self.key, breaker.admit)
            if left <= 0:
                return
            on_wait(f"waiting {left:.1f}s: the endpoint is failing ({failing} in the last minute)")
            if not self._waited(left):
                return

    def _breaker_heard(self, error: TransientModelError | None) -> None:
        breaker = self.breaker
        if breaker is None:
            return
        if error is None:
            self.limiter.breaker_state(self.key, breaker.succeeded)
        elif overload_kind(error.status, error.error_type) is not None:
            self.limiter.breaker_state(self.key, breaker.failed)

    def _wait_tokens(self, request: Mapping[str, Any], on_wait: Callable[[str], None]) -> None:
        per_minute = self.limits.tokens_per_minute
        if per_minute is None:
            return
        tokens = input_tokens(self.client, request)
        while True:
            left = self.limiter.take_tokens(self.key, tokens, per_minute)
            if left <= 0:
                return
            on_wait(f"waiting {left:.1f}s: {per_minute} input tokens a minute are spent on this endpoint")
            if not self._waited(left):
                return

    @contextmanager
    def call(self, request: Mapping[str, Any], on_wait: Callable[[str], None], longest_pause: float) -> Iterator[None]:
        """Wait until this attempt may call (``on_wait`` hears why it waits), hold a slot while
        it does, and publish any wait a transient failure asks for, up to ``longest_pause``
        seconds (the retry policy's ``max_retry_after``)."""
        self._wait_pause(on_wait)
        self._wait_breaker(on_wait)
        self._wait_tokens(request, on_wait)
        slot = None
        calls = self.limits.max_concurrent_calls
        if calls is not None:
            slot = acquire_slot(
                self.limiter,
                self.key,
                calls,
                timeout=SLOT_TIMEOUT,
                on_wait=lambda: on_wait(f"waiting for one of {calls} shared call slots of this endpoint"),
            )
            if slot is None:
                raise TransientModelError(
                    f"no call slot of this endpoint came free in {SLOT_TIMEOUT:.0f}s "
                    f"(--max-concurrent-calls {calls} is shared by every process using the store)"
                )
            self._wait_pause(on_wait)  # a pause published while this one waited for its slot
        try:
            yield
        except TransientModelError as error:
            if error.retry_after is not None and error.retry_after > 0:
                # Capped as the retry policy caps it: a proxy asking for a day would otherwise
                # hold every process on the store for that day.
                self.limiter.pause(self.key, min(error.retry_after, longest_pause))
            self._breaker_heard(error)
            raise
        else:
            self._breaker_heard(None)
        finally:
            if slot is not None:
                slot.release()
