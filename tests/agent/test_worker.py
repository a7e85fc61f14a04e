"""``nb-durable worker``: real processes resume the runs whose writer died, never the same run twice.

Proven here, every agent and worker a real process (the real SDK, against this test's loopback
Messages API via ``ANTHROPIC_BASE_URL``; no mocks):

* Twenty runs (``worker_runs.py``, two processes of ten threads) are SIGKILLed while every one
  waits for its third model reply. Two workers (A one at a time, B ``--concurrency 4``) resume
  them; once B is at work and half the runs are done, worker A is SIGKILLed while the run it
  holds waits for a model reply (from then on the server keeps A's replies back, so the kill
  lands in a model call however loaded the machine), and worker B finishes all of them, then stops on SIGTERM with exit
  code 0. On SQLite and on a private PostgreSQL: every run completes; no step has two results; every external effect
  (``run_bash`` appending to a ledger file) happened exactly once; each transcript equals that
  of the same run never interrupted; ``resumed_by`` names the worker that finished the run
  (B for the runs A died holding), in ``RunSummary`` and in ``nb-durable runs``.
* SIGTERM to a worker in the middle of a run (on SQLite and JSONL): the worker exits 0 within
  seconds; the run is recorded ``interrupted`` at a step boundary (the model call after the
  external tool, before its request was sent: the tool ran once and is recorded), the error
  names the worker, the lease is free; ``worker --once`` then completes it, to the same
  transcript, with each effect once, and ``%agent_runs`` names that second worker.
* A run SIGKILLed inside ``run_bash`` is in doubt: ``worker --once --in-doubt fail`` leaves it; the
  default (skip) completes it, the model told the outcome is unknown, the command never rerun.

Which runs a worker takes, tags and an unreachable store: ``test_worker_choice.py``. The
twenty runs the issue asks for are kept cheap for two cores: four model calls each (0.3 s per
reply), the uninterrupted reference runs on their own loopback server while the test's runs
wait, and the waits read the server's records before the store's; the 100-run figures come
from ``benchmarks/bench_worker.py``.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from nb_durable.core.events import StepCompleted, StepStarted
from nb_durable.core.runs import RunRecord, list_runs, read_run
from nb_durable.core.stores import opened
from tests import forkserver
from tests.agent.worker_runs import run_of, start
from tests.conftest import make_store_url, subprocess_env
from tests.fakes import Action, Delay, MessagesAPIServer, RecordedRequest, Scenario, reply, tool_use
from tests.waiting import wait_until as shared_wait_until

RUNS = [f"r{i}" for i in range(20)]
MODEL_DELAY = 0.3  # every reply waits this long: kills aimed at a waiting run land in its model call
HANG = 60.0
SIGTERM_WAIT = 1.5
NOTES = "the notes\n"
STARTER = Path(__file__).with_name("worker_runs.py")
HOST = socket.gethostname()


def first_text(request: RecordedRequest) -> str:
    content = request.messages[0]["content"] if request.messages else ""
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict))
    return str(content)


class PerRun(Scenario):
    """Each run's four turns: a ledger entry, a read, another entry, the end.

    Every reply waits ``MODEL_DELAY``, but a run's first request for its third reply waits
    until the test has killed the process that sent it (``HANG``), so the kill is certain to
    land in that model call; runs named ``t...`` wait ``SIGTERM_WAIT`` on the next one, so a
    SIGTERM certainly arrives while the worker waits. Runs named ``slow-...`` run a command
    that takes 30 s first, for a kill inside ``run_bash``.
    """

    def __init__(self, *, interrupted: bool = True) -> None:
        self.seen: Counter[tuple[str, int]] = Counter()
        self.interrupted = interrupted  # False: every reply after MODEL_DELAY (the reference runs')
        self.hold_key: str | None = None  # a request made with this API key waits HANG for its reply
        self.held: set[int] = set()  # the indexes of those requests

    def action(self, request: RecordedRequest) -> Action:
        run_id = run_of(first_text(request)) or "?"
        turn = request.turn or 0
        self.seen[run_id, turn] += 1
        wait = "sleep 30; " if run_id.startswith("slow-") else ""
        turns = [
            reply(
                f"Recording the first entry of {run_id}.",
                tool_use("run_bash", {"command": f"{wait}echo {run_id}:a >> ledger.txt"}, id=f"toolu_{run_id}_a"),
            ),
            reply("Reading the notes.", tool_use("read_file", {"path": "notes.txt"}, id=f"toolu_{run_id}_r")),
            reply(
                "Recording the second entry.",
                tool_use("run_bash", {"command": f"echo {run_id}:b >> ledger.txt"}, id=f"toolu_{run_id}_b"),
            ),
            reply(f"Done with {run_id}: two entries recorded."),
        ]
        delay = MODEL_DELAY
        if self.hold_key is not None and self.hold_key in (request.headers.get("x-api-key"), request.headers.get("authorization", "")[7:]):
            self.held.add(request.index)
            return Delay(HANG, turns[turn])
        if self.interrupted and turn == 2 and not run_id.startswith("slow-"):
            delay = {1: HANG, 2: SIGTERM_WAIT if run_id.startswith("t") else MODEL_DELAY}.get(self.seen[run_id, turn], MODEL_DELAY)
        return Delay(delay, turns[turn])


@pytest.fixture
def server() -> Iterator[MessagesAPIServer]:
    with MessagesAPIServer(PerRun()) as s:
        yield s


@pytest.fixture
def reference_server() -> Iterator[MessagesAPIServer]:
    """The reference runs' own API: the same replies, never a hang."""
    with MessagesAPIServer(PerRun(interrupted=False)) as s:
        yield s


