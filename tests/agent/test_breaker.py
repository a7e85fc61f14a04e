"""A circuit breaker per endpoint, shared through the store, across real CLI processes.

Six ``nb-durable run`` processes (forked by ``tests/forkserver.py``; the real SDK against the
loopback Messages API) share one store with ``--breaker-failures 3 --breaker-cooldown 3``.
The endpoint fails (503) for its first three requests: the third failure opens the breaker for
every process, so no request at all reaches the endpoint during the cool-down (without the
breaker, their retries would, after about a second); then one request probes, alone, and only
once it has been answered do the others go on. Waiting is shown ("the endpoint is failing (n
in the last minute)") and never recorded as a step. (A first call that was already on its way
as the breaker opened still arrives: a breaker stops calls from starting.) The rule itself is checked on each store.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from nb_durable import read_run
from nb_durable.core.limiter import Breaker, limiter_of
from nb_durable.core.stores import opened
from tests import forkserver
from tests.conftest import make_store_url, subprocess_env
from tests.fakes.messages_api import MessagesAPIServer
from tests.fakes.messages_api.records import RecordedRequest
from tests.fakes.messages_api.scenario import Action, Error, FunctionScenario, reply

MODEL = "claude-test-1"
COOLDOWN = 3.0
PROCESSES = 6


@pytest.mark.parametrize("kind", ["memory", "jsonl", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_the_breaker_rule_on_every_store(kind: str, tmp_path: Path) -> None:
    breaker = Breaker(failures=3, cooldown=10.0)
    with opened(make_store_url(kind, tmp_path)) as store:
        limiter = limiter_of(store)
        for t in (100.0, 101.0):
            limiter.breaker_state("k", breaker.failed, now=t)
        assert limiter.breaker_state("k", breaker.admit, now=102.0) == (0.0, 2)  # still closed
        limiter.breaker_state("k", breaker.failed, now=102.0)
        assert limiter.breaker_state("k", breaker.admit, now=105.0) == (7.0, 3)  # open: wait out the cool-down
        assert limiter.breaker_state("k", breaker.admit, now=112.0) == (0.0, 3)  # the probe
        assert limiter.breaker_state("k", breaker.admit, now=112.5) == (1.0, 3)  # one probe at a time
        limiter.breaker_state("k", breaker.failed, now=113.0)  # the probe failed: open again
        assert limiter.breaker_state("k", breaker.admit, now=114.0) == (9.0, 4)
        assert limiter.breaker_state("k", breaker.admit, now=123.0) == (0.0, 4)  # the next probe
        limiter.breaker_state("k", breaker.succeeded, now=123.5)
        assert limiter.breaker_state("k", breaker.admit, now=124.0) == (0.0, 0)  # closed
        assert limiter.breaker_state("other", breaker.admit, now=124.0) == (0.0, 0)  # per key


@pytest.mark.slow(15)
def test_processes_on_one_store_open_the_breaker_together_and_one_probes(tmp_path: Path) -> None:
    workspace = tmp_path / "work"
    workspace.mkdir()
    store = str(tmp_path / "runs.db")
    lock = threading.Lock()
    failed = {"n": 0}

    def answer(request: RecordedRequest) -> Action:
        with lock:
            failed["n"] += 1
            return Error(503, "api_error", "Service unavailable") if failed["n"] <= 3 else reply("Done.")

    with MessagesAPIServer(FunctionScenario(answer)) as server:
        processes = [
            forkserver.Popen(
                [sys.executable, "-m", "nb_durable.cli", "run", f"Task {i}.", "--run", f"r{i}", "--model", MODEL,
                 "--workspace", str(workspace), "--store", store, "--breaker-failures", "3",
                 "--breaker-cooldown", str(COOLDOWN)],
                env=subprocess_env(ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="test-key"),
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            )
            for i in range(PROCESSES)
        ]
        outputs = []
        for process in processes:
            out, err = process.communicate(timeout=180)
            assert process.returncode == 0, f"exit {process.returncode}\n{out}\n{err}"
            outputs.append(out + err)
        requests = sorted(server.requests_to("messages"), key=lambda r: r.received_at)
    failures = [r for r in requests if r.status == 503]
    assert len(failures) == 3 and requests[:3] == failures, [(r.outcome, r.received_at) for r in requests]
    opened_at = max(r.finished_at or 0 for r in failures)
    after = requests[3:]
    # Nothing reached the endpoint during the cool-down but first calls that processes had been
    # let make before it opened: no failed run retried in it (without the breaker, the three
    # failed runs would retry after about a second). Told apart by their task, not by how soon
    # after the opening they arrived, which a loaded machine stretches.
    def task(r: RecordedRequest) -> str:
        return json.dumps(r.body["messages"][0]["content"])

    failed_tasks = {task(r) for r in failures}
    during = [r for r in after if r.received_at < opened_at + COOLDOWN * 0.9]
    assert not [task(r) for r in during if task(r) in failed_tasks], "a failed run retried during the cool-down"
    # Then one probe, alone: every other request came after its answer.
    probe, *rest = [r for r in after if r.received_at >= opened_at + COOLDOWN * 0.9]
    assert probe.finished_at is not None and all(r.received_at >= probe.finished_at for r in rest)
    assert len(after) == PROCESSES and all(r.outcome == "reply" for r in after)
    assert any("the endpoint is failing (3 in the last minute)" in out for out in outputs), outputs
    for i in range(PROCESSES):
        assert [s.step_id for s in read_run(f"r{i}", store).steps] == ["model:0"]  # waiting is never a step
