"""Real agent processes, SIGKILLed at random moments, resume to the transcript of a run never killed.

What is proven, over ``TRIALS`` trials with a seeded RNG (the seed is printed, and named in
every failure; ``NB_DURABLE_CRASH_SEED`` replays another):

* An agent process (``agent_worker.py``: ``run_agent``/``resume_agent``, the real SDK, the
  loopback Messages API of this process via ``ANTHROPIC_BASE_URL``) is killed with SIGKILL at
  a random time, restarted, killed again, ..., until a session completes. Kills land during
  model calls (the server answers after a delay and streams slowly) and during tool calls (the
  ledger service takes time on both sides of its effect, and one trial in four aims its
  first kill at a ledger call); the tally is asserted.
* The final transcript equals the uninterrupted run's: every recorded step id, every model
  reply (text, tool_use ids, names, inputs, stop reason), every tool result, the final text,
  and the whole conversation of the last request the server received, to the letter: a
  ``write_file`` cut off after its effect runs again (it is idempotent) and reports exactly
  what the first run would have.
* The server never received a request for a turn after that turn was completed
  (``turn_stats().repeats == 0``), and never a request with an unanswered tool_use
  (``server.rejected`` is empty).
* Idempotent effects happen once: the ledger (a service that deduplicates by ``context.key``)
  holds each key exactly once, the files written hold exactly the expected bytes, and the
  workspace holds nothing else (a ``write_file`` killed before its rename leaves a temporary
  file that its re-run removes).

Restarts go through the fork server (``tests/forkserver.py``) so that dozens of kills cost
seconds, not the 1-3 s each process would spend importing ``anthropic``; the deterministic
test at the end uses plain ``python agent_worker.py`` processes. It kills a worker exactly
while ``run_bash`` (an external effect) runs: the command dies with it, and the resumed run
applies the default in-doubt policy, skip: the model's next request answers the tool_use with
an ``is_error`` result saying the outcome is unknown.
"""

from __future__ import annotations

import json
import os
import queue
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from nb_durable.core.events import Decision, StepStarted
from nb_durable.core.runs import RunRecord, read_run
from tests import forkserver
from tests.agent.agent_worker import SERVICE_DELAY, ledger_entries, receipt
from tests.conftest import subprocess_env
from tests.fakes import Delay, MessagesAPIServer, ScriptedScenario, reply, tool_use

WORKER = Path(__file__).with_name("agent_worker.py")
SEED = int(os.environ.get("NB_DURABLE_CRASH_SEED", "20250611"))
TRIALS = 32
MAX_KILLS = 3
RUN_ID = "crash-trial"
MODEL_DELAY = 0.06  # before each reply; then the reply streams with EVENT_DELAY between events
EVENT_DELAY = 0.003

NOTES = "Q3 notes\n- ship the durable agent\n- fix the flaky tests\n"
SUMMARY = "Summary of notes.txt: ship the durable agent, fix the flaky tests.\n"
REPORT = "# Report\n\nTwo goals this quarter: ship the durable agent and fix the flaky tests.\n"
FILES = {"notes.txt": NOTES, "summary.txt": SUMMARY, "out/report.md": REPORT}
LEDGER = {
    f"{RUN_ID}:tool:2:1:toolu_l1": "summary written",
    f"{RUN_ID}:tool:4:1:toolu_l2": "report written",
    f"{RUN_ID}:tool:5:0:toolu_l3": "task done",
}
FINAL = "Done: summary.txt and out/report.md are written, and the ledger has three entries."
STEPS = 15  # 7 model calls and 8 tool calls


