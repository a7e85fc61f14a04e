"""``nb-durable`` as a user runs it: a subprocess per command, judged by exit code and output.

Proven here, each with ``python -m nb_durable.cli`` in a process of its own (forked by
``tests/forkserver.py``; the interpreter's own start-up is what ``test_readme.py`` runs):

* ``run --demo`` completes (0) with a progress line per step, all live; the same task again
  replays every step (no live line) and pays nothing. ``runs`` lists it as completed; ``show``
  prints its timeline; ``export -o`` writes a notebook that nbformat validates, holding the
  task and the tool outputs; ``fork --at 3`` then ``resume`` completes, replaying exactly 3
  steps. ``demo`` (the README's main job) kills a run and resumes it, and says it completed.
* ``resume`` without an id picks the most recently updated unfinished run, then the next one,
  then says there is none (2).
* A run whose reader goes away (``| head``, stderr too) goes on to its end and exits with its
  outcome (it stopped at the next line it printed, and exited 0).
* ``show`` and ``export`` without an id take the run updated last (not the first by name), and
  in a store with no run say so (2).
* Exit codes: 2 for an unknown run and for bad flags, with a message; 3 for a run whose lease
  another process holds (naming its pid), and the run resumes once that process is gone (a
  ``continue`` of an unfinished run being written is 3 too, not "resume it first"); 4
  for a run in doubt resumed with ``--in-doubt fail`` (its process was SIGKILLed during
  ``run_bash``), after which the default policy resumes it (0) and the model is told the
  outcome is unknown; 1 for a run the API refuses with a 401, with what to fix; 2 for
  ``fork --at`` past the end and a ``--workspace`` that is not a folder.
* The demos: ``--plain`` as the README gives it; a ``--crash-at`` out of range is refused
  (before anything runs, or, for a step the agent never reaches, saying nothing was killed);
  every demo reuses one folder, emptied first, and ``demo --clean`` removes it.
* ``--run NAME --new`` is NAME or, if NAME exists, refused; ``--new`` alone timestamps the id.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest

from nb_durable.agent import run_id_for
from nb_durable.agent.models.demo import DEMO_TASK, prepare_demo_workspace
from nb_durable.core.lease import FileLease
from tests import forkserver
from tests.conftest import subprocess_env
from tests.fakes import Error, MessagesAPIServer, ScriptedScenario, reply, tool_use
from tests.waiting import wait_until

MODEL = "claude-test-1"
DEMO_RUN = run_id_for(DEMO_TASK)
PROGRESS = re.compile(r"^  (live|replayed|skipped|retrying|failed)\s+(\S.*)$", re.M)


def cli(*args: str, cwd: Path, latency: str = "0", **env: str) -> subprocess.CompletedProcess[str]:
    """Run ``nb-durable ARGS`` in ``cwd`` (its default store is ``cwd/runs``)."""
    return forkserver.run(
        [sys.executable, "-m", "nb_durable.cli", *args],
        cwd=cwd,
        env=subprocess_env(NB_DURABLE_DEMO_LATENCY=latency, **env),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def states(output: str) -> list[str]:
    """The state of every progress line."""
    return [m.group(1) for m in PROGRESS.finditer(output)]


@dataclass
class DemoRun:
    folder: Path
    first: subprocess.CompletedProcess[str]
    again: subprocess.CompletedProcess[str]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    """The demo task run twice in one folder: live, then replayed."""
    folder = tmp_path_factory.mktemp("cli")
    first = cli("run", "--demo", DEMO_TASK, cwd=folder)
    again = cli("run", "--demo", DEMO_TASK, cwd=folder)
    return DemoRun(folder, first, again)


def test_run_demo_completes_with_live_progress_lines(demo: DemoRun) -> None:
    assert demo.first.returncode == 0, demo.first.stderr
    assert states(demo.first.stdout) == ["live"] * 12
    assert "live      run_bash" in demo.first.stdout and "$ python3 -m unittest" in demo.first.stdout
    assert f"run {DEMO_RUN} completed after 6 turns: 0 steps replayed, 12 live" in demo.first.stdout
    assert (demo.folder / "runs" / f"{DEMO_RUN}.jsonl").is_file()
    assert (demo.folder / "demo-workspace" / "calc.py").read_text().count("sorted(values)") == 1


def test_running_the_same_task_again_replays_it(demo: DemoRun) -> None:
    assert demo.again.returncode == 0, demo.again.stderr
    assert states(demo.again.stdout) == ["replayed"] * 12
    assert "12 steps replayed, 0 live." in demo.again.stdout
    assert "paid 0 tokens (simulated $0.0000)" in demo.again.stdout
    first_lines = [line.split(None, 1)[1] for line in demo.first.stdout.splitlines() if line.startswith("  live")]
    again_lines = [line.split(None, 1)[1] for line in demo.again.stdout.splitlines() if line.startswith("  replayed")]
    assert [a.split()[0] for a in again_lines] == [f.split()[0] for f in first_lines]


def test_the_demo_model_takes_no_model_and_says_so(demo: DemoRun) -> None:
    """--model was dropped without a word: a new run recorded model demo, and the same task with
    another --model replayed as if nothing differed (another --max-tokens was refused)."""
    refused = cli("run", "--demo", "--model", "claude-other", DEMO_TASK, cwd=demo.folder)
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr == (
        "nb-durable: --model must be left out with --demo: the offline demo model has no model choice "
        "(it records its model as demo), not claude-other\n"
    )
    assert refused.stdout == ""
    keyless = cli("run", "--model", "claude-other", DEMO_TASK, cwd=demo.folder)  # no key: the demo, by default
    assert keyless.returncode == 0, keyless.stderr
    assert "The model claude-other is not used: the demo model has no model choice." in keyless.stderr
    assert states(keyless.stdout) == ["replayed"] * 12


def test_a_demo_run_resumed_with_another_model_is_refused_not_recorded(demo: DemoRun) -> None:
    """``resume --model M`` of a demo run recorded 'settings change: model=M' while the demo went
    on answering: the log said a model answered that never did."""
    stopped = cli("run", "--demo", "--run", "short", "--max-turns", "2", DEMO_TASK, cwd=demo.folder)
    assert stopped.returncode != 0 and "resume with a higher --max-turns" in stopped.stderr, stopped.stderr
    before = (demo.folder / "runs" / "short.jsonl").read_bytes()
    for flag in (["--model", "claude-other"], ["--fallback-model", "claude-other"]):
        refused = cli("resume", "short", *flag, "--max-turns", "30", cwd=demo.folder)
        assert refused.returncode == 2, refused.stderr
        assert "of run 'short' cannot change: it runs on the offline demo model, which has no model choice" in refused.stderr
    assert (demo.folder / "runs" / "short.jsonl").read_bytes() == before, "nothing recorded"
    assert cli("resume", "short", "--max-turns", "30", cwd=demo.folder).returncode == 0


def test_runs_lists_the_run_with_its_status(demo: DemoRun) -> None:
    listed = cli("runs", cwd=demo.folder)
    assert listed.returncode == 0, listed.stderr
    row = next(line for line in listed.stdout.splitlines() if line.startswith(DEMO_RUN))
    assert row.split()[1:3] == ["completed", "12"]
    assert "The tests in this project fail" in row


def test_show_prints_the_timeline(demo: DemoRun) -> None:
    shown = cli("show", DEMO_RUN, cwd=demo.folder)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith(f"run {DEMO_RUN}: completed, 12 steps")
    assert f"task: {DEMO_TASK}" in shown.stdout
    lines = [line.split() for line in shown.stdout.splitlines() if line.startswith("  recorded")]
    assert [line[1] for line in lines] == [
        "model", "list_dir", "model", "read_file", "read_file", "model", "run_bash", "model", "write_file",
        "model", "run_bash", "model",
    ]  # fmt: skip
    assert "ordered = sorted(values)" in shown.stdout  # the final text


def test_show_and_export_without_a_run_take_the_run_updated_last(tmp_path: Path) -> None:
    empty = cli("show", cwd=tmp_path)
    assert empty.returncode == 2 and "Traceback" not in empty.stderr
    assert "no run in runs to show: it holds none yet." in empty.stderr, empty.stderr
    for run in ("alpha", "zeta"):  # the later run sorts last by name: it is picked for being newer
        (tmp_path / f"{run}.jsonl").write_text(json.dumps({"task": f"the {run} task", "run": run}) + "\n")
        assert cli("run", "--batch", f"{run}.jsonl", cwd=tmp_path).returncode == 0
    shown = cli("show", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("run zeta: queued, 0 steps"), shown.stdout
    exported = cli("export", cwd=tmp_path)
    assert exported.returncode == 0 and exported.stdout.strip() == "wrote zeta.ipynb", exported


@pytest.mark.parametrize("both", [False, True], ids=["stdout", "stdout-and-stderr"])
def test_a_run_whose_reader_goes_away_goes_on_to_its_end_and_says_so_by_its_exit_code(tmp_path: Path, both: bool) -> None:
    # As `nb-durable run ... 2>&1 | head -1`: the reader takes a line and closes the pipe.
    command = [sys.executable, "-m", "nb_durable.cli", "run", "--demo", "--run", "piped", DEMO_TASK]
    with subprocess.Popen(
        command, cwd=tmp_path, env=subprocess_env(NB_DURABLE_DEMO_LATENCY="0.05"), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if both else subprocess.DEVNULL,
    ) as proc:  # fmt: skip
        assert proc.stdout is not None
        proc.stdout.readline()
        proc.stdout.close()
        assert proc.wait(120) == 0
    listed = cli("runs", cwd=tmp_path)
    assert listed.stdout.splitlines()[1].split()[:3] == ["piped", "completed", "12"], listed.stdout


def test_export_writes_a_valid_notebook_with_the_task_and_tool_outputs(demo: DemoRun) -> None:
    exported = cli("export", DEMO_RUN, "-o", "x.ipynb", "--runnable", cwd=demo.folder)
    assert exported.returncode == 0, exported.stderr
    assert exported.stdout.strip() == "wrote x.ipynb; its code cells re-run the recorded effects if you run them"
    notebook = nbformat.read(demo.folder / "x.ipynb", as_version=4)
    nbformat.validate(notebook)
    assert "Running a code cell does it again, for real" in notebook.cells[0].source
    assert DEMO_TASK in notebook.cells[1].source
    code = [c for c in notebook.cells if c.cell_type == "code"]
    assert [c.metadata["nb_durable"]["step_id"].split(":")[0] for c in code] == ["tool"] * 6
    bash = [c for c in code if c.source.startswith("%%bash\n")]
    outputs = ["".join(o["text"] for o in c.outputs) for c in bash]
    assert "FAILED (failures=2)" in outputs[0] and "OK" in outputs[1].split()
    assert any(c.source.startswith("%%writefile calc.py\n") for c in code)
    assert notebook.metadata["nb_durable"]["run_id"] == DEMO_RUN


def test_export_writes_over_its_own_export_but_not_over_another_notebook(demo: DemoRun) -> None:
    """export -o wrote over any file there, a person's own notebook too."""
    mine = demo.folder / "analysis.ipynb"
    mine.write_text('{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}')
    refused = cli("export", DEMO_RUN, "-o", "analysis.ipynb", cwd=demo.folder)
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.strip() == (
        f"nb-durable: analysis.ipynb exists and is not an export of run {DEMO_RUN}: name another file with -o, "
        "or write over it with --force"
    )
    assert mine.read_text().startswith('{"cells": []')
    assert cli("export", DEMO_RUN, "-o", "again.ipynb", cwd=demo.folder).returncode == 0
    assert cli("export", DEMO_RUN, "-o", "again.ipynb", cwd=demo.folder).returncode == 0  # its own export: brought up to date
    forced = cli("export", DEMO_RUN, "-o", "analysis.ipynb", "--force", cwd=demo.folder)
    assert forced.returncode == 0 and nbformat.read(mine, as_version=4).metadata["nb_durable"]["run_id"] == DEMO_RUN


