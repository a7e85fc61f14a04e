"""The shared limiter of each store: slots held across processes, freed by death; pause; window."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nb_durable.core.limits import WINDOW, Limiter, acquire_slot, limit_key, limiter_of
from nb_durable.core.stores import open_store
from nb_durable.core.stores.memory import MemoryStore
from nb_durable.errors import StoreError
from tests.conftest import subprocess_env

HOLD = """
import sys, time
from nb_durable.core.limits import limiter_of
from nb_durable.core.stores import open_store
slot = limiter_of(open_store(sys.argv[1])).try_slot(sys.argv[2], 0)
print("held" if slot is not None else "taken", flush=True)
time.sleep(60)
"""


def _limiter(tmp_path: Path, kind: str) -> tuple[str, Limiter]:
    spec = str(tmp_path / ("runs.db" if kind == "sqlite" else "runs"))
    return spec, limiter_of(open_store(spec))


@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
def test_a_slot_held_by_another_process_is_freed_when_that_process_is_killed(tmp_path: Path, kind: str) -> None:
    spec, limiter = _limiter(tmp_path, kind)
    key = limit_key("https://api.example", "api_key")
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, spec, key], env=subprocess_env(), stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert limiter.try_slot(key, 0) is None, "a slot another process holds was given out again"
        assert acquire_slot(limiter, key, 1, timeout=0.2) is None
        second = acquire_slot(limiter, key, 2, timeout=0.2)
        assert second is not None, "the free second slot was not given"
        second.release()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    slot = limiter.try_slot(key, 0)
    assert slot is not None, "the killed holder's slot stayed taken"
    slot.release()


@pytest.mark.parametrize("kind", ["sqlite", "jsonl", "memory"])
def test_the_pause_and_the_token_window_are_shared_by_every_handle_on_the_store(tmp_path: Path, kind: str) -> None:
    if kind == "memory":
        store = MemoryStore()
        one, two = limiter_of(store), limiter_of(store)
    else:
        spec, one = _limiter(tmp_path, kind)
        two = limiter_of(open_store(spec))
    key = limit_key("https://api.example", "api_key")
    assert two.paused_until(key) == 0
    one.pause(key, 1000.0)
    one.pause(key, 900.0)  # an earlier pause never shortens a later one
    assert two.paused_until(key) == 1000.0
    assert one.paused_until(limit_key("https://other.example", "api_key")) == 0, "keys are apart"
    now = time.time()
    assert one.take_tokens(key, 600, 1000, now) == 0
    left = two.take_tokens(key, 600, 1000, now + 1)
    assert left == pytest.approx(WINDOW - 1), "the second handle saw the first one's tokens"
    assert two.take_tokens(key, 400, 1000, now + 2) == 0, "what fits goes through"
    assert two.take_tokens(key, 600, 1000, now + WINDOW) == 0, "a new window starts empty"
    assert one.take_tokens(key, 5000, 1000, now + 3 * WINDOW) == 0, "a request alone in a window always fits"


def test_a_store_without_shared_limits_says_which_stores_have_them() -> None:
    with pytest.raises(StoreError, match="SQLite or JSONL store"):
        limiter_of(object())