def scenario() -> ScriptedScenario:
    """Seven turns that use only tools whose re-run is harmless."""
    turns = [
        reply("Let me look at the workspace.", tool_use("list_dir", {"path": "."}, id="toolu_ls")),
        reply("Reading the notes.", tool_use("read_file", {"path": "notes.txt"}, id="toolu_read")),
        reply(
            "Writing the summary, then recording it.",
            tool_use("write_file", {"path": "summary.txt", "content": SUMMARY}, id="toolu_w1"),
            tool_use("record_entry", {"entry": "summary written"}, id="toolu_l1"),
        ),
        reply("Now the report.", tool_use("write_file", {"path": "out/report.md", "content": REPORT}, id="toolu_w2")),
        reply(
            "Checking it, and recording it.",
            tool_use("read_file", {"path": "out/report.md"}, id="toolu_check"),
            tool_use("record_entry", {"entry": "report written"}, id="toolu_l2"),
        ),
        reply("One last ledger entry.", tool_use("record_entry", {"entry": "task done"}, id="toolu_l3")),
        reply(FINAL),
    ]
    for turn in turns:
        turn.event_delay = EVENT_DELAY
    return ScriptedScenario([Delay(MODEL_DELAY, turn) for turn in turns])


# --- what a run left behind, normalized for comparison ---------------------------------------

def tool_text(content: str) -> tuple[str, ...]:
    """A tool result's text, as compared."""
    return ("text", content)


def blocks(content: Any) -> list[tuple[Any, ...]]:
    """Message content as comparable tuples (tool_result text normalized like tool_text)."""
    if isinstance(content, str):
        return [("text", content)]
    out: list[tuple[Any, ...]] = []
    for b in content:
        if b["type"] == "text":
            out.append(("text", b["text"]))
        elif b["type"] == "tool_use":
            out.append(("tool_use", b["id"], b["name"], json.dumps(b["input"], sort_keys=True)))
        elif b["type"] == "tool_result":
            out.append(("tool_result", b["tool_use_id"], bool(b.get("is_error")), tool_text(b["content"])))
        else:
            out.append((b["type"],))
    return out


def transcript(record: RunRecord) -> list[tuple[Any, ...]]:
    """Every recorded step: its id and its result (model replies without ids, usage, request ids)."""
    out: list[tuple[Any, ...]] = []
    for step in record.steps:
        assert step.state == "completed", f"step {step.step_id} is {step.state}"
        if step.step_id.startswith("model:"):
            message = step.result["message"]
            out.append((step.step_id, message["stop_reason"], blocks(message["content"])))
        else:
            out.append((step.step_id, step.result["is_error"], tool_text(step.result["content"])))
    return out


def final_conversation(server: MessagesAPIServer) -> list[tuple[str, list[tuple[Any, ...]]]]:
    """The conversation of the last request the server answered."""
    answered = [r for r in server.requests if r.outcome == "reply"]
    return [(m["role"], blocks(m["content"])) for m in answered[-1].messages]


def interrupted_steps(record: RunRecord) -> list[str]:
    """Steps started more than once: a kill landed while they ran (or their intent was torn)."""
    starts = Counter(e.step for e in record.events if isinstance(e, StepStarted))
    return [step for step, n in starts.items() if n > 1 for _ in range(n - 1)]


def workspace_files(workspace: Path) -> dict[str, str]:
    """The workspace's files by relative path (hidden ones too)."""
    return {
        str(path.relative_to(workspace)): path.read_text() for path in sorted(workspace.rglob("*")) if not path.is_dir()
    }


def assert_server_clean(server: MessagesAPIServer) -> None:
    """No unanswered tool_use was ever sent; no completed turn was ever asked again."""
    assert not server.rejected, [(r.turn, r.error_message) for r in server.rejected]
    stats = server.turn_stats()
    repeats = {turn: s.repeats for turn, s in stats.items() if s.repeats}
    assert not repeats, f"turns requested again after they completed: {repeats}"


# --- trials ---------------------------------------------------------------------------------


