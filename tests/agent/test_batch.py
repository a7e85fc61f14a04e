"""Batches: ``nb-durable run --batch`` and ``submit()`` queue runs; workers take each exactly once; ``wait`` gathers them.

Every agent and worker is a real process (the real SDK, against this test's loopback Messages
API via ``ANTHROPIC_BASE_URL``). Each run is kept to two model turns (a ``read_file``, then the
end) so 30 runs across 3 workers stay fast on CI's two cores.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from nb_durable.agent import prepare_demo_workspace
from nb_durable.agent.fleet.batch import BatchHandle, batch_handle, submit, submit_batch
from nb_durable.agent.fleet.batch_file import BatchTask, read_batch
from nb_durable.core.events import Decision, StepCompleted
from nb_durable.core.log import EventLog, run_step
from nb_durable.core.runs import BY_WORKER, list_runs, read_run
from nb_durable.errors import EXIT_CODES, BatchFileError, RunNotFoundError, SettingError
from tests import forkserver
from tests.conftest import make_store_url, subprocess_env
from tests.fakes import Action, Delay, FunctionScenario, MessagesAPIServer, RecordedRequest, reply, tool_use

NOTES = "the notes\n"
CLI = [sys.executable, "-m", "nb_durable.cli"]


def first_text(request: RecordedRequest) -> str:
    content = request.messages[0]["content"] if request.messages else ""
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict))
    return str(content)


def answer(request: RecordedRequest) -> Action:
    """Two turns a run: read the notes, then say which task is done."""
    task = first_text(request)
    if (request.turn or 0) == 0:
        return Delay(0.05, reply(f"Reading for {task}.", tool_use("read_file", {"path": "notes.txt"}, id="toolu_read")))
    return Delay(0.05, reply(f"Done: {task}."))


@pytest.fixture
def server() -> Iterator[MessagesAPIServer]:
    with MessagesAPIServer(FunctionScenario(answer)) as s:
        yield s


def workspace(path: Path) -> Path:
    path.mkdir()
    (path / "notes.txt").write_text(NOTES)
    return path


def cli(*args: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return forkserver.run([*CLI, *args], env=env, capture_output=True, text=True, timeout=timeout, check=False)


def asked_first(server: MessagesAPIServer) -> list[str]:
    """The tasks in the order their first model call reached the server."""
    return [first_text(r) for r in server.requests if r.endpoint == "messages" and (r.turn or 0) == 0]


@pytest.mark.slow(15)
@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_batch_of_30_runs_across_3_workers_each_run_once(kind: str, tmp_path: Path, server: MessagesAPIServer) -> None:
    store = make_store_url(kind, tmp_path)
    ws = workspace(tmp_path / "workspace")
    env = subprocess_env(ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="sk-test-batch")
    tasks = tmp_path / "tasks.jsonl"
    lines = [{"task": f"batch task {i:02d}", "run": f"b{i:02d}", "priority": i % 3, "tags": ["nightly"]} for i in range(30)]
    tasks.write_text("".join(json.dumps(line) + "\n" for line in lines))

    queued = cli("run", "--batch", str(tasks), "--store", store, "--workspace", str(ws), env=env)
    assert queued.returncode == 0, queued.stdout + queued.stderr
    assert "30 run(s) queued" in queued.stdout
    assert {s.run_id: s.status for s in list_runs(store)} == {f"b{i:02d}": "queued" for i in range(30)}
    listed = cli("runs", "--store", store, env=env).stdout
    assert listed.count(" queued ") == 30, listed
    assert not server.requests, "submitting must not call the model"
    again = cli("run", "--batch", str(tasks), "--store", store, "--workspace", str(ws), env=env)
    assert again.returncode == 0 and len(list_runs(store)) == 30, "the same file queues nothing twice"

    waiter = forkserver.Popen(
        [*CLI, "wait", "--batch", str(tasks), "--store", store, "--timeout", "240", "--poll", "0.2"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    outs = [tmp_path / f"w{n}.out" for n in range(3)]
    workers = []
    for n, out in enumerate(outs):
        with open(out, "w") as f:
            extra = ["--concurrency", "2"] if n == 2 else []
            workers.append(
                forkserver.Popen([*CLI, "worker", "--store", store, "--once", "--tag", "nightly", *extra], env=env, stdout=f, stderr=subprocess.STDOUT, text=True)
            )
    for proc, out in zip(workers, outs, strict=True):
        assert proc.wait(240) == 0, out.read_text()
    waited, _ = waiter.communicate(timeout=240)
    assert waiter.returncode == 0, waited
    assert "30 of 30 run(s) completed" in waited
    for i in range(30):
        assert f"b{i:02d}: completed: Done: batch task {i:02d}." in waited

    names = set()
    completed_lines: Counter[str] = Counter()
    for out in outs:
        text = out.read_text()
        for line in text.splitlines():
            if line.endswith("live)") and ": completed" in line:
                completed_lines[line.split(":")[0]] += 1
        names.add(f"{text.split()[2]}")  # "nb-durable worker HOST:PID on ..."
    assert completed_lines == Counter({f"b{i:02d}": 1 for i in range(30)}), "each run is completed by exactly one worker"
    per_worker: Counter[str | None] = Counter()
    for i in range(30):
        record = read_run(f"b{i:02d}", store)
        assert record.summary.status == "completed", (record.run_id, record.summary.error)
        results = Counter(e.step for e in record.events if isinstance(e, StepCompleted))
        assert set(results.values()) == {1}, f"{record.run_id}: steps recorded twice: {results}"
        takers = [e.by for e in record.events if isinstance(e, Decision) and e.by.startswith(BY_WORKER)]
        assert len(takers) == 1, f"{record.run_id} was taken {len(takers)} times: {takers}"
        assert record.summary.resumed_by in names
        per_worker[record.summary.resumed_by] += 1
    assert Counter(asked_first(server)) == Counter(f"batch task {i:02d}" for i in range(30)), "a model call was repeated"
    assert len(per_worker) >= 2, f"the workers did not share the batch: {per_worker}"


def test_one_worker_takes_the_highest_priority_first_and_a_handle_gathers_results(
    tmp_path: Path, server: MessagesAPIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = make_store_url("sqlite", tmp_path)
    ws = workspace(tmp_path / "workspace")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-batch")
    env = subprocess_env(ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="sk-test-batch")
    priorities = {"low": 0, "high": 9, "mid-a": 5, "lowest": -1, "mid-b": 5}
    handle = submit_batch(
        [BatchTask(f"task {name}", run_id=name, priority=p) for name, p in priorities.items()],
        store=store,
        batch="prio",
        workspace=str(ws),
    )
    assert isinstance(handle, BatchHandle) and handle.run_ids == tuple(priorities)
    assert set(handle.statuses.values()) == {"queued"} and handle.results == {}
    with pytest.raises(RunNotFoundError, match=r"batch 'piro' is not in .*Its latest batches: 'prio'\."):
        batch_handle("piro", store)  # a mistyped id is told the batches there are
    assert handle.wait(timeout=0.3) is False, "nothing runs without a worker"
    lone = submit("task alone", store=store, run_id="alone", workspace=str(ws), priority=1)
    assert lone == "alone" and read_run("alone", store).summary.status == "queued"
    from nb_durable.jupyter.runs_table import runs_table  # %agent_runs shows queued runs

    table = runs_table(store)
    assert "nbd-status-queued" in table._repr_html_() and "queued" in repr(table)

    worker = forkserver.Popen([*CLI, "worker", "--store", store, "--poll", "0.2"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert handle.wait(timeout=120) is True
    finally:
        worker.terminate()
        out, _ = worker.communicate(timeout=60)
    assert worker.returncode == 0, out
    # highest priority first, equal priorities oldest first; "alone" (1) was queued last
    assert asked_first(server)[:6] == ["task high", "task mid-a", "task mid-b", "task alone", "task low", "task lowest"]
    results = handle.results
    assert {r: x.status for r, x in results.items()} == dict.fromkeys(priorities, "completed")
    assert results["high"].text == "Done: task high."
    waited = cli("wait", "high", "alone", "--store", store, env=env)
    assert waited.returncode == 0 and "alone: completed: Done: task alone." in waited.stdout, waited.stdout


def test_a_bad_batch_line_is_named_and_nothing_is_queued(tmp_path: Path) -> None:
    store = make_store_url("sqlite", tmp_path)
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"task": "fine"}\n\n{"task": "ok", "priority": "high"}\n')
    env = subprocess_env()
    done = cli("run", "--batch", str(tasks), "--store", store, "--demo", env=env)
    assert done.returncode == 2
    assert f"{tasks}, line 3: 'priority' must be a JSON whole number, not \"high\"" in done.stderr
    assert "nothing was queued" in done.stderr
    tasks.write_text('{"task": "fine"}\n{"task": "x", "prio": 1}\nnot json\n')
    done = cli("run", "--batch", str(tasks), "--store", store, "--demo", env=env)
    assert done.returncode == 2 and "line 2: unknown key(s) 'prio'" in done.stderr, done.stderr
    listed = cli("runs", "--store", store, env=env)
    assert "fine" not in listed.stdout
    tasks.write_text('{"task": "fine"}\n{"task": "x\\ud800"}\n')  # JSON's escape of half a character
    with pytest.raises(BatchFileError, match=r"line 2: it escapes half of a character \('\\ud800', a lone surrogate\)"):
        read_batch(tasks)  # named with its line before anything is queued, not at the first write
    with EventLog("plain", store) as log:  # a store with a run, none of them in a batch
        log.start_run({"task": "t"})
    missing = cli("wait", "--batch", "batch-nope", "--store", store, env=env)
    assert missing.returncode == 2, missing.stderr
    assert "batch 'batch-nope' is not in" in missing.stderr and "No run there was submitted in a batch" in missing.stderr
    no_file = cli("wait", "--batch", "nope.jsonl", "--store", store, env=env)
    assert no_file.returncode == 2 and "cannot read the batch file nope.jsonl: No such file or directory. --batch takes the tasks file" in no_file.stderr, no_file.stderr


def test_submit_batch_says_what_a_task_is_when_given_something_else(tmp_path: Path) -> None:
    store = make_store_url("sqlite", tmp_path)
    for wrong, kind in (({"task": "a dict, as a line of a batch file reads"}, "dict"), ("a bare task", "str")):
        with pytest.raises(TypeError, match=rf"submit_batch takes BatchTask values, not {kind} \(task 2 of the batch\): BatchTask\("):
            submit_batch([BatchTask("fine"), wrong], store=store, workspace=str(tmp_path), demo=True)  # type: ignore[list-item]
    assert list_runs(store) == [], "nothing was queued"


def test_submit_batch_checks_the_batchs_priority_as_submit_does(tmp_path: Path) -> None:
    """submit_batch(priority=) went through int(): 1.5 was queued as 1, "7" as 7 and True as 1
    without a word, and "high" was "invalid literal for int() with base 10"."""
    store = make_store_url("sqlite", tmp_path)
    for wrong in (1.5, "7", True, "high"):
        with pytest.raises(SettingError, match=f"^priority must be a whole number, not {wrong!r}$"):
            submit_batch([BatchTask("fine")], store=store, workspace=str(tmp_path), demo=True, priority=wrong)
        with pytest.raises(SettingError, match=f"^priority must be a whole number, not {wrong!r}$"):
            submit("fine", store=store, workspace=str(tmp_path), demo=True, priority=wrong)
    assert list_runs(store) == [], "nothing was queued"
    handle = submit_batch([BatchTask("fine")], store=store, workspace=str(tmp_path), demo=True, priority=-3)
    assert [s.settings["priority"] for s in list_runs(store)] == [-3], handle


def test_a_batch_task_that_is_not_text_is_said_when_it_is_made() -> None:
    """BatchTask(None) was made, then submit_batch failed on it with an AttributeError ('NoneType' object has no attribute 'lower')."""
    for wrong, kind in ((None, "NoneType"), (3, "int"), (["a"], "list")):
        with pytest.raises(TypeError, match=rf"^a BatchTask's task is the text of what the agent should do, not {kind}: BatchTask\('Fix the tests'\)$"):
            BatchTask(wrong)  # type: ignore[arg-type]


def test_wait_says_how_a_run_ended_in_the_commands_words(tmp_path: Path) -> None:
    """``wait`` is a command: a run stopped at its turn limit names the flag that raises it, as
    the worker's line and ``resume`` do, not the Python setting."""
    store = make_store_url("sqlite", tmp_path)
    prepare_demo_workspace(tmp_path / "ws")
    env = subprocess_env(NB_DURABLE_DEMO_LATENCY="0")
    ran = cli("run", "Fix the tests", "--run", "short", "--max-turns", "1", "--demo", "--workspace", str(tmp_path / "ws"), "--store", store, env=env)
    assert ran.returncode == EXIT_CODES["interrupted"], ran.stderr
    waited = cli("wait", "short", "--store", store, env=env)
    assert waited.returncode == EXIT_CODES["failed"], waited.stderr
    assert "short: interrupted: reached the limit of 1 turns; resume with a higher --max-turns to go on" in waited.stdout, waited.stdout