def test_export_into_a_folder_writes_the_run_s_notebook_there(demo: DemoRun) -> None:
    """-o DIR was refused as a file that is not an export (and --force would fail on the folder)."""
    (demo.folder / "exports").mkdir()
    into = cli("export", DEMO_RUN, "-o", "exports", cwd=demo.folder)
    assert into.returncode == 0 and into.stdout.strip() == f"wrote exports/{DEMO_RUN}.ipynb", into.stdout + into.stderr
    assert nbformat.read(demo.folder / "exports" / f"{DEMO_RUN}.ipynb", as_version=4).metadata["nb_durable"]["run_id"] == DEMO_RUN


def test_fork_then_resume_completes(demo: DemoRun) -> None:
    forked = cli("fork", DEMO_RUN, "forked", "--at", "3", cwd=demo.folder)
    assert forked.returncode == 0, forked.stderr
    assert f"forked {DEMO_RUN} at step 3 into forked" in forked.stdout
    resumed = cli("resume", "forked", cwd=demo.folder)
    assert resumed.returncode == 0, resumed.stderr
    assert states(resumed.stdout)[:3] == ["replayed"] * 3 and set(states(resumed.stdout)[3:]) == {"live"}
    assert "run forked completed" in resumed.stdout and "3 steps replayed" in resumed.stdout