@dataclass
class Outcome:
    """What one trial saw, for the assertions and the summary line."""

    trial: int
    kills: int = 0
    landed: list[str] = field(default_factory=list)
    sessions: int = 0
    seconds: float = 0.0
    transcript: list[tuple[Any, ...]] = field(default_factory=list)
    conversation: list[Any] = field(default_factory=list)
    text: str = ""
    service_calls: int = 0
    deduplicated: int = 0


def completed_steps(store: Path) -> int:
    """How many steps the run's log has completed (read without parsing: it may end torn)."""
    try:
        return (store / f"{RUN_ID}.jsonl").read_bytes().count(b'"kind":"step_completed"')
    except FileNotFoundError:
        return 0


class Zygote:
    """Sessions of ``agent_worker.py`` forked by the fork server: start one, wait for its end."""

    def __init__(self) -> None:
        self.sessions: dict[int, subprocess.Popen[bytes]] = {}

    def start(self, args: list[str], env: dict[str, str], out: Path) -> int:
        """Fork a session with ``args`` and extra ``env``, its output to ``out``; its pid."""
        with open(out, "ab") as f:
            proc = forkserver.Popen(
                [sys.executable, str(WORKER), *args], env=subprocess_env(**env), stdin=subprocess.DEVNULL,
                stdout=f, stderr=subprocess.STDOUT,
            )  # fmt: skip
        self.sessions[proc.pid] = proc
        return proc.pid

    def wait(self, pid: int, timeout: float) -> int | None:
        """The session's exit status if it ends within ``timeout`` seconds, else None."""
        try:
            return self.sessions[pid].wait(timeout)
        except subprocess.TimeoutExpired:
            return None


def wait_for_call(zygote: Zygote, pid: int, ledger: Path, n: int) -> int | None:
    """Wait until the ledger service has received ``n`` calls; the exit status if the agent ended first."""
    calls = ledger.with_name(ledger.name + ".calls")
    deadline = time.monotonic() + 60
    while not (calls.exists() and calls.read_bytes().count(b"\n") >= n):
        status = zygote.wait(pid, 0.005)
        if status is not None or time.monotonic() > deadline:
            return status
    return None


def prepare(folder: Path) -> tuple[Path, Path, Path]:
    workspace = folder / "workspace"
    workspace.mkdir(parents=True)
    (workspace / "notes.txt").write_text(NOTES)
    return folder / "runs", workspace, folder / "ledger.tsv"


