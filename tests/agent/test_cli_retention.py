"""``nb-durable delete`` and ``nb-durable prune`` as a user runs them, on every store a process can share.

Proven here, each command a process of its own, on JSONL, SQLite and a private PostgreSQL:

* ``delete RUN`` removes that run and no other (0); an unknown run is a usage error (2).
* A run whose lease another *process* holds (a real child that opened it and waits) is refused
  by ``delete`` with exit code 3 and a message naming that process's pid; ``prune`` keeps it and
  says who writes it, and prunes it once that process has gone.
* ``prune --older-than 30d`` deletes nothing fresh; ``--dry-run`` lists and deletes nothing;
  ``--status completed`` deletes only completed runs; a bad duration is a usage error (2).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from nb_durable.core.log import EventLog, run_step
from nb_durable.core.runs import list_runs
from tests import forkserver
from tests.conftest import make_store_url, nb_durable_cli, subprocess_env

HOLD = """
import sys, time
from nb_durable.core.log import EventLog, run_step
log = EventLog("busy", sys.argv[1])
run_step(log, "a", lambda: 1)
print("holding", flush=True)
sys.stdin.readline()
log.close()
"""


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return nb_durable_cli(*args, cwd=cwd, timeout=60)


def runs_in(store: str) -> set[str]:
    return {s.run_id for s in list_runs(store)}


@pytest.mark.parametrize("kind", ["jsonl", "sqlite", "postgres"])
def test_delete_and_prune_from_the_cli(kind: str, tmp_path: Path) -> None:
    store = make_store_url(kind, tmp_path)
    for run_id, finished in (("done", True), ("stopped", False), ("other", True)):
        with EventLog(run_id, store) as log:
            run_step(log, "a", lambda: 1)
            if finished:
                log.finish_run("completed")
    holder = forkserver.Popen(
        [sys.executable, "-c", HOLD, store], env=subprocess_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "holding\n"
        time.sleep(0.05)  # every event is at least this old: --older-than 0s matches them all

        done = cli("delete", "other", "--store", store, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert runs_in(store) == {"done", "stopped", "busy"}
        unknown = cli("delete", "other", "--store", store, cwd=tmp_path)
        assert unknown.returncode == 2 and "no run 'other'" in unknown.stderr

        locked = cli("delete", "busy", "--store", store, cwd=tmp_path)
        assert locked.returncode == 3, locked.stderr
        assert f"run 'busy' was not deleted: it is being written by pid {holder.pid}" in locked.stderr

        fresh = cli("prune", "--older-than", "30d", "--store", store, cwd=tmp_path)
        assert fresh.returncode == 0 and "0 run(s) deleted" in fresh.stdout
        dry = cli("prune", "--older-than", "0s", "--dry-run", "--store", store, cwd=tmp_path)
        assert dry.returncode == 0 and sorted(dry.stdout.splitlines()[:2]) == ["would delete done (completed)", "would delete stopped (interrupted)"]
        assert runs_in(store) == {"done", "stopped", "busy"}

        completed = cli("prune", "--older-than", "0s", "--status", "completed", "--store", store, cwd=tmp_path)
        assert completed.returncode == 0 and "deleted done" in completed.stdout
        assert runs_in(store) == {"stopped", "busy"}

        rest = cli("prune", "--older-than", "0s", "--store", store, cwd=tmp_path)
        assert rest.returncode == 0 and "deleted stopped" in rest.stdout
        assert f"kept busy: it is being written by pid {holder.pid}" in rest.stderr
        assert runs_in(store) == {"busy"}
    finally:
        holder.communicate(timeout=30)  # closes its stdin (the holder lets go), reads its stdout to the end and closes it
    gone = cli("prune", "--older-than", "0s", "--store", store, cwd=tmp_path)
    assert gone.returncode == 0 and "deleted busy" in gone.stdout
    assert runs_in(store) == set()
    bad = cli("prune", "--older-than", "soon", "--store", store, cwd=tmp_path)
    assert bad.returncode == 2 and "is not a duration" in bad.stderr


def test_prune_says_each_run_s_status_and_counts_the_queued_runs_apart(tmp_path: Path) -> None:
    """An operator's sweep while a backlog waited listed 'deleted p17' alike for a run done
    and for one queued that no worker had started: the work was gone, unsaid."""
    from nb_durable.agent.fleet.batch import submit

    store = f"sqlite:///{tmp_path / 'runs.db'}"
    with EventLog("done", store) as log:
        log.start_run({"task": "t"})
        run_step(log, "a", lambda: 1)
        log.finish_run("completed")
    submit("say hello", store=store, run_id="waiting", workspace=str(tmp_path), demo=True)
    time.sleep(0.05)  # every event is at least this old: --older-than 0s matches them all
    dry = cli("prune", "--older-than", "0s", "--dry-run", "--store", store, cwd=tmp_path)
    assert dry.returncode == 0, dry.stderr
    lines = dry.stdout.splitlines()
    assert sorted(lines[:2]) == ["would delete done (completed)", "would delete waiting (queued)"], lines
    assert lines[2] == "2 run(s), 1 of them queued and never run, would be deleted (a dry run: nothing was)", lines
    gone = cli("prune", "--older-than", "0s", "--status", "completed", "--store", store, cwd=tmp_path)
    assert gone.stdout.splitlines() == ["deleted done (completed)", "1 run(s) deleted"], gone.stdout
    assert runs_in(store) == {"waiting"}


def test_prune_s_status_and_age_are_refused_in_the_words_runs_and_worker_use(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`prune --status X` said argparse's "invalid choice" where `runs --status X` says "must be
    one of"; `prune --older-than -1d` said only "expected one argument" (argparse takes a value
    starting with '-' for a flag), not that an age has no sign."""
    from nb_durable.cli import main

    store = str(tmp_path / "runs.db")

    def refused(*argv: str) -> str:
        with pytest.raises(SystemExit) as ended:
            main(list(argv))
        assert ended.value.code == 2
        return capsys.readouterr().err.splitlines()[-1]

    runs_said = refused("runs", "--status", "X", "--store", store)
    prune_said = refused("prune", "--status", "X", "--older-than", "1d", "--store", store)
    assert runs_said.endswith(", not 'X'") and prune_said.endswith(", not 'X'")
    assert "must be one of queued, completed, failed," in prune_said and "invalid choice" not in prune_said
    assert "running" not in prune_said, "a run going on is never pruned, so its status is not offered"
    negative = "'-1d' is a negative age: an age counts back from now, so write it without the sign (1d)"
    assert refused("prune", "--older-than", "-1d", "--store", store) == f"nb-durable prune: error: argument --older-than: {negative}"
    assert refused("worker", "--store", store, "--older-than", "-1d", "--once").endswith(negative)
    assert refused("prune", "--older-than=-1d", "--store", store).endswith(negative)
    assert not (tmp_path / "runs.db").exists(), "nothing was opened"
