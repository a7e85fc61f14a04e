"""What a worker keeps from run to run: one open store per resuming thread (``thread_stores``),
one SDK client per process for the same options and environment, built with the price table
read before the worker says it is ready, an index row encoded as ``dataclasses.asdict``
would, without its deep copy, and the run's log read once as a worker takes it (and once under its lease)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from nb_durable.agent import continue_agent
from nb_durable.agent.fleet.batch import submit
from nb_durable.agent.fleet.thread_stores import ThreadStores
from nb_durable.agent.fleet.worker import ResumeWorker
from nb_durable.agent.models.anthropic import AnthropicModel
from nb_durable.core.index.rows import IndexRow
from nb_durable.core.stores import Store
from nb_durable.core.stores.jsonl import JsonlStore, _JsonlWriter
from nb_durable.core.stores.sqlite import SqliteStore, _SqliteWriter
from tests.conftest import subprocess_env


def test_each_thread_keeps_one_store_while_kept_and_all_close_after(tmp_path: Path) -> None:
    spec = f"sqlite:///{tmp_path}/runs.db"
    stores = ThreadStores(spec)
    assert stores.here() == spec  # not kept: each use opens and closes its own
    seen: dict[str, list[Store]] = {}

    def twice(name: str) -> None:
        seen[name] = [stores.here(), stores.here()]  # type: ignore[list-item]

    with stores.kept():
        threads = [threading.Thread(target=twice, args=(n,)) for n in ("a", "b")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        a, b = seen["a"], seen["b"]
        assert a[0] is a[1] and b[0] is b[1], "one store per thread, from run to run"
        assert a[0] is not b[0], "never a reading connection shared between threads"
        assert a[0].run_ids() == []  # open while kept
    assert stores.here() == spec
    with pytest.raises(Exception, match="closed"):
        a[0].run_ids()  # closed when kept() ended


def test_models_share_one_sdk_client_per_options_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9/one")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-shared-test")
    first, second = AnthropicModel().client(), AnthropicModel().client()
    assert first is second
    assert AnthropicModel(timeout=5).client() is not first  # other options: another client
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9/two")
    moved = AnthropicModel().client()
    assert moved is not first and str(moved.base_url).rstrip("/").endswith("/two")


READY_CHILD = """
import os, sys
from nb_durable.agent.fleet.worker import ResumeWorker
from nb_durable.agent.models import anthropic

said = []
heard = lambda: said.append(("genai_prices.data" in sys.modules, len(anthropic._shared)))
credentials = {name: os.environ.pop(name) for name in anthropic.CREDENTIAL_VARIABLES if name in os.environ}
ResumeWorker(sys.argv[1], ready=heard).run(once=True)  # no credentials: no run of it will call the API
os.environ.update(credentials)
ResumeWorker(sys.argv[1], ready=heard).run(once=True)
said.append(any(anthropic.AnthropicModel().client() is built for built in anthropic._shared.values()))
print(said)
"""


def test_a_worker_builds_its_client_and_reads_the_price_table_before_it_says_it_is_ready(tmp_path: Path) -> None:
    """Both were done in the first run each worker resumed (~0.2 s of CPU a worker): holding that
    run's lease, and counted in ``bench_worker.py``'s window, which starts when every worker is ready."""
    env = subprocess_env(ANTHROPIC_API_KEY="sk-ready-test", ANTHROPIC_BASE_URL="http://127.0.0.1:9")
    done = subprocess.run(
        [sys.executable, "-c", READY_CHILD, str(tmp_path / "runs")], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[(True, 0), (True, 1), True]", done.stdout + done.stderr


def test_an_index_row_encodes_as_asdict_did() -> None:
    row = IndexRow(
        run_id="r", lines=3, status="interrupted", ended=False, pending=True, steps=2, completed_steps=1,
        started_at=1.0, updated_at=2.0, queued_at=2.0, priority=1, tags=("a", "b"), batch=None, parent=None,
        resumed_by="worker h:1", settings={"task": "t", "tools": [{"name": "x", "input_schema": {"type": "object"}}]},
        output={"text": "ok"}, error=None, figures={"usd": 0.5},
    )
    expected = dataclasses.asdict(row)
    expected["tags"] = ["a", "b"]
    assert row.to_json() == expected
    assert IndexRow.from_json(row.to_json()) == row


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_a_worker_reads_the_log_of_a_run_it_takes_once_before_its_lease(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    # The look that decides to take a run read its whole log, and resuming it read the whole log
    # again for the settings it had just read: twice per take, a long log's read paid twice.
    store = str(tmp_path / "runs") if kind == "jsonl" else f"sqlite:///{tmp_path}/runs.db"
    reader, writer = (JsonlStore, _JsonlWriter) if kind == "jsonl" else (SqliteStore, _SqliteWriter)
    monkeypatch.setenv("NB_DURABLE_DEMO_LATENCY", "0")
    run_id = submit("say hello", store=store, run_id="queued", workspace=str(tmp_path), demo=True)
    reads: list[str] = []

    def counted(real: Any, said: str) -> Any:
        def load(self: Any, *args: Any) -> Any:
            reads.append(said)
            return real(self, *args)

        return load

    for cls, said in ((reader, "read"), (writer, "read under its lease")):
        monkeypatch.setattr(cls, "load", counted(cls.load, said))
    taken = ResumeWorker(store).take(run_id)
    assert taken.outcome == "completed", taken
    assert reads == ["read", "read under its lease"], "one read to take it, one to resume it under its lease"
    reads.clear()
    continue_agent(run_id, "say it again", store=store)  # a follow-up reads the log to check it has ended, and once
    assert reads == ["read", "read under its lease"]


@pytest.mark.postgres
def test_a_postgresql_worker_opens_a_session_per_run_thread_once_not_one_per_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its run threads share the worker's store: one session kept for two threads made one anew
    for most runs (a connection's cost on both sides, each run)."""
    from nb_durable.core.stores.postgres import PostgresStore
    from tests.conftest import make_store_url

    store = make_store_url("postgres", tmp_path)
    monkeypatch.setenv("NB_DURABLE_DEMO_LATENCY", "0")
    queued = [submit(f"task {i}", store=store, workspace=str(tmp_path), demo=True) for i in range(10)]
    opened: list[str | None] = []
    connect = PostgresStore._connect

    def counted(self: PostgresStore, run_id: str | None = None, **kw: Any) -> Any:
        opened.append(run_id)
        return connect(self, run_id, **kw)

    monkeypatch.setattr(PostgresStore, "_connect", counted)
    done = ResumeWorker(store, concurrency=2).run(once=True)
    assert sorted(t.run_id for t in done if t.outcome == "completed") == sorted(queued), done
    assert len(opened) <= 3, f"{len(opened)} sessions opened for 10 runs, 2 at a time: {opened}"