def run_trial(zygote: Zygote, folder: Path, trial: int, horizon: float | None) -> Outcome:
    """Run the scenario to completion, killing the agent at random times (none if no horizon)."""
    rng = random.Random(SEED * 1000 + trial)
    planned = rng.randint(1, MAX_KILLS) if horizon else 0
    store, workspace, ledger = prepare(folder)
    outcome = Outcome(trial)
    args = [str(store), str(workspace), str(ledger), RUN_ID]
    out = folder / "worker.out"
    started = time.monotonic()
    with MessagesAPIServer(scenario()) as server:
        env = {"ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": "test-key"}
        while True:
            outcome.sessions += 1
            assert outcome.sessions <= planned + 1, "a session that was not killed did not complete"
            pid = zygote.start(args, env, out)
            status: int | None = None
            if horizon and outcome.kills < planned:
                if outcome.kills == 0 and trial % 4 == 3:
                    # Aimed at the ledger service: while its n-th call runs, before or after its effect.
                    status = wait_for_call(zygote, pid, ledger, rng.randint(1, len(LEDGER)))
                    if status is None:
                        # The effect comes SERVICE_DELAY into the call, the answer as much after it.
                        before, after = (0.0, 0.8) if trial % 8 == 3 else (1.2, 1.9)
                        status = zygote.wait(pid, rng.uniform(before, after) * SERVICE_DELAY)
                else:
                    # The first kill comes early, so that it lands (a trial it misses is run
                    # again); a later one anywhere in what is left (replay takes almost no time).
                    left = 0.6 if outcome.kills == 0 else max(0.2, 1 - completed_steps(store) / STEPS)
                    status = zygote.wait(pid, rng.uniform(0.0, horizon * left))
                if status is None:
                    os.kill(pid, signal.SIGKILL)
                    status = zygote.wait(pid, 30)
            if status is None:
                status = zygote.wait(pid, 60)
            if status == -signal.SIGKILL:
                outcome.kills += 1
                continue
            said = out.read_text()
            assert status == 0, f"the agent exited with {status}:\n{said}"
            result = json.loads(said.strip().splitlines()[-1])
            assert result["status"] == "completed", result
            outcome.text = result["text"]
            break
        outcome.seconds = time.monotonic() - started
        assert_server_clean(server)
        stats = server.turn_stats()
        assert sorted(stats) == list(range(7)), sorted(stats)
        assert all(stats[t].completed for t in range(6)), "a turn's reply never reached the next request"
        outcome.conversation = final_conversation(server)
    record = read_run(RUN_ID, store)
    assert record.summary.status == "completed"
    outcome.transcript = transcript(record)
    outcome.landed = interrupted_steps(record)
    entries = ledger_entries(ledger)
    assert dict(entries) == LEDGER and len(entries) == len(LEDGER), f"the ledger holds {entries}"
    calls = ledger.with_name(ledger.name + ".calls").read_text().split()
    assert set(calls) == set(LEDGER), calls
    outcome.service_calls = len(calls)
    dedup = ledger.with_name(ledger.name + ".dedup")
    outcome.deduplicated = len(dedup.read_text().split()) if dedup.exists() else 0
    files = workspace_files(workspace)
    assert files == FILES, f"the workspace holds {sorted(files)}"
    return outcome


@pytest.fixture(scope="module")
def zygotes() -> Iterator[queue.Queue[Zygote]]:
    """Two starters of sessions: trials run two at a time (the machine has two cores)."""
    available: queue.Queue[Zygote] = queue.Queue()
    for _ in range(2):
        available.put(Zygote())
    yield available


@pytest.mark.slow(60)
def test_random_sigkills_always_converge_to_the_uninterrupted_transcript(
    zygotes: queue.Queue[Zygote], tmp_path: Path
) -> None:
    print(f"crash-resume trials: seed {SEED} (set NB_DURABLE_CRASH_SEED to replay another)")
    z = zygotes.get()
    try:
        reference = run_trial(z, tmp_path / "reference", -1, None)
    finally:
        zygotes.put(z)
    assert reference.sessions == 1 and reference.kills == 0 and not reference.landed
    assert reference.text == FINAL
    assert reference.service_calls == 3 and reference.deduplicated == 0
    assert [step for step, *_ in reference.transcript] == [
        "model:0", "tool:0:0:toolu_ls", "model:1", "tool:1:0:toolu_read",
        "model:2", "tool:2:0:toolu_w1", "tool:2:1:toolu_l1", "model:3", "tool:3:0:toolu_w2",
        "model:4", "tool:4:0:toolu_check", "tool:4:1:toolu_l2", "model:5", "tool:5:0:toolu_l3", "model:6",
    ]  # fmt: skip
    assert reference.transcript[3][2] == ("text", NOTES)
    assert reference.transcript[6][2] == ("text", f"ledger entry 'summary written' recorded (receipt {receipt(f'{RUN_ID}:tool:2:1:toolu_l1')})")
    horizon = reference.seconds

    def trial(n: int) -> Outcome:
        z = zygotes.get()
        try:
            # A run that finished before its first kill (a quick moment of the machine) is run
            # again with kills earlier, so that every trial is killed at least once.
            for attempt in range(4):
                outcome = run_trial(z, tmp_path / f"trial-{n:02d}-{attempt}", n, horizon / 2**attempt)
                if outcome.kills:
                    break
            return outcome
        except AssertionError as e:
            raise AssertionError(f"trial {n} (seed {SEED}): {e}") from e
        finally:
            zygotes.put(z)

    with ThreadPoolExecutor(2) as pool:
        outcomes = list(pool.map(trial, range(TRIALS)))

    for o in outcomes:
        where = f"trial {o.trial} (seed {SEED}, {o.kills} kills, landed in {o.landed})"
        assert o.kills >= 1, f"{where}: no kill landed"
        assert o.transcript == reference.transcript, where
        assert o.conversation == reference.conversation, where
        assert o.text == reference.text, where
    landed = Counter(step.split(":")[0] for o in outcomes for step in o.landed)
    kills = sum(o.kills for o in outcomes)
    print(
        f"{len(outcomes)} trials, {kills} SIGKILLs, {sum(o.sessions for o in outcomes)} sessions; kills caught in "
        f"flight: {dict(landed)} (the rest hit pure tools, replay or the gaps between steps); ledger calls "
        f"re-executed: {sum(o.service_calls - 3 for o in outcomes)}, of which the service deduplicated "
        f"{sum(o.deduplicated for o in outcomes)}"
    )
    assert landed["model"] >= 3, f"kills never landed during model calls (seed {SEED}): {dict(landed)}"
    assert sum(o.deduplicated for o in outcomes) >= 1, f"no kill landed after a ledger effect (seed {SEED})"
    assert landed["tool"] >= 4, f"kills seldom landed during tool calls (seed {SEED}): {dict(landed)}"


