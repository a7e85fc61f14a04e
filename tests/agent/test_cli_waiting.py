"""A run waiting for a person is ``waiting`` to every reader in every process, never ``running``.

The asking run goes on in a process of its own (``asking_child.py``: its approver reads the
answer from standard input); ``nb-durable runs``, ``show`` and ``wait`` read the store from
other processes meanwhile, and ``%agent_runs`` (``runs_table``) from this one, as another
kernel would. After the answer the run is running again, then completed; killed while it
asks, it is interrupted, never a stale "waiting".
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from nb_durable.agent import resume_agent, run_agent
from nb_durable.agent.fleet.background_runs import background
from nb_durable.agent.run.stopping import RunStopped
from nb_durable.core.runs import list_runs
from nb_durable.testing import ScriptedModel, text_message, tool_use_message
from tests import forkserver
from tests.conftest import make_store_url, nb_durable_cli, subprocess_env
from tests.waiting import wait_until

CHILD = Path(__file__).with_name("asking_child.py")


@pytest.fixture(params=["jsonl", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return make_store_url(request.param, tmp_path)


@pytest.fixture
def asker(store: str, workspace: Path) -> Iterator[subprocess.Popen[str]]:
    """The asking process, started; killed at teardown if the test left it running."""
    proc = forkserver.Popen(
        [sys.executable, str(CHILD), store, str(workspace)], env=subprocess_env(), text=True,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=60)


def _said(proc: subprocess.Popen[str], word: str) -> None:
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    assert line == word, f"the asking process said {line!r}, not {word!r}"


def _answer(proc: subprocess.Popen[str], line: str) -> None:
    assert proc.stdin is not None
    proc.stdin.write(line + "\n")
    proc.stdin.flush()


def _runs(store: str, *flags: str) -> str:
    done = nb_durable_cli("runs", "--store", store, *flags)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _status_of(listing: str, run_id: str) -> str:
    found = re.search(rf"^{re.escape(run_id)}\s+(\S+)", listing, re.M)
    assert found, listing
    return found.group(1)


def test_a_run_asking_for_approval_is_waiting_in_nb_durable_runs_until_answered(store: str, asker: subprocess.Popen[str], workspace: Path) -> None:
    from nb_durable.jupyter.cells import show_run
    from nb_durable.jupyter.runs_table import runs_table

    _said(asker, "asking")
    listing = _runs(store)
    assert _status_of(listing, "asks") == "waiting", listing
    assert re.search(r"^\s+waiting since \d\d:\d\d:\d\d for approval of step approval:0:0:\S+ \(run_bash\)$", listing, re.M), listing
    assert "asks" in _runs(store, "--status", "waiting") and "asks" not in _runs(store, "--status", "running")
    shown = nb_durable_cli("show", "asks", "--store", store)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert re.match(r"run asks: waiting since \d\d:\d\d:\d\d for approval of step approval:0:0:\S+ \(run_bash\), ", shown.stdout), shown.stdout
    waited = nb_durable_cli("wait", "asks", "--store", store, "--timeout", "0.2", "--poll", "0.05")
    assert "asks (waiting since" in waited.stdout and "answers it where it runs" in waited.stdout, waited.stdout
    table = runs_table(store)  # %agent_runs in a kernel that is not the asking one
    assert re.search(r"^asks\s+waiting\s", repr(table), re.M), repr(table)
    assert 'title="waiting since' in table._repr_html_()
    # %agent_show in that other kernel: the question waits in its row, as on the asking run's timeline.
    shown_here = show_run("asks", store)
    assert re.search(r'<div class="nbd-step nbd-waiting" data-kind="approval" data-step="approval:0:0:', shown_here.html), shown_here.html
    assert "echo pushed &gt; pushed.txt" in shown_here.html
    assert re.search(r"^  waiting +approval for run_bash", shown_here.text, re.M), shown_here.text
    assert re.search(r'^  waiting +approval for run_bash +\{"command": "echo', shown.stdout, re.M), shown.stdout

    _answer(asker, "yes")
    _said(asker, "thinking")  # approved, the tool ran, and the next model call waits: running
    listing = _runs(store)
    assert _status_of(listing, "asks") == "running" and "waiting" not in listing, listing
    assert (workspace / "pushed.txt").exists()

    _answer(asker, "go")
    _said(asker, "completed")
    assert asker.wait(60) == 0
    assert _status_of(_runs(store), "asks") == "completed"


def test_a_run_killed_while_it_asks_is_interrupted_never_waiting(store: str, asker: subprocess.Popen[str]) -> None:
    _said(asker, "asking")
    assert _status_of(_runs(store), "asks") == "waiting"
    os.kill(asker.pid, signal.SIGKILL)
    asker.wait(60)
    listing = _runs(store)
    assert _status_of(listing, "asks") in ("interrupted", "in_doubt") and "waiting" not in listing, listing
    shown = nb_durable_cli("show", "asks", "--store", store)
    assert re.match(r"run asks: (interrupted|in_doubt), ", shown.stdout), shown.stdout


def test_a_run_asking_about_a_step_in_doubt_is_waiting_on_that_step(workspace: Path, tmp_path: Path) -> None:
    store = str(tmp_path / "runs")
    replies = [tool_use_message([("run_bash", {"command": "echo one >> count.txt; sleep 30"})]), text_message("Counted.")]
    first = background(run_agent, "count", client=ScriptedModel(replies), model="claude-test-1", workspace=workspace, store=store, run_id="doubt")
    wait_until((workspace / "count.txt").exists, "the command to start")
    first.stop()
    with pytest.raises(RunStopped):
        first.wait(20)
    resumed = background(resume_agent, "doubt", store=store, client=ScriptedModel(replies[1:]), in_doubt="ask")
    question = wait_until(lambda: resumed.pending, "the question")[0]
    summary = wait_until(lambda: [s for s in list_runs(store) if s.status == "waiting"], "the run to wait")[0]
    assert summary.asking is not None and summary.asking.kind == "in_doubt" and summary.asking.step_id == question.step_id
    assert question.step_id.startswith("tool:0:0:")
    listing = _runs(store)
    assert f"for a decision on step {question.step_id} (run_bash), in doubt" in listing, listing
    question.skip(by="ada (button)")
    assert resumed.wait(20).status == "completed"
    assert _status_of(_runs(store), "doubt") == "completed"
