"""The retry policy: backoff, jitter, the server's requested wait, bounded attempts."""

from __future__ import annotations

import random

import pytest

from nb_durable.agent.models.retry import RetryPolicy, call_with_retries
from nb_durable.errors import ModelError, TransientModelError


def overloaded(retry_after: float | None = None) -> TransientModelError:
    return TransientModelError("overloaded", status=529, error_type="overloaded_error", retry_after=retry_after)


def test_backoff_doubles_up_to_the_cap_with_jitter_below_it() -> None:
    policy = RetryPolicy(base_delay=1.0, max_delay=5.0, jitter=0.25)
    rng = random.Random(7)
    delays = [policy.delay(n, overloaded(), rng) for n in range(1, 7)]
    ceilings = [1, 2, 4, 5, 5, 5]
    for delay, ceiling in zip(delays, ceilings, strict=True):
        assert ceiling * 0.75 <= delay <= ceiling
    assert len(set(delays)) == len(delays), "jitter makes waits differ"


def test_the_servers_requested_wait_wins_but_is_bounded() -> None:
    policy = RetryPolicy(base_delay=1.0, max_retry_after=30.0)
    assert policy.delay(1, overloaded(retry_after=0.05)) == 0.05
    assert policy.delay(4, overloaded(retry_after=12.0)) == 12.0
    assert policy.delay(1, overloaded(retry_after=9999.0)) == 30.0


def test_transient_failures_are_retried_and_each_is_reported_before_the_wait() -> None:
    script: list[Exception | str] = [overloaded(0.01), overloaded(), "ok"]
    events: list[tuple[str, object]] = []

    def call() -> str:
        item = script.pop(0)
        events.append(("call", None))
        if isinstance(item, Exception):
            raise item
        return item

    result = call_with_retries(
        call,
        RetryPolicy(max_attempts=5, base_delay=0.5, jitter=0),
        on_failure=lambda attempt, error, delay: events.append(("failed", (attempt, delay))),
        sleep=lambda seconds: events.append(("sleep", seconds)),
    )
    assert result == "ok"
    assert events == [
        ("call", None),
        ("failed", (1, 0.01)),
        ("sleep", 0.01),
        ("call", None),
        ("failed", (2, 1.0)),
        ("sleep", 1.0),
        ("call", None),
    ]


def test_exhausted_attempts_report_no_next_wait_and_reraise() -> None:
    failures: list[tuple[int, float | None]] = []
    with pytest.raises(TransientModelError):
        call_with_retries(
            lambda: (_ for _ in ()).throw(overloaded()),
            RetryPolicy(max_attempts=3, base_delay=0, jitter=0),
            on_failure=lambda attempt, error, delay: failures.append((attempt, delay)),
            sleep=lambda s: None,
        )
    assert failures == [(1, 0.0), (2, 0.0), (3, None)]


def test_permanent_errors_are_not_retried() -> None:
    calls: list[int] = []

    def refuse() -> None:
        calls.append(1)
        raise ModelError("bad key", status=401)

    with pytest.raises(ModelError, match="bad key"):
        call_with_retries(refuse, RetryPolicy(), on_failure=lambda *a: pytest.fail("no retry"), sleep=lambda s: None)
    assert calls == [1]


@pytest.mark.parametrize("bad", [{"max_attempts": 0}, {"base_delay": -1}, {"jitter": 2}])
def test_nonsense_policies_are_refused(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        RetryPolicy(**bad)  # type: ignore[arg-type]


def test_policy_round_trips_through_json() -> None:
    policy = RetryPolicy(max_attempts=3, base_delay=0.2, max_delay=9, jitter=0.1, max_retry_after=20)
    assert RetryPolicy.from_json(policy.to_json()) == policy
