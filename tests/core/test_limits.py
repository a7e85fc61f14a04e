"""The shared limiter of each store: slots held across processes, freed by death; pause; window.

Each test runs on every store that keeps shared limits (PostgreSQL on the private server of
``tests/pg.py``), so the file and the database implementations follow one rule.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

from nb_durable import EventLog, list_runs, read_run, run_step
from nb_durable.core.index.check import check_index
from nb_durable.core.limiter import WINDOW, Limiter, acquire_slot, limit_key, limiter_of
from nb_durable.core.stores import open_store, postgres
from nb_durable.core.stores.memory import MemoryStore
from nb_durable.errors import StoreError
from tests import forkserver
from tests.conftest import make_store_url, subprocess_env
from tests.pg import postgres_url, server

HOLD = """
import sys, time
from nb_durable.core.limiter import limiter_of
from nb_durable.core.stores import open_store, postgres
slot = limiter_of(open_store(sys.argv[1])).try_slot(sys.argv[2], 0)
print("held" if slot is not None else "taken", flush=True)
time.sleep(60)
"""


def _limiter(tmp_path: Path, kind: str) -> tuple[str, Limiter]:
    spec = make_store_url(kind, tmp_path)
    return spec, limiter_of(open_store(spec))


def _two_handles(tmp_path: Path, kind: str) -> tuple[Limiter, Limiter]:
    """Two limiters of one store: two handles on it (the memory store: one object, in one process)."""
    if kind == "memory":
        store = MemoryStore()
        return limiter_of(store), limiter_of(store)
    spec, one = _limiter(tmp_path, kind)
    return one, limiter_of(open_store(spec))


@pytest.mark.parametrize("kind", ["sqlite", "jsonl", "postgres"])
def test_a_slot_held_by_another_process_is_freed_when_that_process_is_killed(tmp_path: Path, kind: str) -> None:
    spec, limiter = _limiter(tmp_path, kind)
    key = limit_key("https://api.example", "api_key")
    holder = forkserver.Popen(
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
        holder.communicate(timeout=30)  # reaped, and its stdout pipe closed
    # A PostgreSQL server frees a killed session's locks as its backend exits, a moment later.
    slot = acquire_slot(limiter, key, 1, timeout=5)
    assert slot is not None, "the killed holder's slot stayed taken"
    slot.release()


@pytest.mark.parametrize("kind", ["sqlite", "jsonl", "postgres", "memory"])
def test_the_pause_and_the_token_window_are_shared_by_every_handle_on_the_store(tmp_path: Path, kind: str) -> None:
    one, two = _two_handles(tmp_path, kind)
    key = limit_key("https://api.example", "api_key")
    assert two.paused_for(key) == 0
    now = time.time()
    one.pause(key, 100.0, now=now)
    one.pause(key, 50.0, now=now)  # a pause that ends sooner never shortens one that ends later
    assert two.paused_for(key, now=now + 10) == 90.0
    assert one.paused_for(limit_key("https://other.example", "api_key")) == 0, "keys are apart"
    assert one.take_tokens(key, 600, 1000, now) == 0
    left = two.take_tokens(key, 600, 1000, now + 1)
    assert left == pytest.approx(WINDOW - 1), "the second handle saw the first one's tokens"
    assert two.take_tokens(key, 400, 1000, now + 2) == 0, "what fits goes through"
    assert two.take_tokens(key, 600, 1000, now + WINDOW) == 0, "a new window starts empty"
    assert one.take_tokens(key, 5000, 1000, now + 3 * WINDOW) == 0, "a request alone in a window always fits"


@pytest.mark.parametrize("kind", ["sqlite", "jsonl", "postgres", "memory"])
def test_the_store_s_clock_times_the_pause_and_the_window_and_no_wait_is_longer_than_a_window(tmp_path: Path, kind: str) -> None:
    one, two = _two_handles(tmp_path, kind)
    key = limit_key("https://api.example", "api_key")
    one.pause(key, 30.0)  # by the store's clock: the other handle sees the same 30 s
    assert 25 < two.paused_for(key) <= 30
    assert one.take_tokens(key, 600, 1000) == 0
    assert WINDOW - 5 < two.take_tokens(key, 600, 1000) <= WINDOW, "the second handle saw the first one's tokens"
    # A window begun in the future (a clock that stepped back) is taken to begin now.
    later = limit_key("https://later.example", "api_key")
    now = time.time()
    assert one.take_tokens(later, 600, 1000, now + 600) == 0
    assert two.take_tokens(later, 600, 1000, now) == WINDOW
    assert two.take_tokens(later, 600, 1000, now + WINDOW) == 0, "and ends within one window"


def test_a_store_without_shared_limits_says_which_stores_have_them() -> None:
    with pytest.raises(StoreError, match="PostgreSQL, SQLite or JSONL store"):
        limiter_of(object())


@pytest.mark.parametrize("kind", ["sqlite", "jsonl", "postgres", "memory"])
def test_a_slot_is_held_once_within_a_process_too_and_free_again_once_released(tmp_path: Path, kind: str) -> None:
    # A PostgreSQL session takes an advisory lock it holds again; the threads of a worker must not.
    one, two = _two_handles(tmp_path, kind)
    key = limit_key("https://api.example", "api_key")
    slot = one.try_slot(key, 0)
    assert slot is not None
    assert one.try_slot(key, 0) is None, "the same handle gave out a slot it holds"
    assert two.try_slot(key, 0) is None
    slot.release()
    slot.release()  # a second release changes nothing
    again = two.try_slot(key, 0)
    assert again is not None, "a released slot stayed taken"
    assert one.try_slot(key, 0) is None
    again.release()


# -- PostgreSQL: the session that holds the slots, the migration that adds the table -----------


def _limiter_backend(url: str) -> list[int]:
    """The server processes holding advisory locks keyed by the limits table (the slots' sessions)."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT DISTINCT pid FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 2 AND granted "
            "AND classid = 'nb_durable_limits'::regclass::oid"
        ).fetchall()
    return [int(r[0]) for r in rows]