def workspace(path: Path) -> Path:
    path.mkdir()
    (path / "notes.txt").write_text(NOTES)
    return path


def waiting(server: MessagesAPIServer, turn: int) -> set[str]:
    """The runs whose latest request at ``turn`` is in flight (received, not answered yet): a
    killed process's request stays in flight at the server, so only the latest one counts."""
    latest: dict[str, RecordedRequest] = {}
    for r in server.requests:
        if r.turn == turn and r.endpoint == "messages":
            latest[run_of(first_text(r)) or "?"] = r
    return {run_id for run_id, r in latest.items() if r.outcome == "pending"}


def asked(server: MessagesAPIServer, run_id: str, turn: int) -> int:
    """How many requests for that run's reply ``turn`` the server has received."""
    return sum(1 for r in server.requests if r.turn == turn and r.endpoint == "messages" and run_of(first_text(r)) == run_id)


def kept_back(server: MessagesAPIServer, routes: PerRun) -> set[str]:
    """The runs whose latest model request is one the server keeps unanswered (``hold_key``)."""
    latest: dict[str, RecordedRequest] = {}
    for r in server.requests:
        if r.endpoint == "messages":
            latest[run_of(first_text(r)) or "?"] = r
    return {run_id for run_id, r in latest.items() if r.index in routes.held and r.outcome == "pending"}


def answered(server: MessagesAPIServer, turn: int) -> int:
    """How many runs have been sent their reply ``turn``."""
    return len({run_of(first_text(r)) for r in server.requests if r.turn == turn and r.endpoint == "messages" and r.outcome == "reply"})


def wait_until(
    condition: Callable[[], bool],
    what: str,
    timeout: float = 90,
    alive: tuple[subprocess.Popen[str], ...] = (),
    every: float = 0.02,
) -> None:
    shared_wait_until(condition, what, timeout, alive=alive, every=every)


def start_runs(store: str, ws: Path, env: dict[str, str], groups: list[list[str]]) -> list[subprocess.Popen[str]]:
    return [
        forkserver.Popen([sys.executable, str(STARTER), store, str(ws), *group], env=env, text=True, stdout=subprocess.DEVNULL)
        for group in groups
    ]


