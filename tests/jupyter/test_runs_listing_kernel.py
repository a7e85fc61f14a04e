"""The run index's notebook surface as a new user meets it, in a real kernel: what ``%agent_runs``
and ``%agent_show`` make (nothing) and refuse (an empty ``--store``), as ``nb-durable runs`` does.

* A store set with ``%config AgentMagics.store`` before any run was there: ``%agent_runs`` said
  "No runs yet" but left an empty SQLite file behind (and made a PostgreSQL schema's tables),
  where the same store as a folder was left unmade; ``%agent_show`` did the same. ``%agent_resume``
  with no run made it too (a folder as well) looking for the latest unfinished run, then said every
  run there had completed: it says the store is not there; with a run, and ``%%agent --continue``, too.
* ``%agent_runs --store ""`` (``--store $UNSET``) listed the configured store as if no
  ``--store`` were given, where ``nb-durable runs --store ""`` says the store is empty; ``--batch ""``
  is refused saying a batch's file is taken by a listing (it said: by nb-durable runs and wait).
* What the table shows of a queued run, one running in another process, one waiting there for
  a person and one waiting on a Message Batch, from the lease's marks; text from outside (a
  batch id, a tool's name, a task, a tag) stays inert in its HTML, and in its text form, which a
  terminal front end (``jupyter console``) prints as it is: an escape sequence there was obeyed.
* ``%agent_wait RUN`` for a run a worker runs or will take refused it, telling the person to stop
  the run where it runs and resume it here: it now waits for it through the store, as
  ``nb-durable wait RUN`` does, saying on whom it waits (and a run already ended, at once).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from nb_durable.agent.fleet.batch import submit
from nb_durable.agent.fleet.worker import ResumeWorker
from nb_durable.core.stores import open_store
from nb_durable.errors import StoreNotFoundError
from tests import forkserver
from tests.conftest import subprocess_env
from tests.jupyter.kernels import Kernel
from tests.pg import postgres_url


def refused(kernel: Kernel, line: str) -> str:
    """The UsageError ``line`` gets: a message, no traceback."""
    done = kernel.run(line)
    said = done.text()
    assert done.status == "error" and said.startswith("UsageError: ") and "Traceback" not in said, (line, said)
    return said.removeprefix("UsageError: ").strip()


@pytest.mark.kernel
@pytest.mark.postgres
def test_the_reading_magics_make_no_store_and_refuse_an_empty_one(tmp_path: Path, kernels: Callable[[], Kernel]) -> None:
    kernel = kernels()
    pg = postgres_url().replace("postgres@", "postgres:s3cret@")  # the server trusts 127.0.0.1: any password logs in
    shown_pg = pg.replace(":s3cret@", "@")
    stores = (("sqlite:///later.db", "sqlite:///later.db", "sqlite:///later.db"), ("later-runs", str(tmp_path / "later-runs"), "later-runs"), (pg, shown_pg, shown_pg))  # fmt: skip
    for store, where, said in stores:
        assert kernel.run(f'%config AgentMagics.store = "{store}"').status == "ok"
        listed = kernel.run("%agent_runs")
        assert listed.status == "ok" and listed.text() == f"No runs yet. Runs are kept in {where}.", listed.text()
        shown = refused(kernel, "%agent_show")
        assert "is the store's name right?" in shown or "no run" in shown, shown
        # %agent_resume looked for the run to resume as a writer opens a store, and made it.
        resumed = refused(kernel, "%agent_resume")
        assert resumed.startswith(f"no unfinished agent run in {said} to resume: there is no store at "), resumed
        assert "is the store's name right?" in resumed and resumed.endswith("or start a run first."), resumed
        named = refused(kernel, "%agent_resume r1") + refused(kernel, "%%agent --continue\nThanks.")
        assert named.count("(is the store's name right?)") == 2, named
        assert "s3cret" not in repr(listed.outputs) + shown + resumed + named
    assert not (tmp_path / "later.db").exists(), "listing or resuming made the SQLite file"
    assert not (tmp_path / "later-runs").exists(), "listing or resuming made the folder"
    with pytest.raises(StoreNotFoundError):  # nor the schema's tables
        open_store(pg, existing=True).close()

    for magic in ("%agent_runs", "%agent_show"):
        said = refused(kernel, f'{magic} --store ""')
        assert said.startswith("the store is empty: pass a folder such as 'runs'"), said
    # It said a file was for nb-durable runs and wait only, where %agent_runs takes one too.
    said = refused(kernel, '%agent_runs --batch ""')
    assert said == "batch must name a batch: its id, or (to a listing or a wait) the batch file it was queued from, not ''", said


XSS = "<img src=x onerror=alert(1)>"
ESCAPES = "\x1b]0;owned\x07\x1b[2J\u202e"
"""A terminal title, a cleared screen, and a right-to-left override."""

HOLD = f"""
import sys, time
from nb_durable.core.holders import Asking, Awaiting
from nb_durable.core.log import EventLog
logs = {{run_id: EventLog(run_id, sys.argv[1]) for run_id in ("held", "asks", "batched")}}
for run_id, log in logs.items():
    log.start_run({{"task": f"{{run_id}}: {XSS}" + "\\n  and a second line" * (run_id == "held")}})