def test_queued_is_derived_from_the_log_and_the_lease(tmp_path: Path) -> None:
    """Queued until a writer holds the lease (running); queued again if it let go before a step."""
    store = make_store_url("sqlite", tmp_path)
    run_id = submit("queued and taken", store=store, run_id="q", workspace=str(tmp_path), demo=True)
    assert read_run(run_id, store).summary.status == "queued"
    shown = cli("show", run_id, "--store", store, env=subprocess_env())
    assert shown.returncode == 0 and "run q: queued, 0 steps" in shown.stdout, shown  # waiting its turn is no failure
    with EventLog(run_id, store) as log:
        assert read_run(run_id, store).summary.status == "running"
        assert log.start_run({})["queued"] is True
    assert read_run(run_id, store).summary.status == "queued", "a taker that died before a step leaves it queued"
    with EventLog(run_id, store) as log:
        log.start_run({})
        run_step(log, "model:0", lambda: {"ok": True}, effect="pure")
    assert read_run(run_id, store).summary.status == "interrupted", "once a step ran, it is a started run"
    with EventLog("plain", store) as log:
        log.start_run({"task": "not submitted"})
    assert read_run("plain", store).summary.status == "interrupted", "only a submitted run is queued"


@pytest.mark.postgres
def test_a_handle_waits_on_one_connection_to_a_postgresql_store(tmp_path: Path) -> None:
    """handle.wait() opened the store named by its URL at every look (five a second): a new
    PostgreSQL session each time, thousands an hour for a batch that takes one."""
    import psycopg

    store = make_store_url("postgres", tmp_path)
    handle = BatchHandle((submit("say hello", store=store, run_id="waited", workspace=str(tmp_path), demo=True),), store)

    def sessions() -> int:
        with psycopg.connect(store, autocommit=True) as conn:
            conn.execute("SELECT pg_stat_force_next_flush()")
            row = conn.execute("SELECT sessions FROM pg_stat_database WHERE datname = current_database()").fetchone()
            return int(row[0]) if row else 0

    before = sessions()
    assert handle.wait(timeout=1.0, poll=0.05) is False  # no worker: about 20 looks
    assert sessions() - before <= 3, "a session a look"