def worker(store: str, env: dict[str, str], out: Path, *extra: str) -> subprocess.Popen[str]:
    with open(out, "w") as f:
        return forkserver.Popen(
            [sys.executable, "-m", "nb_durable.cli", "worker", "--store", store, "--poll", "0.2", *extra],
            env=env,
            stdout=f,
            stderr=subprocess.STDOUT,
            text=True,
        )


def kill(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)


def transcript(record: RunRecord) -> list[tuple[Any, ...]]:
    """Every step but a worker's bookkeeping (``settings:N``): its id and its result's content."""
    out: list[tuple[Any, ...]] = []
    for step in record.steps:
        if step.step_id.startswith("settings:"):
            continue
        assert step.state == "completed", f"{record.run_id}: step {step.step_id} is {step.state}"
        if step.step_id.startswith("model:"):
            message = step.result["message"]
            blocks = [(b["type"], b.get("text"), b.get("id"), b.get("name"), json.dumps(b.get("input"))) for b in message["content"]]
            out.append((step.step_id, message["stop_reason"], blocks))
        else:
            out.append((step.step_id, step.result["is_error"], step.result["content"]))
    return out


class References:
    """The transcripts of the same runs never interrupted: started at once on threads of this
    process (on a memory store, against ``reference_server``), gathered by ``transcripts()``;
    they run while the test's own runs wait for their processes and workers."""

    def __init__(self, server: MessagesAPIServer, tmp_path: Path, run_ids: list[str]) -> None:
        self.store = f"memory://worker-reference-{uuid.uuid4().hex}"
        self.run_ids = run_ids
        self.failures: list[str] = []  # a thread's error is kept and shown, never lost
        ws = workspace(tmp_path / "reference-workspace")
        self._threads = [threading.Thread(target=self._one, args=(server.url, str(ws), r)) for r in run_ids]
        for thread in self._threads:
            thread.start()

    def _one(self, url: str, ws: str, run_id: str) -> None:
        try:
            start(self.store, ws, run_id, base_url=url, api_key="sk-test-worker")
        except Exception as e:
            self.failures.append(f"{run_id}: {type(e).__name__}: {e}")

    def transcripts(self) -> dict[str, Any]:
        for thread in self._threads:
            thread.join(60)
        assert not self.failures, self.failures
        return {r: transcript(read_run(r, self.store)) for r in self.run_ids}


def assert_each_step_and_effect_once(store: str, ws: Path, run_ids: list[str]) -> dict[str, RunRecord]:
    records = {r: read_run(r, store) for r in run_ids}
    for run_id, record in records.items():
        assert record.summary.status == "completed", (run_id, record.summary.status, record.summary.error)
        results = Counter(e.step for e in record.events if isinstance(e, StepCompleted))
        assert set(results.values()) == {1}, f"{run_id}: steps recorded twice: {results}"
    ledger = Counter((ws / "ledger.txt").read_text().splitlines())
    assert ledger == Counter([f"{r}:{x}" for r in run_ids for x in "ab"])
    return records