def test_unknown_runs_exit_2_with_a_clear_message(demo: DemoRun) -> None:
    for args in (["show", "nope"], ["resume", "nope"], ["export", "nope"], ["fork", "nope", "new", "--at", "1"]):
        done = cli(*args, cwd=demo.folder)
        assert done.returncode == 2, (args, done.stderr)
        assert "no run 'nope'" in done.stderr and DEMO_RUN in done.stderr, (args, done.stderr)
        assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ([], "run        run an agent on a task"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
        (["run"], "run needs a task"),
        (["run", "   "], "task must say what the agent should do (it is empty), not '   '"),
        (["run", "x", "--max-turns", "0"], "must be at least 1"),
        (["run", "x", "--max-usd", "-1"], "--max-usd must be a positive number of dollars, not -1\n"),  # not -1.0
        (["run", "x", "--stall-timeout", "0"], "--stall-timeout must be a positive number of seconds, not 0\n"),
        (["fork", "a", "b"], "the following arguments are required: --at"),
        (["fork", "a", "b", "--at", "three"], "argument --at: must be a whole number (such as 3), not 'three'"),
        (["resume", "--in-doubt", "maybe"], "invalid choice: 'maybe'"),
        (["runs", "--bogus"], "unrecognized arguments: --bogus"),
    ],
)
def test_bad_flags_exit_2(tmp_path: Path, args: list[str], says: str) -> None:
    done = cli(*args, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert says in done.stderr
    assert not (tmp_path / "runs").exists(), "a refused command wrote nothing"


def test_resume_without_an_id_picks_the_latest_unfinished_run(tmp_path: Path) -> None:
    for name in ("a", "b", "c"):
        prepare_demo_workspace(tmp_path / name)
    # Killed (SIGKILL, from inside) during model turn 1: latency 1 makes each turn take >= 0.4 s.
    killed_a = cli("run", "--demo", "--run", "a", "--workspace", "a", "--kill-at", "3", DEMO_TASK, cwd=tmp_path, latency="1")
    done_b = cli("run", "--demo", "--run", "b", "--workspace", "b", DEMO_TASK, cwd=tmp_path)
    killed_c = cli("run", "--demo", "--run", "c", "--workspace", "c", "--kill-at", "3", DEMO_TASK, cwd=tmp_path, latency="1")
    assert killed_a.returncode == killed_c.returncode == -signal.SIGKILL
    assert "killed (SIGKILL) in the middle of model turn 1" in killed_a.stdout
    assert done_b.returncode == 0
    listed = cli("runs", cwd=tmp_path).stdout
    assert {line.split()[0]: line.split()[1] for line in listed.splitlines()[1:]} == {
        "a": "interrupted", "b": "completed", "c": "interrupted",
    }  # fmt: skip
    first = cli("resume", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("resuming c, the latest unfinished run\n") and "run c completed" in first.stdout
    assert states(first.stdout)[:2] == ["replayed", "replayed"] and "live" in states(first.stdout)
    second = cli("resume", cwd=tmp_path)
    assert second.returncode == 0 and second.stdout.startswith("resuming a, the latest unfinished run\n"), second.stderr
    none_left = cli("resume", cwd=tmp_path)
    assert none_left.returncode == 2
    assert "no unfinished agent run in runs to resume" in none_left.stderr
    assert none_left.stderr.rstrip().endswith("nb-durable runs --store runs lists them all."), none_left.stderr


@pytest.fixture
def holder(demo: DemoRun) -> Iterator[subprocess.Popen[str]]:
    """Another process that holds the demo run's lease until it is killed."""
    code = "import sys, time; from nb_durable.core.log import EventLog; log = EventLog(sys.argv[1]); print('held', flush=True); time.sleep(120)"
    proc = forkserver.Popen(
        [sys.executable, "-c", code, DEMO_RUN], cwd=demo.folder, env=subprocess_env(), stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline() == "held\n"
    yield proc
    proc.kill()  # nothing if the test killed it already
    proc.communicate(timeout=10)  # reaped, and its stdout pipe closed


def test_a_run_locked_by_another_process_exits_3(demo: DemoRun, holder: subprocess.Popen[str]) -> None:
    for args in (["resume", DEMO_RUN], ["run", "--demo", DEMO_TASK]):
        done = cli(*args, cwd=demo.folder)
        assert done.returncode == 3, (args, done.stderr)
        assert f"is being written by pid {holder.pid}" in done.stderr
        assert "wait for it to finish, stop that process, or read" in done.stderr
    holder.kill()
    holder.wait(10)
    freed = cli("resume", DEMO_RUN, cwd=demo.folder)
    assert freed.returncode == 0, freed.stderr
    assert states(freed.stdout) == ["replayed"] * 12


def test_a_run_an_nb_durable_command_writes_says_to_stop_that_command(tmp_path: Path) -> None:
    """It said "stop that kernel" whoever held the run; a plain Python holder is just a process."""
    writer = forkserver.Popen(
        [sys.executable, "-m", "nb_durable.cli", "run", "--demo", "--run", "slow", DEMO_TASK],
        cwd=tmp_path,
        env=subprocess_env(NB_DURABLE_DEMO_LATENCY="60"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        lease = tmp_path / "runs" / ".leases" / "slow.lock"
        wait_until(lambda: FileLease.holder(lease), "the run's writer taking its lease", alive=[writer])
        done = cli("resume", "slow", cwd=tmp_path)
    finally:
        writer.kill()
        writer.wait(10)
    assert done.returncode == 3, done.stderr
    assert f"stop that nb-durable run (Ctrl-C in its terminal, or kill {writer.pid}), or read" in done.stderr
    assert "kernel" not in done.stderr


def test_continue_of_an_unfinished_run_another_process_writes_exits_3(tmp_path: Path) -> None:
    """It said the run was not finished and to resume it first, a resume that was then refused (3)."""
    code = (
        "import sys; from nb_durable.core.log import EventLog, run_step; log = EventLog('busy', 'runs'); "
        "run_step(log, 'a', lambda: 1); print('held', flush=True); sys.stdin.readline()"
    )
    proc = forkserver.Popen(
        [sys.executable, "-c", code], cwd=tmp_path, env=subprocess_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "held\n"
        done = cli("continue", "busy", "go on", cwd=tmp_path)
    finally:
        proc.communicate("\n", timeout=10)
    assert done.returncode == 3, done.stderr
    assert f"run 'busy' is being written by pid {proc.pid}" in done.stderr and "not finished" not in done.stderr


def test_in_doubt_exits_4_with_fail_and_resumes_with_skip(tmp_path: Path) -> None:
    workspace = tmp_path / "work"
    workspace.mkdir()
    turns = [
        reply("Deploying.", tool_use("run_bash", {"command": "echo started > started.txt; sleep 30"}, id="toolu_deploy")),
        reply("The deploy may or may not have happened; I will check first."),
    ]
    with MessagesAPIServer(ScriptedScenario(turns)) as server:
        api = {"ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": "test-key"}
        run = forkserver.Popen(
            [sys.executable, "-m", "nb_durable.cli", "run", "Deploy.", "--run", "deploy", "--model", MODEL, "--workspace", "work"],
            cwd=tmp_path,
            env=subprocess_env(**api),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        while not (workspace / "started.txt").exists():
            assert run.poll() is None, run.communicate()
            assert time.monotonic() < deadline, "the command never started"
            time.sleep(0.02)
        run.kill()
        run.communicate(timeout=30)
        assert cli("runs", cwd=tmp_path).stdout.splitlines()[1].split()[:2] == ["deploy", "in_doubt"]

        refused = cli("resume", "deploy", "--in-doubt", "fail", cwd=tmp_path, **api)
        assert refused.returncode == 4, refused.stderr
        assert "its result was never recorded" in refused.stderr and "--in-doubt skip" in refused.stderr
        assert "in_doubt=" not in refused.stderr and "toolu_deploy" not in refused.stderr, "CLI words, no Python"
        assert "tool call 1 of turn 0 of run 'deploy'" in refused.stderr
        assert len(server.requests) == 1, "a refused resume asked nothing"

        resumed = cli("resume", "deploy", cwd=tmp_path, **api)
        assert resumed.returncode == 0, resumed.stderr
        assert states(resumed.stdout) == ["replayed", "skipped", "live"]
        answer = server.requests[-1].messages[-1]["content"][0]
        assert answer["tool_use_id"] == "toolu_deploy" and answer["is_error"] is True and "unknown" in answer["content"]
        assert not server.rejected


def test_a_401_exits_1_and_says_what_to_fix(tmp_path: Path) -> None:
    with MessagesAPIServer(ScriptedScenario([Error(401, message="invalid x-api-key")])) as server:
        done = cli(
            "run", "Say hi.", "--run", "hi", "--model", MODEL, "--workspace", ".",
            cwd=tmp_path, ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="test-key",
        )  # fmt: skip
        assert len(server.requests) == 1, "a 401 is not retried"
    assert done.returncode == 1, done.stderr
    assert "401" in done.stderr and "check ANTHROPIC_API_KEY" in done.stderr and "Then resume it with nb-durable resume hi;" in done.stderr
    assert "Traceback" not in done.stderr and "test-key" not in done.stderr
    listed = cli("runs", cwd=tmp_path)
    assert listed.stdout.splitlines()[1].split()[:2] == ["hi", "failed"]


def test_the_demo_command_kills_a_run_and_resumes_it(tmp_path: Path) -> None:
    done = cli("demo", "--latency", "0", cwd=tmp_path, TMPDIR=str(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    first, _, second = done.stdout.partition("second process:")
    assert "(exit status -9)" in first and "the process is killed (SIGKILL)" in first
    assert "replayed" in states(second) and "live" in states(second)
    assert "The run is completed" in second and "The tests in the workspace now pass." in second
    logs = list(tmp_path.glob("nb-durable-demo-*/agent/runs/demo-agent.jsonl"))
    assert len(logs) == 1
    kinds = [json.loads(line)["kind"] for line in logs[0].read_text().splitlines()]
    assert kinds[-1] == "run_finished"


def test_demos_reuse_one_folder_and_clean_removes_it(tmp_path: Path) -> None:
    for args in (["demo", "--plain"], ["demo", "--plain", "--crash-at", "2"]):
        done = cli(*args, cwd=tmp_path, TMPDIR=str(tmp_path))
        assert done.returncode == 0, done.stdout + done.stderr
        assert "The report was sent once; the run is completed" in done.stdout
        first = done.stdout.partition("second process:")[0]
        assert "live      download:1" in first, "each demo starts from nothing, not from the last one's log"
        assert "killed (SIGKILL) in the middle of step" in first
    folders = list(tmp_path.glob("nb-durable-demo-*"))
    assert len(folders) == 1, "a second demo reuses the folder of the first"
    cleaned = cli("demo", "--clean", cwd=tmp_path, TMPDIR=str(tmp_path))
    assert cleaned.returncode == 0 and cleaned.stdout == f"removed {folders[0]}\n"
    assert not folders[0].exists()


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        (["demo", "--crash-at", "0"], 2, "argument --crash-at: must be at least 1, not 0"),
        (["demo", "--plain", "--crash-at", "7"], 2, "--crash-at must be a step number from 1 to 6, not 7"),
        (["demo", "--crash-at", "999"], 2, "--crash-at 999 is past the end: the demo run has 12 steps when nothing kills it"),
    ],
)
def test_demo_crash_points_are_checked_honestly(tmp_path: Path, args: list[str], code: int, says: str) -> None:
    done = cli(*args, cwd=tmp_path, TMPDIR=str(tmp_path))
    assert done.returncode == code, done.stdout + done.stderr
    assert says in done.stdout + done.stderr
    assert "kill-at" not in done.stdout + done.stderr, "the internal flag stays internal"
    assert "the process is killed" not in done.stdout, "no kill is claimed that did not happen"


def test_fork_past_the_end_and_a_missing_workspace_are_bad_usage(demo: DemoRun) -> None:
    forked = cli("fork", DEMO_RUN, "too-far", "--at", "99", cwd=demo.folder)
    assert forked.returncode == 2, forked.stderr
    assert f"--at of a fork of run '{DEMO_RUN}', which has 12 steps, must be a whole number from 0 to 12, not 99" in forked.stderr
    missing = cli("run", "Fix it", "--workspace", "no/such/folder", cwd=demo.folder)
    assert missing.returncode == 2, missing.stderr
    assert "--workspace no/such/folder is not a folder" in missing.stderr
    version = cli("--version", cwd=demo.folder)
    assert version.returncode == 0 and re.fullmatch(r"nb-durable \d+\.\d+\.\d+\n", version.stdout)


def test_fork_to_another_store_keeps_the_new_run_away_from_the_run_s_store_and_says_how_to_resume_it(
    demo: DemoRun, tmp_path: Path
) -> None:
    """A fork in the run's own store is a run nobody writes, which that store's workers take; a
    person trying something by hand can fork it into a store of their own."""
    from nb_durable.core.runs import list_runs, read_run

    mine = f"sqlite:///{tmp_path / 'mine.db'}"
    forked = cli("fork", DEMO_RUN, "try", "--at", "4", "--to", mine, cwd=demo.folder)
    assert forked.returncode == 0, forked.stderr
    assert forked.stdout.endswith(f"; resume it to go on: nb-durable resume try --store {shlex.quote(mine)}\n"), forked.stdout
    assert [s.run_id for s in list_runs(mine)] == ["try"] and read_run("try", mine).summary.steps == 4
    assert "try" not in {s.run_id for s in list_runs(str(demo.folder / "runs"))}
    here = cli("fork", DEMO_RUN, "try-here", "--at", "4", cwd=demo.folder)
    assert here.stdout.endswith("; resume it to go on: nb-durable resume try-here\n"), here.stdout
    assert cli("delete", "try-here", cwd=demo.folder).returncode == 0  # the module's demo folder as it was


def test_a_store_to_write_that_refuses_is_told_to_be_named_again_by_the_flag_that_named_it(demo: DemoRun) -> None:
    """fork --to and copy were told "Pass --store a folder you can write", a flag that names the
    store they read."""
    unwritable = f"/proc/nb-durable-runs-{os.getpid()}"  # no folder can be made there, even by root
    forked = cli("fork", DEMO_RUN, "try", "--at", "4", "--to", unwritable, cwd=demo.folder)
    assert forked.returncode != 0 and forked.stderr.rstrip().endswith("Pass --to a folder you can write."), forked.stderr
    copied = cli("copy", "runs", unwritable, DEMO_RUN, cwd=demo.folder)
    assert copied.returncode != 0 and "Give as the destination a folder you can write." in copied.stderr, copied.stderr
    assert "--store" not in forked.stderr + copied.stderr


def test_text_that_is_not_utf8_and_a_file_that_cannot_be_written_are_said_without_a_traceback(
    demo: DemoRun, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A task piped in Latin-1 failed with the codec's own words about a surrogate, and an
    export into a folder that does not exist with a FileNotFoundError traceback."""
    import io

    from nb_durable.cli.commands import main

    monkeypatch.chdir(demo.folder)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"fix the caf\xe9 tests")))
    assert main(["run", "--demo", "-"]) == 2
    assert "nb-durable: the task read from stdin is not UTF-8 text (byte 0xe9 at offset 11)" in capsys.readouterr().err
    assert main(["export", DEMO_RUN, "--out", "no/such/folder/run.ipynb"]) == 2  # a mistake in what was asked
    assert capsys.readouterr().err == (
        "nb-durable: cannot write no/such/folder/run.ipynb: there is no folder no/such/folder; create it, "
        "or name another file with -o\n"
    )

def test_run_named_with_new_is_that_name_or_refused(tmp_path: Path) -> None:
    prepare_demo_workspace(tmp_path / "w")
    first = cli("run", "--demo", "--run", "mine", "--new", "--workspace", "w", DEMO_TASK, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert "run mine completed" in first.stdout, "a named run keeps its name"
    again = cli("run", "--demo", "--run", "mine", "--new", "--workspace", "w", DEMO_TASK, cwd=tmp_path)
    assert again.returncode == 2, again.stderr
    assert "run 'mine' already exists" in again.stderr and "completed, 12 steps" in again.stderr
    assert "leave out --new to replay" in again.stderr
    fresh = cli("run", "--demo", "--new", "--workspace", "w", DEMO_TASK, cwd=tmp_path)
    assert fresh.returncode == 0, fresh.stderr
    ids = [line.split()[0] for line in cli("runs", cwd=tmp_path).stdout.splitlines()[1:]]
    assert sorted(ids)[0] == "mine" and re.fullmatch(rf"{DEMO_RUN}-\d{{8}}-\d{{6}}", sorted(ids)[1]), ids


def test_run_show_and_runs_never_send_a_models_escape_sequences_to_the_terminal(tmp_path: Path) -> None:
    # A model's text, or a tool's output (ls --color, a hostile file), may hold escape codes
    # that would retitle, recolour or rewrite the terminal: the CLI prints them inert.
    hostile = "\x1b]0;pwned\x07\x1b[31mred\x1b[0m and \x1b[2Kerased"
    scenario = ScriptedScenario(
        [reply(tool_use("run_bash", {"command": "printf '\\033[31mcoloured\\033[0m\\n'"}, id="toolu_c")), reply(hostile)]
    )
    with MessagesAPIServer(scenario) as server:
        ran = cli(
            "run", "--run", "esc", "--model", "claude-test-1", "--workspace", ".", f"Say {hostile}",
            cwd=tmp_path, ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="test-key",
        )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    shown = cli("show", "esc", cwd=tmp_path)
    listed = cli("runs", cwd=tmp_path)
    for out in (ran.stdout, shown.stdout, listed.stdout):
        assert "\x1b" not in out and "\x07" not in out
    assert "]0;pwned" in shown.stdout and "coloured" in ran.stdout  # the words stay, inert


def test_a_new_demo_run_refuses_fallback_models_as_its_resume_does() -> None:
    """``run --demo --fallback-model M`` recorded M as the run's fallback, a model the demo never
    asks, though ``resume --fallback-model M`` of the same run is refused: a new run and a resume
    asked two copies of "the demo has no model choice", and only the resume's covered fallbacks."""
    from nb_durable.agent.run.prepare import prepare_run
    from nb_durable.errors import SettingError

    with pytest.raises(SettingError) as refused:
        prepare_run("x", values={"demo": True, "fallback_models": ("claude-b", "claude-c")})
    assert str(refused.value) == (
        "--fallback-model must be left out with --demo: the offline demo model has no model choice "
        "(it records its model as demo), not claude-b claude-c"
    )
    keyless = prepare_run("x", values={"model": "claude-a", "fallback_models": ("claude-b",)}, environ={})
    assert (keyless.settings.model, keyless.settings.fallback_models) == ("demo", ())
    assert keyless.note.endswith(" The models claude-a, claude-b are not used: the demo model has no model choice."), keyless.note
