"""A new user's first mistakes at the terminal, each answered in that command's own words.

* ``run --wrongflag`` prints ``run``'s usage (argparse alone would print the top level's).
* ``demo --store X`` is refused, saying where the demo keeps its runs and how to copy them;
  ``demo --help`` does not offer it. ``resume --help`` offers of ``--in-doubt`` only what it takes.
* An unknown run names the folder plainly, and the command that lists the runs, with the
  ``--store`` it needs; that command works as printed.
* A store that does not exist is said to be missing by every command that reads one (``copy``'s
  source too), which creates nothing; ``run`` creates its store.
"""

from __future__ import annotations

import os
import select
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import nb_durable_cli, subprocess_env


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return nb_durable_cli(*args, cwd=cwd, NB_DURABLE_DEMO_LATENCY="0", TMPDIR=str(cwd))


def test_the_bare_command_lists_the_commands(tmp_path: Path) -> None:
    """``nb-durable`` alone said only "the following arguments are required: COMMAND"."""
    done = cli(cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("usage: nb-durable ") and "arguments are required" not in done.stderr, done.stderr
    for command in ("run", "resume", "runs", "show", "demo"):
        assert f"\n    {command} " in done.stderr, done.stderr


def test_an_unknown_flag_is_told_with_the_command_s_usage(tmp_path: Path) -> None:
    for command, rest in (("run", ["x"]), ("show", ["x"]), ("copy", ["a", "b"])):
        done = cli(command, *rest, "--wrongflag", cwd=tmp_path)
        assert done.returncode == 2
        assert done.stderr.startswith(f"usage: nb-durable {command} "), done.stderr
        assert f"nb-durable {command}: error: unrecognized arguments: --wrongflag" in done.stderr


def test_demo_refuses_a_store_it_would_not_use(tmp_path: Path) -> None:
    done = cli("demo", "--store", str(tmp_path / "mine"), cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "the demo keeps its runs in its own folder" in done.stderr and "takes no --store" in done.stderr
    assert "first process" not in done.stdout and not (tmp_path / "mine").exists()
    helped = cli("demo", "--help", cwd=tmp_path)  # it offered --store URL (default: $NB_DURABLE_STORE or runs)
    assert helped.returncode == 0 and "--store" not in helped.stdout, helped.stdout
    # It said "--latency LATENCY  scale of the demo model's simulated latency": no default, and
    # nothing of --plain, which it does not touch.
    said = " ".join(helped.stdout.split())
    assert "--latency X the demo model's pace" in said and "default 0.5" in said and "the agent demo only" in said, said


def test_an_unknown_run_names_its_folder_and_a_listing_command_that_works(tmp_path: Path) -> None:
    for store, where in ((["--store", "elsewhere"], f"the folder elsewhere ({tmp_path / 'elsewhere'})"),
                         (["--store", f"sqlite:///{tmp_path / 'r.db'}"], f"the SQLite store {tmp_path / 'r.db'}")):  # fmt: skip
        ran = cli("run", "--demo", "--run", "there", "--workspace", ".", "fix the tests", *store, cwd=tmp_path)
        assert ran.returncode == 0, ran.stderr
        done = cli("show", "nope", *store, cwd=tmp_path)
        assert done.returncode == 2
        assert f"no run 'nope' in {where}. It has 1 run(s): 'there'; " in done.stderr, done.stderr
        listing = shlex.split(done.stderr.split("; ")[-1].removesuffix(" lists them all.\n"))
        assert listing[:2] == ["nb-durable", "runs"] and "--store" in listing, done.stderr
        listed = cli(*listing[1:], cwd=tmp_path)
        assert listed.returncode == 0 and "there" in listed.stdout, listed.stdout


def test_in_doubt_s_help_offers_only_the_choices_the_cli_takes(tmp_path: Path) -> None:
    """It said "ask a person, run it again, ..." of a flag that refuses ask: nobody is asked in a terminal."""
    helped = cli("resume", "--help", cwd=tmp_path)
    said = " ".join(helped.stdout.split("--in-doubt {rerun,skip,fail}")[-1].split("--", 1)[0].split())
    assert said == "a tool cut off by a crash: run it again (rerun), tell the model its outcome is unknown (skip), or stop the run (fail)", said
    refused = cli("resume", "--in-doubt", "ask", cwd=tmp_path)
    assert refused.returncode == 2 and "invalid choice: 'ask'" in refused.stderr


def test_a_store_that_does_not_exist_is_said_to_be_missing_and_nothing_is_created(tmp_path: Path) -> None:
    """copy from a mistyped folder said "0 run(s) copied" (exit 0) and made the destination; runs,
    show and check-index on a mistyped SQLite file made an empty database there."""
    copied = cli("copy", "no/such/folder", "backup.db", cwd=tmp_path)
    assert copied.returncode == 2, copied.stdout + copied.stderr
    assert copied.stderr == (
        f"nb-durable: there is no store at the folder no/such/folder ({tmp_path / 'no/such/folder'}): "
        "that folder does not exist (is the store's name right?)\n"
    )
    for args in (["runs"], ["show", "r"], ["check-index"], ["export", "r"], ["fork", "r", "s", "--at", "0"], ["resume", "r"],
                 ["delete", "r"], ["prune", "--older-than", "1d"]):  # fmt: skip
        done = cli(*args, "--store", "sqlite:///typo.db", cwd=tmp_path)
        assert done.returncode == 2, (args, done.stdout + done.stderr)
        assert f"there is no store at the SQLite file typo.db ({tmp_path / 'typo.db'}): that file does not exist" in done.stderr, done.stderr
    for store in ("sqlite:///typo.db", "typo-runs"):  # no run named: there is none to resume, as %agent_resume says
        resumed = cli("resume", "--store", store, cwd=tmp_path)
        assert resumed.returncode == 2 and resumed.stdout == "", resumed.stdout + resumed.stderr
        assert resumed.stderr.startswith(f"nb-durable: no unfinished agent run in {store} to resume: there is no store at the "), resumed.stderr
        assert resumed.stderr.endswith("(is the store's name right?). Name the store that holds your runs (--store), or start a run first.\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "nothing was created"
    ran = cli("run", "--demo", "--run", "r", "--workspace", ".", "--store", "sqlite:///made.db", "hi", cwd=tmp_path)
    assert ran.returncode == 0 and (tmp_path / "made.db").is_file(), "run creates its store, as it always did"


def test_help_names_each_group_for_what_it_holds_and_only_commands_that_exist(tmp_path: Path) -> None:
    """``--tag`` and ``--priority`` sat under "where runs live:", and the worker's help listed
    ``submit`` among the ways to queue a run as if it were a command: it is a Python function."""
    helped = cli("run", "--help", cwd=tmp_path).stdout.splitlines()
    headings = {}
    for line in helped:
        if line and not line.startswith(" ") and line.endswith(":"):
            heading = line
        elif line.strip().startswith(("--tag", "--priority", "--store")):
            headings[line.split()[0]] = heading
    assert "label" in headings["--tag"] and "queue" in headings["--priority"], headings
    worker = " ".join(cli("worker", "--help", cwd=tmp_path).stdout.split())
    assert "(run --batch, or submit() in Python)" in worker, worker
    from nb_durable.agent import submit  # the function the help names

    assert callable(submit)


def test_resume_passes_over_a_run_of_plain_steps_and_says_why_it_cannot_resume_one(tmp_path: Path) -> None:
    """README's first snippet (EventLog and run_step) leaves a run no agent wrote. ``resume`` with
    no id picked it as "the latest unfinished run", then failed with exit 1 and "inspect it with
    nb-durable show RUN"; now it looks only at agent runs, and naming the plain run is refused
    (exit 2) with the command that shows it."""
    from nb_durable import EventLog, run_step
    from nb_durable.agent import CrashAt, RunHooks
    from nb_durable.core.runs import latest_unfinished
    from nb_durable.errors import NotAnAgentRunError, SimulatedCrash
    from nb_durable.testing import ScriptedModel, text_message, tool_use_message

    with EventLog("plain", root=tmp_path / "runs") as log:
        run_step(log, "list", lambda: 1)
    done = cli("resume", cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "no unfinished agent run in" in done.stderr and "a run of plain steps" in done.stderr, done.stderr
    assert "resuming plain" not in done.stdout
    named = cli("resume", "plain", cwd=tmp_path)
    assert named.returncode == 2, named.stdout + named.stderr
    assert "run 'plain' is not an agent run" in named.stderr and "Inspect it with nb-durable show plain." in named.stderr, named.stderr

    from nb_durable import resume_agent, run_agent

    model = ScriptedModel([tool_use_message([("list_dir", {"path": "."})]), text_message("done")])
    with pytest.raises(SimulatedCrash):
        run_agent("look", run_id="agent", client=model, store=tmp_path / "runs", workspace=tmp_path, hooks=RunHooks(before_step=CrashAt(2)))
    with EventLog("plain-newer", root=tmp_path / "runs") as log:
        run_step(log, "list", lambda: 1)
    assert latest_unfinished(tmp_path / "runs") == "plain-newer"
    assert latest_unfinished(tmp_path / "runs", agents=True) == "agent"
    with pytest.raises(NotAnAgentRunError, match=r"Inspect it with read_run\('plain'\)") as refused:
        resume_agent("plain", client=model, store=tmp_path / "runs")
    assert refused.value.outcome == "usage"


def test_show_exits_with_the_code_the_run_ended_with(tmp_path: Path) -> None:
    """``show`` exited 1 for every run that stopped short, so a script could not tell a truncated
    run (resume --max-tokens) from a refused one (resume --model): it now exits with the code
    ``run`` and ``resume`` gave when the run stopped, and its help says so."""
    from nb_durable import EventLog, run_agent, run_step
    from nb_durable.errors import EXIT_CODES
    from nb_durable.testing import ScriptedModel, text_message

    with EventLog("short", root=tmp_path / "runs") as log:  # no end recorded, no writer: interrupted
        run_step(log, "a", lambda: 1)
    for run_id, stop in (("cut", "max_tokens"), ("declined", "refusal"), ("done", "end_turn")):
        model = ScriptedModel([text_message("Said.", stop_reason=stop)])
        run_agent("say it", run_id=run_id, client=model, store=tmp_path / "runs", workspace=tmp_path)
    for run_id, status in (("short", "interrupted"), ("cut", "truncated"), ("declined", "refused"), ("done", "completed")):
        shown = cli("show", run_id, cwd=tmp_path)
        assert shown.returncode == EXIT_CODES[status], (run_id, shown.returncode, shown.stdout, shown.stderr)
    said = " ".join(cli("show", "--help", cwd=tmp_path).stdout.split())
    assert "(exit 0 for a run completed, queued or going on; else the exit code of how it ended, as run and resume give)" in said, said


def test_resume_with_no_id_names_the_run_another_process_is_writing(tmp_path: Path) -> None:
    """Two notebooks on one folder: while one kernel runs an agent, ``%agent_resume`` (or
    ``nb-durable resume``) in the other said 'every agent run there has completed', which
    was false and sent a person looking for a run elsewhere. It names the run and its writer."""
    from nb_durable import EventLog

    with EventLog("busy", root=tmp_path / "runs") as log:
        log.start_run({"task": "fix the tests"})
        done = cli("resume", cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    said = " ".join(done.stderr.split())
    assert "has completed" not in said, said
    assert f"no agent run in runs to resume: the unfinished one, 'busy', is still running, written by pid {os.getpid()} on host" in said, said
    assert "Wait for it to end, or stop that process and resume it then; nb-durable runs --store runs lists them all." in said, said


def test_wait_says_whom_it_waits_on_and_ctrl_c_says_it_stopped_waiting(tmp_path: Path) -> None:
    """``nb-durable wait`` for a queued run with no worker running said nothing and waited for ever;
    stopped with Ctrl-C, it said "interrupted; resume the run to go on", though it ran no run and
    the queued one was left for a worker, as it was."""
    (tmp_path / "tasks.jsonl").write_text('{"task": "The tests in this project fail. Fix them.", "run": "q1"}\n')
    assert cli("run", "--batch", "tasks.jsonl", cwd=tmp_path).returncode == 0
    # Ctrl-C raises KeyboardInterrupt, as in a terminal, even if this test's own SIGINT is ignored.
    as_from_a_terminal = (
        "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "sys.argv = ['nb-durable', 'wait', 'q1']; runpy.run_module('nb_durable.cli', run_name='__main__')"
    )
    waiting = subprocess.Popen(
        [sys.executable, "-c", as_from_a_terminal], cwd=tmp_path, env=subprocess_env(),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert waiting.stderr is not None
    # Said before it waits: with no worker running, a queued run never ends, so it says whom it waits on.
    said_in_time = select.select([waiting.stderr], [], [], 60)[0]
    if not said_in_time:
        waiting.kill()
    assert said_in_time, "wait said nothing in 60 s"
    first = waiting.stderr.readline()
    assert first == (
        "nb-durable wait: waiting for 1 run(s), 0 going on where they run, 1 for a worker to take (if none is "
        "running, start one with: nb-durable worker). Ctrl-C stops waiting, not the runs.\n"
    ), first
    waiting.send_signal(signal.SIGINT)
    out, err = waiting.communicate(timeout=60)
    assert waiting.returncode == 130, out + err
    assert err == "nb-durable: stopped waiting; the runs are left as they were, for their workers\n", err
    listed = cli("runs", cwd=tmp_path).stdout
    assert listed.splitlines()[1].split()[:2] == ["q1", "queued"], listed