@pytest.mark.slow(15)
@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_two_workers_resume_killed_runs_and_one_worker_dies(
    kind: str, tmp_path: Path, server: MessagesAPIServer, reference_server: MessagesAPIServer
) -> None:
    expected = References(reference_server, tmp_path, RUNS)
    store = make_store_url(kind, tmp_path)
    ws = workspace(tmp_path / "workspace")
    env = subprocess_env(ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="sk-test-worker")
    starters = start_runs(store, ws, env, [RUNS[:10], RUNS[10:]])
    wait_until(lambda: waiting(server, 2) == set(RUNS), "every run to wait for its third reply", alive=tuple(starters))
    for proc in starters:
        kill(proc)
    assert {s.run_id: s.status for s in list_runs(store)} == dict.fromkeys(RUNS, "interrupted")

    # Worker A has a key of its own, so that the server can keep its replies back (PerRun.hold_key).
    a = worker(store, {**env, "ANTHROPIC_API_KEY": "sk-test-worker-a"}, tmp_path / "a.out")
    b = worker(store, env, tmp_path / "b.out", "--concurrency", "4")
    routes = server.scenario
    assert isinstance(routes, PerRun)
    try:
        with opened(store) as s:

            def held_by(proc: subprocess.Popen[str]) -> set[str]:
                return {r for r in RUNS if (s.holder(r) or {}).get("pid") == proc.pid}

            def a_waits_halfway() -> bool:
                # The server's records first: they cost nothing, where reading every run costs CPU
                # the two cores need for the workers. From half-way on, A's calls get no reply, so
                # a run A holds stays in its model call until the kill, however slow the machine.
                if answered(server, 3) < len(RUNS) // 2 or not held_by(b):
                    return False
                routes.hold_key = "sk-test-worker-a"
                held = held_by(a)
                return bool(held) and held <= waiting(server, 2) | waiting(server, 3) and held <= kept_back(server, routes)

            wait_until(a_waits_halfway, "worker A to wait for a reply, with B at work and half the runs done", alive=(a, b))
            died_at = {r: 2 if r in waiting(server, 2) else 3 for r in held_by(a)}
            kill(a)
            wait_until(
                lambda: answered(server, 3) == len(RUNS) and all(x.status == "completed" for x in list_runs(s)),
                "worker B to complete every run",
                alive=(b,),
                every=0.1,
            )
            assert len(list_runs(s)) == len(RUNS)
        b.send_signal(signal.SIGTERM)
        assert b.wait(30) == 0, (tmp_path / "b.out").read_text()
    finally:
        for proc in (a, b):
            if proc.poll() is None:
                kill(proc)
    records = assert_each_step_and_effect_once(store, ws, RUNS)
    a_name, b_name = f"{HOST}:{a.pid}", f"{HOST}:{b.pid}"
    assert died_at, "worker A held no run when it was killed"
    for run_id, turn in died_at.items():
        starts = Counter(e.step for e in records[run_id].events if isinstance(e, StepStarted))
        # the starter's call (turn 2 only), A's call cut off by its kill, and B's that completed
        assert starts[f"model:{turn}"] == (3 if turn == 2 else 2), f"{run_id}: A's kill missed its model call: {starts}"
        assert records[run_id].summary.resumed_by == b_name
    assert {r.summary.resumed_by for r in records.values()} <= {a_name, b_name}
    listed = forkserver.run(
        [sys.executable, "-m", "nb_durable.cli", "runs", "--store", store], env=env, capture_output=True, text=True, check=True
    ).stdout
    assert "resumed by" in listed and b_name in listed
    assert "run(s) taken" in (tmp_path / "b.out").read_text()
    assert {r: transcript(records[r]) for r in RUNS} == expected.transcripts()