@pytest.mark.postgres
def test_a_postgresql_limiter_whose_session_drops_frees_its_slots_and_connects_again() -> None:
    url = postgres_url()
    store, other = open_store(url), open_store(url)
    limiter, watcher = limiter_of(store), limiter_of(other)
    key = limit_key("https://api.example", "api_key")
    held = limiter.try_slot(key, 0)
    assert held is not None
    (backend,) = _limiter_backend(url)
    assert server().admin().execute("SELECT pg_terminate_backend(%s, 10000)", (backend,)).fetchone() == (True,)
    freed = acquire_slot(watcher, key, 1, timeout=5)
    assert freed is not None, "a dropped session's slot stayed taken"
    freed.release()
    held.release()  # its session is gone: nothing to unlock, no error
    limiter.pause(key, 500.0)  # the next use connects anew
    assert 495 < watcher.paused_for(key) <= 500
    taken = limiter.try_slot(key, 0)
    assert taken is not None and watcher.try_slot(key, 0) is None
    store.close()  # closing the store ends the limiter's session: its slots are free
    final = acquire_slot(watcher, key, 1, timeout=5)
    assert final is not None
    final.release()
    other.close()


@pytest.mark.postgres
def test_a_postgresql_store_of_schema_version_1_gains_the_limits_table_and_keeps_its_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = postgres_url()
    monkeypatch.setattr(postgres.schema, "MIGRATIONS", postgres.MIGRATIONS[:1])
    with EventLog("old-run", url) as log:
        run_step(log, "s1", lambda: 1)
    monkeypatch.undo()
    with postgres.PostgresStore(url) as store:
        assert store.schema_version == len(postgres.MIGRATIONS) >= 2
        limiter = limiter_of(store)
        key = limit_key("https://api.example", "api_key")
        assert limiter.take_tokens(key, 10, 100, time.time()) == 0
        assert read_run("old-run", store).summary.steps == 1
        assert check_index(store) == []  # the run index (schema 3) was filled from the old run's events
        assert [s.steps for s in list_runs(store)] == [1]
