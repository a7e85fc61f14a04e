"""``nb-durable worker --max-deaths N``: a run that kills every worker resuming it is set aside, failed.

Real processes: each worker is ``nb-durable worker --once`` in a process of its own, against this
test's loopback Messages API through the real SDK. The run's second model call kills the process
that makes it (SIGKILL, from the server, while the request is in flight: as an OOM kill or a
segfault in the step would), so every take of it dies in that step.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from nb_durable.agent.fleet.batch import submit
from nb_durable.core.events import StepStarted
from nb_durable.core.runs import read_run, read_summary
from tests import forkserver
from tests.conftest import make_store_url, subprocess_env
from tests.fakes import Action, Delay, MessagesAPIServer, RecordedRequest, Scenario, reply, tool_use

MODEL = "claude-test-1"  # made up: real names near end of life raise DeprecationWarning
RUN = "doom"


class Killing(Scenario):
    """Turn 0 reads a file; turns listed in ``kills`` SIGKILL ``victim`` (the worker that asked)
    the first ``kills[turn]`` times they are asked; then the run reads again and ends."""

    def __init__(self, kills: dict[int, int]) -> None:
        self.kills = dict(kills)
        self.victim: int | None = None

    def action(self, request: RecordedRequest) -> Action:
        turn = request.turn or 0
        turns = [
            reply("Reading the notes.", tool_use("read_file", {"path": "notes.txt"}, id="toolu_r0")),
            reply("Reading them again.", tool_use("read_file", {"path": "notes.txt"}, id="toolu_r1")),
            reply("Once more.", tool_use("read_file", {"path": "notes.txt"}, id="toolu_r2")),
            reply("Done."),
        ]
        if self.kills.get(turn, 0) > 0 and self.victim is not None:
            self.kills[turn] -= 1
            os.kill(self.victim, signal.SIGKILL)  # the process dies inside its model call
            return Delay(60.0, turns[turn])
        return turns[turn]


def queue(store: str, ws: Path) -> None:
    ws.mkdir()
    (ws / "notes.txt").write_text("the notes\n")
    submit("Read the notes.", store=store, run_id=RUN, model=MODEL, workspace=str(ws), max_tokens=512, environ={"ANTHROPIC_API_KEY": "sk-test"})


def worker_once(store: str, env: dict[str, str], scenario: Killing, *extra: str) -> tuple[int, str]:
    """One ``worker --once`` pass; the scenario kills this process when it asks a killing turn."""
    proc = forkserver.Popen(
        [sys.executable, "-m", "nb_durable.cli", "worker", "--store", store, "--once", *extra],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    scenario.victim = proc.pid
    out, _ = proc.communicate(timeout=60)
    return proc.returncode, out


def model_starts(store: str) -> list[str]:
    """The model steps the run started, one per live attempt, in log order."""
    return [e.step for e in read_run(RUN, store).events if isinstance(e, StepStarted) and e.step.startswith("model:")]


@pytest.mark.slow(8)
@pytest.mark.parametrize("kind", ["sqlite", "jsonl", "postgres"])
def test_a_run_that_kills_every_worker_is_failed_after_max_deaths_and_a_person_may_resume_it(kind: str, tmp_path: Path) -> None:
    scenario = Killing({1: 3})
    store = make_store_url(kind, tmp_path)
    with MessagesAPIServer(scenario) as server:
        env = subprocess_env(ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="sk-test-worker")
        queue(store, tmp_path / "ws")
        for _ in range(3):
            code, out = worker_once(store, env, scenario, "--max-deaths", "3")
            assert code == -signal.SIGKILL, out
        scenario.kills[1] = 1  # a worker that took it now would die too
        code, out = worker_once(store, env, scenario, "--max-deaths", "3")
        assert code == 0, out
        assert f"{RUN}: failed: set aside by worker " in out, out
        assert "taken 3 times in a row by processes that died before it recorded another step" in out, out
        assert "(the last at model turn 1)" in out, out
        assert f"nb-durable resume {RUN}" in out, out
        summary = read_summary(RUN, store)
        assert summary.status == "failed"
        assert summary.error is not None and "taken 3 times in a row" in summary.error
        assert model_starts(store) == ["model:0", "model:1", "model:1", "model:1"]  # no further step ran
        asked = len(server.requests)

        code, out = worker_once(store, env, scenario, "--max-deaths", "3")  # a later worker leaves it
        assert code == 0 and "0 run(s) taken" in out, out
        assert len(server.requests) == asked and read_summary(RUN, store).status == "failed"

        scenario.kills[1] = 0
        resumed = subprocess.run(
            [sys.executable, "-m", "nb_durable.cli", "resume", RUN, "--store", store],
            env=env, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr  # a person is never refused
        assert read_summary(RUN, store).status == "completed"


def test_a_recorded_step_starts_the_count_again(tmp_path: Path) -> None:
    scenario = Killing({1: 1, 2: 1})  # one death at model:1, a step recorded, one at model:2
    store = make_store_url("sqlite", tmp_path)
    with MessagesAPIServer(scenario) as server:
        env = subprocess_env(ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="sk-test-worker")
        queue(store, tmp_path / "ws")
        code, out = worker_once(store, env, scenario, "--max-deaths", "2")
        assert code == -signal.SIGKILL, out
        code, out = worker_once(store, env, scenario, "--max-deaths", "2")  # records model:1, dies at model:2
        assert code == -signal.SIGKILL, out
        code, out = worker_once(store, env, scenario, "--max-deaths", "2")
        assert code == 0 and f"{RUN}: completed" in out, out
        assert read_summary(RUN, store).status == "completed"
        assert model_starts(store) == ["model:0", "model:1", "model:1", "model:2", "model:2", "model:3"]
        assert server.requests