# --- a kill during run_bash: the in-doubt policy --------------------------------------------


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.slow(15)
def test_a_kill_during_run_bash_leaves_its_outcome_unknown_and_the_model_is_told(tmp_path: Path) -> None:
    store, workspace, ledger = prepare(tmp_path)
    command = "echo $$ > bash.pid; sleep 30; echo finished > finished.txt"
    turns = [
        reply("Deploying.", tool_use("run_bash", {"command": command}, id="toolu_bash")),
        reply("The deploy's outcome is unknown: I will check before deploying again."),
    ]
    with MessagesAPIServer(ScriptedScenario(turns)) as server:
        env = subprocess_env(ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="test-key")
        args = [sys.executable, str(WORKER), str(store), str(workspace), str(ledger), RUN_ID]
        first = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        pid_file = workspace / "bash.pid"
        deadline = time.monotonic() + 60
        while not pid_file.exists() or not pid_file.read_text().strip():
            assert first.poll() is None, first.communicate()
            assert time.monotonic() < deadline, "the command never started"
            time.sleep(0.02)
        bash_pid = int(pid_file.read_text())
        first.kill()  # SIGKILL, while the command runs
        first.communicate(timeout=30)
        assert first.returncode == -signal.SIGKILL
        deadline = time.monotonic() + 10
        while _alive(bash_pid):
            assert time.monotonic() < deadline, "the command outlived the agent that started it"
            time.sleep(0.02)
        assert read_run(RUN_ID, store).summary.status == "in_doubt"

        second = subprocess.run(args, env=env, capture_output=True, text=True, timeout=120, check=False)
        assert second.returncode == 0, second.stderr
        assert json.loads(second.stdout)["status"] == "completed"
        assert_server_clean(server)
        assert len(server.requests_at(0)) == 1, "the answered turn was asked again"
        answer = server.requests_at(1)[-1].messages[-1]["content"]
    assert len(answer) == 1 and answer[0]["tool_use_id"] == "toolu_bash"
    assert answer[0]["is_error"] is True
    assert "died" in answer[0]["content"] and "unknown" in answer[0]["content"]
    assert not (workspace / "finished.txt").exists()
    record = read_run(RUN_ID, store)
    decisions = [(e.step, e.decision, e.by) for e in record.events if isinstance(e, Decision)]
    assert decisions == [("tool:0:0:toolu_bash", "skip", "policy")]
    assert [s.state for s in record.steps] == ["completed", "skipped", "completed"]
