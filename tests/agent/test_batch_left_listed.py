"""A run stopped while its model call waits in a Message Batch lists with that batch beside it.

A worker's graceful stop interrupts a run waiting on its batch (paid for, still in flight): its
lease goes, and with it the live mark listings read. The run index keeps the decision the
log left the step at (``IndexRow.open_decision``), so ``nb-durable runs`` and ``%agent_runs``
still say "in Message Batch msgbatch_..." under the interrupted run, in the live mark's words,
and a person can tell it from a run stopped between steps. Proven with the real worker, SDK
and CLI against the loopback API, and on every store kind from a log alone.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from nb_durable.agent.fleet.batch import submit_batch
from nb_durable.agent.fleet.batch_file import BatchTask
from nb_durable.agent.fleet.listing import awaited
from nb_durable.agent.fleet.worker import STOPPED_BY_WORKER, ResumeWorker
from nb_durable.agent.run.batch_step import BATCH_BY, IN_BATCH, asked_directly
from nb_durable.core.events import StepStarted
from nb_durable.core.index.check import check_index
from nb_durable.core.log import EventLog, run_step
from nb_durable.core.runs import list_runs, list_runs_from_logs
from nb_durable.core.stores import opened
from nb_durable.jupyter.runs_table import runs_table
from tests import forkserver
from tests.agent.test_batch_api import two_turns
from tests.conftest import subprocess_env
from tests.fakes import FunctionScenario, MessagesAPIServer

pytestmark = pytest.mark.usefixtures("no_ambient_anthropic")


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return forkserver.run([sys.executable, "-m", "nb_durable.cli", *args], env=subprocess_env(), capture_output=True, text=True, timeout=120, check=False)


def listed_under(store: str, run_id: str) -> tuple[list[str], str, str]:
    """The CLI's line for the run and the one under it, and the notebook table's text and HTML."""
    lines = cli("runs", "--store", store).stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith(run_id))
    table = runs_table(store)
    text = repr(table).splitlines()
    under = text[next(i for i, line in enumerate(text) if line.startswith(run_id)) + 1] if len(text) > 2 else ""
    return [lines[at], lines[at + 1] if at + 1 < len(lines) else ""], under, table._repr_html_()


def test_a_run_a_stopping_worker_left_in_its_batch_lists_with_the_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with MessagesAPIServer(FunctionScenario(two_turns), batch_delay=float("inf")) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        store = f"sqlite:///{tmp_path}/runs.db"
        (tmp_path / "ws").mkdir()
        (run_id,) = submit_batch([BatchTask("wait for me")], store=store, workspace=str(tmp_path / "ws"), batch_api=True).run_ids
        worker = ResumeWorker(store, poll=0.1)

        server.once_batch_polled(worker.stop)
        assert [t.outcome for t in worker.run(once=True)] == ["interrupted"]
    said = f"in Message Batch {server.batches.created[0].id}"
    (summary,) = list_runs(store)
    assert summary.status == "interrupted" and (summary.error or "").startswith(STOPPED_BY_WORKER)
    assert summary.awaiting is None  # the live mark went with the worker's lease
    assert awaited(summary) is not None and awaited(summary).in_words() == said  # type: ignore[union-attr]
    (line, under), table_under, html = listed_under(store, run_id)
    assert line.split()[1] == "interrupted" and under == f"  {said}"
    assert table_under == f"  {said}"
    assert f'interrupted</span> <span class="nbd-awaiting">{said}</span>' in html


def test_only_a_step_left_in_its_batch_is_listed_with_it_and_the_index_keeps_it_as_its_logs_say(store_url: str) -> None:
    with opened(store_url) as store:
        with EventLog("left", store) as log:
            log.start_run({"task": "t", "batch_api": True})
            run_step(log, "model:0", lambda: 1)
            log.writer.append(StepStarted, step="model:1", key="left:model:1", effect="idempotent")
            log.record_decision("model:1", IN_BATCH + "msgbatch_01abc", by=BATCH_BY, note="c")
            log.finish_run("interrupted", error=f"{STOPPED_BY_WORKER} h:1 while a model call waited on its Message Batch")
        with EventLog("fell-back", store) as log:  # its batch gave no answer: a normal call, no batch in flight
            log.start_run({"task": "t", "batch_api": True})
            log.writer.append(StepStarted, step="model:0", key="fell:model:0", effect="idempotent")
            log.record_decision("model:0", IN_BATCH + "msgbatch_02", by=BATCH_BY, note="c")
            log.record_decision("model:0", asked_directly("expired"), by=BATCH_BY)
            log.finish_run("interrupted", error=f"{STOPPED_BY_WORKER} h:1 while a model call waited to try again")
        with EventLog("between", store) as log:  # stopped between steps: nothing in flight
            log.start_run({"task": "t", "batch_api": True})
            run_step(log, "model:0", lambda: 1)
            log.finish_run("interrupted", error=f"{STOPPED_BY_WORKER} h:1 before step tool:0")
        assert check_index(store) == []  # the index row holds what the log says, on every store
        for listed in (list_runs(store), list_runs_from_logs(store)):
            waits = {s.run_id: (w.in_words() if (w := awaited(s)) else None) for s in listed}
            assert waits == {"left": "in Message Batch msgbatch_01abc", "fell-back": None, "between": None}
