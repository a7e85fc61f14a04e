"""A worker SIGKILLed while its runs' Message Batch is processing: the next worker polls that
batch and sends nothing twice.

``nb-durable run --batch FILE --batch-api`` queues three runs; a worker (a forked child,
``tests/forkserver.py``) takes all three at once, gathers their first model calls into one
batch, records its id in each run's log and polls it while the loopback API holds the batch.
The worker is SIGKILLed there. A second worker resumes the three runs: each polls the batch
its log names (it is let go now), and their second calls make one more batch. The fake counts
two batches of three, each run's request at each turn received once, no plain message call,
and every run's dollars at batch prices.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from nb_durable.agent.display.views import views_of
from nb_durable.agent.money.cost import Usage
from nb_durable.agent.money.prices import price_for
from nb_durable.agent.run.batch_step import BATCH_BY, IN_BATCH
from nb_durable.core.events import Decision
from nb_durable.core.runs import list_runs, read_run, read_summary
from tests import forkserver
from tests.agent.test_batch_api import two_turns
from tests.conftest import nb_durable_cli, subprocess_env
from tests.fakes import FunctionScenario, MessagesAPIServer
from tests.waiting import wait_until

TASKS = ["count the files", "name the folder", "say hello"]


def batch_decisions(store: str, run_id: str) -> list[Decision]:
    """The run's decisions that name its batch (``in batch msgbatch_...``)."""
    events = read_run(run_id, store).events
    return [e for e in events if isinstance(e, Decision) and e.by == BATCH_BY and e.decision.startswith(IN_BATCH)]


@pytest.mark.slow(6)
def test_a_worker_killed_mid_batch_is_resumed_by_polling_the_same_batch(tmp_path: Path) -> None:
    store = str(tmp_path / "runs")
    ws = tmp_path / "ws"
    ws.mkdir()
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"task": t, "workspace": str(ws)}) + "\n" for t in TASKS))
    with MessagesAPIServer(FunctionScenario(two_turns), batch_delay=float("inf")) as server:
        env = {"ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": "sk-test-batch"}
        queued = nb_durable_cli("run", "--batch", str(tasks), "--batch-api", "--store", store, ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="sk-test-batch")
        assert queued.returncode == 0, queued.stderr
        run_ids = sorted(s.run_id for s in list_runs(store))
        assert len(run_ids) == 3 and all(read_summary(r, store).settings["batch_api"] for r in run_ids)

        worker = forkserver.Popen(
            [sys.executable, "-m", "nb_durable.cli", "worker", "--store", store, "--concurrency", "3", "--poll", "0.2"],
            env=subprocess_env(**env), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        try:
            wait_until(
                lambda: bool(server.requests_to("batch_retrieve")) and all(batch_decisions(store, r) for r in run_ids),
                "the worker to record its runs' batch and poll it",
                timeout=90,
                alive=(worker,),
            )
        finally:
            worker.send_signal(signal.SIGKILL)
            worker.wait(30)
        (first,) = server.batches.created
        assert len(first.requests) == 3  # the three runs' first calls gathered into one batch
        assert {d.decision for r in run_ids for d in batch_decisions(store, r)} == {IN_BATCH + first.id}
        assert {d.note for r in run_ids for d in batch_decisions(store, r)} == {c for c, _ in first.requests}

        server.batches.delay = 0.0
        polled_before = len(server.requests_to("batch_retrieve"))
        resumed = nb_durable_cli(
            "worker", "--store", store, "--once", "--concurrency", "3", ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="sk-test-batch"
        )
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        assert {r: read_summary(r, store).status for r in run_ids} == dict.fromkeys(run_ids, "completed")

        assert [len(b.requests) for b in server.batches.created] == [3, 3]  # the first batch polled, never sent again
        assert len(server.requests_to("batch_retrieve")) > polled_before
        assert server.requests_to("messages") == []
        stats = server.turn_stats()
        assert {t: (s.requests, s.repeats) for t, s in stats.items()} == {0: (3, 0), 1: (3, 0)}
        answers = [r for r in server.requests_to("batch_request") if r.outcome == "reply"]
        full = sum(price_for(str(r.body["model"])).dollars(Usage.of(r.reply or {})) for r in answers)
        paid = sum(views_of(read_run(r, store))[0].cost.paid_dollars for r in run_ids)  # as `show` prices them
        assert paid == pytest.approx(full / 2)


@pytest.mark.slow(4)
def test_a_plain_run_killed_mid_batch_resumes_by_polling_its_batch_of_one(tmp_path: Path) -> None:
    store = str(tmp_path / "runs")
    ws = tmp_path / "ws"
    ws.mkdir()
    with MessagesAPIServer(FunctionScenario(two_turns), batch_delay=float("inf")) as server:
        env = {"ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": "sk-test-batch"}
        run = forkserver.Popen(
            [sys.executable, "-m", "nb_durable.cli", "run", "--batch-api", "--run", "one", "--store", store, "--workspace", str(ws), "say hello"],
            env=subprocess_env(**env), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        try:
            wait_until(lambda: bool(server.requests_to("batch_retrieve")) and batch_decisions(store, "one"), "the run to record its batch and poll it", alive=(run,))
        finally:
            run.send_signal(signal.SIGKILL)
            run.wait(30)
        server.batches.delay = 0.0
        resumed = nb_durable_cli("resume", "one", "--store", store, ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="sk-test-batch")
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        assert read_summary("one", store).status == "completed"
        assert [len(b.requests) for b in server.batches.created] == [1, 1]  # a batch of one per turn, none sent again
        assert server.requests_to("messages") == []
        shown = nb_durable_cli("show", "one", "--store", store)
        assert "Message Batch, half price" in shown.stdout, shown.stdout