@pytest.mark.parametrize(("asked", "said"), [
    ({"poll": 0}, "wait's poll must be more than 0 (seconds; waiting for run died), not 0"),
    ({"poll": -1.0}, "wait's poll must be more than 0"),
    ({"poll": float("nan")}, "wait's poll must be more than 0"),
    ({"poll": float("inf")}, "wait's poll must be a finite number"),
    ({"poll": "1"}, "wait's poll must be a number"),
    ({"timeout": -1}, "wait's timeout must be 0 or more (seconds, None waits for ever; waiting for run died), not -1"),
    ({"timeout": float("nan")}, "wait's timeout must be 0 or more"),
    ({"timeout": float("inf")}, "wait's timeout must be a finite number"),
])  # fmt: skip
def test_a_wait_refuses_a_poll_or_timeout_it_cannot_keep(tmp_path: Path, asked: dict[str, object], said: str) -> None:
    """wait(poll=0) looked at the store without a pause (a busy loop), a NaN timeout never passed,
    and a negative one was taken for a timeout already past: refused as the CLI's wait refuses them."""
    store = make_store_url("sqlite", tmp_path)
    with EventLog("died", store) as log:  # no end: it waits for a worker, so a wait would loop
        log.start_run({"task": "t"})
    handle = BatchHandle(("died",), store)
    with pytest.raises(SettingError, match=re.escape(said)) as refused:
        handle.wait(**asked)  # type: ignore[arg-type]
    assert refused.value.setting in asked
    assert handle.wait(timeout=0, poll=0.01) is False  # a timeout of 0 is one look