@pytest.mark.slow(8)
@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
def test_sigterm_stops_a_run_at_a_step_boundary_and_another_worker_completes_it(
    kind: str, tmp_path: Path, server: MessagesAPIServer, reference_server: MessagesAPIServer
) -> None:
    expected = References(reference_server, tmp_path, ["t0"])
    store = make_store_url(kind, tmp_path)
    ws = workspace(tmp_path / "workspace")
    env = subprocess_env(ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="sk-test-worker")
    (starter,) = start_runs(store, ws, env, [["t0"]])
    wait_until(lambda: waiting(server, 2) == {"t0"}, "the run to wait for its third reply", alive=(starter,))
    kill(starter)

    c = worker(store, env, tmp_path / "c.out")
    try:
        with opened(store) as s:
            wait_until(
                lambda: (s.holder("t0") or {}).get("pid") == c.pid and "t0" in waiting(server, 2) and asked(server, "t0", 2) == 2,
                "worker C to ask for the third reply again",
                alive=(c,),
            )
        c.send_signal(signal.SIGTERM)
        assert c.wait(30) == 0, (tmp_path / "c.out").read_text()
    finally:
        if c.poll() is None:
            kill(c)
    stopped = read_run("t0", store)
    c_name = f"{HOST}:{c.pid}"
    assert stopped.summary.status == "interrupted"
    assert stopped.summary.holder is None
    assert (stopped.summary.error or "").startswith(f"stopped by worker {c_name} before step model:3")
    assert stopped.summary.resumed_by == c_name
    assert {s.step_id: s.state for s in stopped.steps}["tool:2:0:toolu_t0_b"] == "completed"
    assert stopped.steps[-1].step_id == "model:3" and stopped.steps[-1].state == "interrupted"
    assert (ws / "ledger.txt").read_text() == "t0:a\nt0:b\n"

    d = forkserver.run(
        [sys.executable, "-m", "nb_durable.cli", "worker", "--store", store, "--once"],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )
    assert d.returncode == 0, d.stdout + d.stderr
    assert "t0: completed" in d.stdout
    records = assert_each_step_and_effect_once(store, ws, ["t0"])
    assert records["t0"].summary.resumed_by is not None and records["t0"].summary.resumed_by != c_name
    assert transcript(records["t0"]) == expected.transcripts()["t0"]
    from nb_durable.jupyter.runs_table import runs_table  # %agent_runs shows it too

    table = runs_table(store)
    assert "resumed by" in table._repr_html_() and str(records["t0"].summary.resumed_by) in table._repr_html_()
    assert str(records["t0"].summary.resumed_by) in repr(table)


def test_a_run_in_doubt_is_left_with_in_doubt_fail_and_skipped_by_default(
    tmp_path: Path, server: MessagesAPIServer
) -> None:
    """Killed inside ``run_bash``: ``--in-doubt fail`` leaves it; the default tells the model the outcome is unknown."""
    store = make_store_url("sqlite", tmp_path)
    ws = workspace(tmp_path / "workspace")
    env = subprocess_env(ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="sk-test-worker")
    (starter,) = start_runs(store, ws, env, [["slow-d0"]])

    def bash_running() -> bool:
        try:
            steps = read_run("slow-d0", store).steps
        except Exception:
            return False
        return any(s.step_id.startswith("tool:0:") and s.state == "in_doubt" for s in steps)

    wait_until(bash_running, "run_bash to start", alive=(starter,))
    kill(starter)
    assert read_run("slow-d0", store).summary.status == "in_doubt"

    def once(*extra: str) -> subprocess.CompletedProcess[str]:
        return forkserver.run(
            [sys.executable, "-m", "nb_durable.cli", "worker", "--store", store, "--once", *extra],
            env=env, capture_output=True, text=True, timeout=120, check=False,
        )

    left = once("--in-doubt", "fail")
    assert left.returncode == 0 and "0 run(s) taken" in left.stdout, left.stdout + left.stderr
    assert read_run("slow-d0", store).summary.status == "in_doubt"
    done = once("--trace")  # with OpenTelemetry (no provider configured: spans go nowhere, the run is unchanged)
    assert done.returncode == 0 and "slow-d0: completed" in done.stdout, done.stdout + done.stderr
    record = read_run("slow-d0", store)
    first = next(s for s in record.steps if s.step_id.startswith("tool:0:"))
    assert first.state == "skipped"
    answered = [r for r in server.requests if r.turn == 1 and r.outcome == "reply" and "slow-d0" in first_text(r)]
    result = answered[-1].messages[-1]["content"][0]
    assert result["is_error"] and "whether it took effect is unknown" in result["content"]
    assert not (ws / "ledger.txt").exists() or "slow-d0:a" not in (ws / "ledger.txt").read_text()
