"""One Ctrl-C stops a run even when Python swallows it: real processes, pressed in a finalizer.

A SIGINT handled while the main thread runs a weakref callback or a ``__del__`` (an import's
module lock freed, httpx or the SDK closing a connection) raises its KeyboardInterrupt there,
and Python reports it as "Exception ignored" and goes on: the run went on, and the person had
to press again. Here the press is made to land in such a finalizer every time: the finalizer
itself sends the process SIGINT, so the handler runs inside it. The run must stop at once,
recorded interrupted with its steps whole, and resume.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from nb_durable import read_run
from tests import forkserver
from tests.conftest import subprocess_env
from tests.fakes import Delay, MessagesAPIServer, ScriptedScenario, reply

PRESSED_IN_A_FINALIZER = """
import signal


class Cleanup:
    # A person's Ctrl-C lands while this finalizer runs.
    def __del__(self):
        signal.raise_signal(signal.SIGINT)
"""

AGENT = PRESSED_IN_A_FINALIZER + """
import sys, time
from nb_durable import ToolRegistry, resume_agent, run_agent, tool
from nb_durable.testing import ScriptedModel, text_message, tool_use_message

signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C raises KeyboardInterrupt, as in a terminal


@tool(effect="idempotent")
def tidy() -> str:
    \"\"\"Tidy the workspace.\"\"\"
    if sys.argv[1] == "run":
        Cleanup()
        time.sleep(60)  # the press stops the run here, at once
    return "tidied"


tools = ToolRegistry([tidy])
if sys.argv[1] == "run":
    model = ScriptedModel([tool_use_message([("tidy", {}, "toolu_tidy")]), text_message("Tidied.")])
    run_agent("Tidy up.", client=model, tools=tools, store="runs", run_id="tidy", workspace=".")
else:
    result = resume_agent("tidy", client=ScriptedModel([text_message("Tidied.")]), tools=tools, store="runs")
    print(result.status, result.replayed_steps, result.live_steps)
"""


def run(code: str, *args: str, cwd: Path, env: dict[str, str] | None = None) -> tuple[Any, float]:
    started = time.monotonic()
    done = forkserver.run(
        [sys.executable, "-c", code, *args], cwd=cwd, env=env or subprocess_env(), capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    return done, time.monotonic() - started


def test_run_agent_stops_at_one_press_swallowed_by_a_finalizer_and_resumes(tmp_path: Path) -> None:
    stopped, took = run(AGENT, "run", cwd=tmp_path)
    assert stopped.returncode == -2, f"ended by its KeyboardInterrupt, as Python ends: {stopped.stderr}"
    assert took < 30, f"the press stopped the 60 s tool at once: {took:.1f} s"
    assert "Exception ignored" not in stopped.stderr, stopped.stderr
    record = read_run("tidy", str(tmp_path / "runs"))
    assert record.summary.status == "interrupted"
    assert [(s.step_id, s.state) for s in record.steps] == [("model:0", "completed"), ("tool:0:0:toolu_tidy", "interrupted")]

    resumed, _ = run(AGENT, "resume", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.split() == ["completed", "1", "2"], "the turn replayed, the tool and the last turn live"


CLI = PRESSED_IN_A_FINALIZER + """
import runpy, sys
import httpx2

sending = httpx2.Client.send


def send(self, *args, **kwargs):
    Cleanup()  # a connection's cleanup as the request goes out, then it waits 30 s for its answer
    return sending(self, *args, **kwargs)


httpx2.Client.send = send
sys.argv = ["nb-durable", "run", "Think hard.", "--run", "stopped", "--model", "claude-test-1", "--workspace", "."]
runpy.run_module("nb_durable.cli", run_name="__main__")
"""


def test_the_cli_stops_at_one_press_swallowed_by_a_finalizer(tmp_path: Path) -> None:
    with MessagesAPIServer(ScriptedScenario([Delay(30, reply("Too late."))])) as server:
        env = subprocess_env(ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="test-key")
        stopped, took = run(CLI, cwd=tmp_path, env=env)
    assert stopped.returncode == 130, stopped.stdout + stopped.stderr
    assert took < 20, f"the press cut the model call's 30 s wait short: {took:.1f} s"
    assert "Exception ignored" not in stopped.stderr and "KeyboardInterrupt" not in stopped.stderr, stopped.stderr
    assert "interrupted model turn 0" in " ".join(stopped.stdout.split()), stopped.stdout
    assert read_run("stopped", str(tmp_path / "runs")).summary.status == "interrupted"


OPENING = PRESSED_IN_A_FINALIZER + """
import time
from nb_durable import run_agent
from nb_durable.core.stores.jsonl import JsonlStore
from nb_durable.testing import ScriptedModel, text_message

signal.signal(signal.SIGINT, signal.default_int_handler)
making = JsonlStore.__init__


def opening(self, *args, **kwargs):
    Cleanup()  # the press lands as the run opens its store, before its log or its lease
    time.sleep(60)  # a slow disk, a server far away: the press stops the run here, at once
    making(self, *args, **kwargs)


JsonlStore.__init__ = opening
run_agent("Tidy up.", client=ScriptedModel([text_message("Tidied.")]), store="runs", run_id="tidy", workspace=".")
print("ran on")
"""


def stopped_before_any_run(script: str, tmp_path: Path) -> None:
    """``script`` ends by its KeyboardInterrupt, at once (its 60 s wait cut short), having started no run."""
    stopped, took = run(script, cwd=tmp_path)
    assert stopped.returncode == -2, f"ended by its KeyboardInterrupt, as Python ends: {stopped.stdout}{stopped.stderr}"
    assert took < 30, f"the press stopped the 60 s wait at once: {took:.1f} s"
    assert "Exception ignored" not in stopped.stderr and "ran on" not in stopped.stdout, stopped.stdout + stopped.stderr
    assert not (tmp_path / "runs").exists(), "no run was started"


def test_run_agent_stops_at_one_press_swallowed_as_it_opens_its_store(tmp_path: Path) -> None:
    stopped_before_any_run(OPENING, tmp_path)


PREPARING = PRESSED_IN_A_FINALIZER + """
import dataclasses, time
from nb_durable.agent.run.loop import run_prepared
from nb_durable.agent.run.prepare import prepare_run
from nb_durable.core.stores.jsonl import JsonlStore
from nb_durable.testing import ScriptedModel, text_message

signal.signal(signal.SIGINT, signal.default_int_handler)
making = JsonlStore.__init__


def opening(self, *args, **kwargs):
    Cleanup()  # the press lands as the front end looks the run id up, before any run starts
    time.sleep(60)  # a slow disk, a server far away: the press stops the preparing here, at once
    making(self, *args, **kwargs)


JsonlStore.__init__ = opening
prepared = prepare_run("Tidy up.", run_id="tidy", new=True, values={"store": "runs", "workspace": "."})
JsonlStore.__init__ = making
prepared = dataclasses.replace(prepared, client=ScriptedModel([text_message("Tidied.")]))
run_prepared(prepared, store="runs")
print("ran on")
"""


def test_a_press_swallowed_while_a_front_end_prepares_a_run_stops_it_at_once(tmp_path: Path) -> None:
    # The CLI and the %%agent magic prepare a run (prepare_run: the model, the id, a look in the
    # store for --new) before they run it: a press swallowed there was lost, and the run went on.
    stopped_before_any_run(PREPARING, tmp_path)
