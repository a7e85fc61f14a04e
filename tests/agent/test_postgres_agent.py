"""The agent on the shared PostgreSQL store: a real process SIGKILLed mid-run, resumed by
another, and runs copied between stores with the CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from nb_durable import read_run
from nb_durable.agent.models.demo import DEMO_TASK, prepare_demo_workspace
from tests import forkserver
from tests.conftest import subprocess_env
from tests.pg import postgres_url


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return forkserver.run(
        [sys.executable, "-m", "nb_durable.cli", *args],
        capture_output=True,
        text=True,
        env=subprocess_env(NB_DURABLE_DEMO_LATENCY="0.2"),
        timeout=180,
        check=False,
    )


@pytest.mark.postgres
def test_an_agent_killed_mid_run_on_postgres_resumes_in_another_process(tmp_path: Path) -> None:
    store = postgres_url()
    workspace = prepare_demo_workspace(tmp_path / "project")
    killed = cli("run", "--demo", "--run", "pg", "--workspace", str(workspace), "--store", store, "--kill-at", "7", DEMO_TASK)
    assert killed.returncode == -9, killed.stderr
    assert read_run("pg", store).summary.status == "in_doubt"
    resumed = cli("resume", "pg", "--store", store)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.count(" replayed ") == 6 and "skipped   run_bash" in resumed.stdout
    record = read_run("pg", store)
    assert record.summary.status == "completed" and record.summary.steps == 14
    fixed = subprocess.run([sys.executable, "-m", "unittest", "-q"], cwd=workspace, capture_output=True, check=False)
    assert fixed.returncode == 0

    copied = cli("copy", store, str(tmp_path / "jsonl"))
    assert copied.returncode == 0 and "copied pg" in copied.stdout
    assert [e.kind for e in read_run("pg", tmp_path / "jsonl").events] == [e.kind for e in record.events]
    again = cli("copy", store, str(tmp_path / "jsonl"))
    assert again.returncode != 0 and "already" in again.stderr