logs["asks"].writer.mark_asking(Asking.now("approval:0:0:t1", "approval", {XSS!r}))
logs["batched"].writer.mark_asking(Awaiting.now("model:1", "Message Batch msgbatch_{ESCAPES!r}{XSS}"))
print("holding", flush=True)
time.sleep(600)
"""


@pytest.mark.kernel
def test_the_table_says_each_state_from_the_index_and_keeps_outside_text_inert(
    tmp_path: Path, kernels: Callable[[], Kernel], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the demo workspace of the queued run, which a worker runs below
    monkeypatch.setenv("NB_DURABLE_DEMO_LATENCY", "0")
    store = str(tmp_path / "runs")
    submit(f"queued: {XSS}", store=store, run_id="waits-for-a-worker", tags=[XSS], demo=True)
    holder = forkserver.Popen([sys.executable, "-c", HOLD, store], env=subprocess_env(), stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "holding\n"
        kernel = kernels()
        listed = kernel.run("%agent_runs --store runs")
        text, html = listed.text(), listed.outputs[-1]["content"]["data"]["text/html"]
        rows = {line.split()[0]: line.split()[1] for line in text.splitlines()[2:] if not line.startswith(" ")}
        assert rows == {"batched": "running", "asks": "waiting", "held": "running", "waits-for-a-worker": "queued"}, text
        # The text form had no task, where the HTML and nb-durable runs show it: one line, 40 characters.
        lines = {line.split()[0]: line for line in text.splitlines()[2:] if not line.startswith(" ")}
        assert text.splitlines()[1].endswith("  updated              resumed by            task"), text
        assert lines["held"].endswith(f"  -                     held: {XSS} and a"), text
        assert lines["asks"].endswith(f"  asks: {XSS}") and lines["batched"].endswith(f"  batched: {XSS}"), text
        assert lines["waits-for-a-worker"].endswith(f"  queued: {XSS}"), text
        assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text, repr(text)
        assert "  in Message Batch msgbatch_" in text and "]0;owned" in text  # said, but no longer obeyed
        assert "<img" not in html and html.count("&lt;img src=x onerror=alert(1)&gt;") == 6, html  # 4 tasks, a tool, a batch
        assert "\x1b" not in html
        tagged = kernel.run(f"%agent_runs --store runs --tag '{XSS}'").text()
        assert tagged.splitlines()[0] == f"1 run in {store}" and "waits-for-a-worker" in tagged, tagged

        waited = kernel.run("%agent_wait held --timeout 0.5")
        said = waited.text()
        assert waited.status == "error" and "Traceback" not in said, said
        assert f"nb_durable: waiting for run held, running in another process (pid {holder.pid} on host " in said, said
        assert "TimeoutError: run held has not ended after 0.5 s: it goes on in another process" in said, said
        asks = kernel.run("%agent_wait asks --timeout 0.1").text()
        assert f"waiting for run asks, waiting (approval of step approval:0:0:t1 ({XSS}): answered where it runs) in another" in asks, asks
        for_a_worker = kernel.start("%agent_wait waits-for-a-worker -o res")
        kernel.collect(for_a_worker, said="waiting for run waits-for-a-worker")  # before a worker takes it
        assert [t.outcome for t in ResumeWorker(store, poll=0.1).run(once=True)] == ["completed"]
        done = kernel.collect(for_a_worker)
        assert done.status == "ok" and done.text().endswith("run waits-for-a-worker completed; %agent_show waits-for-a-worker draws its timeline\n"), done.text()
        # Where a queued run is, said once: it read "queued in the queue".
        assert done.text().startswith("nb_durable: waiting for run waits-for-a-worker, queued, for a worker to take; the interrupt"), done.text()
        assert kernel.run("print(res.status)").text() == "completed\n"
        again = kernel.run("%agent_wait waits-for-a-worker")  # ended: said at once
        assert again.status == "ok" and again.text().startswith("nb_durable: run waits-for-a-worker completed;"), again.text()
    finally:
        holder.kill()
        holder.wait()
