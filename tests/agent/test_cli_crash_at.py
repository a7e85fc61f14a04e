"""``--crash-at N`` kills the run in step N, whatever kind of step N is, and says so truly.

The agent demo's first process is ``nb-durable run --demo --kill-at N`` (SIGKILL from inside);
at latency 0 every step is quicker than the kill's moment, so a kill that waited for it would
land in a later step. Here the log a kill leaves holds exactly the N-1 steps before step N
(and step N's intent, for a step with an effect), and the words printed name step N. A step
past the end is refused before anything runs, with the range derived from a run not killed;
a step that is not a whole number gets the wording every whole-number flag gives. The demo's
closing words say how many steps the second process replayed (none, killed in step 1).
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

from nb_durable.agent.models.demo import DEMO_TASK, prepare_demo_workspace
from nb_durable.core.events import StepStarted
from nb_durable.core.runs import read_run
from tests.conftest import nb_durable_cli

TITLES = {1: "model turn 0", 2: "list_dir", 4: "read_file", 5: "read_file", 7: "run_bash", 9: "write_file", 12: "model turn 5"}


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return nb_durable_cli(*args, cwd=cwd, NB_DURABLE_DEMO_LATENCY="0", TMPDIR=str(cwd))


@pytest.mark.slow(10)
def test_the_kill_lands_in_step_n_for_every_kind_of_step(tmp_path: Path) -> None:
    for n, title in TITLES.items():
        prepare_demo_workspace(tmp_path / f"ws{n}")
        killed = cli("run", "--demo", "--run", f"k{n}", "--workspace", f"ws{n}", "--kill-at", str(n), DEMO_TASK, cwd=tmp_path)
        assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
        assert f"killed (SIGKILL) in the middle of {title} (step {n}," in killed.stdout, killed.stdout
        record = read_run(f"k{n}", tmp_path / "runs")
        done = [s for s in record.steps if s.state == "completed"]
        assert len(done) == n - 1, f"--kill-at {n} ({title}) died after {len(done)} completed steps"
        started = [e.step for e in record.events if isinstance(e, StepStarted)]
        if title in ("run_bash", "write_file"):
            assert started[-1] == record.steps[-1].step_id and record.steps[-1].state != "completed"


def test_the_demo_banner_names_the_step_the_kill_lands_in(tmp_path: Path) -> None:
    done = cli("demo", "--crash-at", "4", "--latency", "0", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    first = done.stdout.partition("second process:")[0]
    assert "to be killed in step 4;" in first
    assert "killed (SIGKILL) in the middle of read_file (step 4, a tool step)" in first, first
    assert "the second process replayed the first one's 3 steps without executing them" in done.stdout


def test_a_demo_killed_in_its_first_step_says_the_second_process_replayed_nothing(tmp_path: Path) -> None:
    done = cli("demo", "--crash-at", "1", "--latency", "0", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "the first process was killed before it recorded any step, so the second ran them all" in done.stdout
    assert "replayed the first one's" not in done.stdout


@pytest.mark.slow(8)
def test_a_crash_past_the_end_is_refused_before_anything_runs_with_the_real_range(tmp_path: Path) -> None:
    prepare_demo_workspace(tmp_path / "ws")
    whole = cli("run", "--demo", "--run", "whole", "--workspace", "ws", DEMO_TASK, cwd=tmp_path)
    assert whole.returncode == 0, whole.stderr
    steps = read_run("whole", tmp_path / "runs").summary.steps
    done = cli("demo", "--crash-at", str(steps + 1), cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"choose --crash-at from 1 to {steps}" in done.stderr, done.stderr
    assert "first process" not in done.stdout, "the demo ran before refusing"
    assert cli("demo", "--crash-at", str(steps), "--latency", "0", cwd=tmp_path).returncode == 0


def test_every_whole_number_flag_says_the_same_plain_words(tmp_path: Path) -> None:
    for args, flag in [
        (["demo", "--crash-at", "abc"], "--crash-at"),
        (["worker", "--concurrency", "abc"], "--concurrency"),
        (["fork", "a", "b", "--at", "abc"], "--at"),
        (["run", "x", "--max-turns", "abc"], "--max-turns"),
    ]:
        done = cli(*args, cwd=tmp_path)
        assert done.returncode == 2
        assert f"argument {flag}: must be a whole number (such as 3), not 'abc'" in done.stderr, done.stderr


def test_a_run_killed_in_doubt_reads_in_doubt_in_words_in_show_and_its_export(tmp_path: Path) -> None:
    prepare_demo_workspace(tmp_path / "ws")
    cli("run", "--demo", "--run", "k", "--workspace", "ws", "--kill-at", "7", DEMO_TASK, cwd=tmp_path)  # in run_bash
    shown = cli("show", "k", cwd=tmp_path)
    assert shown.stdout.startswith("run k: in doubt, 7 steps"), shown.stdout
    exported = cli("export", "k", "-o", "k.ipynb", cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr
    notebook = (tmp_path / "k.ipynb").read_text()
    assert "**Status:** in doubt" in notebook and "in_doubt ·" not in notebook
