"""The kernel the tests of a module share keeps nothing of one test for the next.

``kernels()`` hands a test the module's kernel after ``Kernel.reset`` (``in_kernel.reset``).
Here a test leaves behind everything a test can: a variable, an environment variable, another
working folder, an open widget, a ``%config`` setting, and a background run in the middle of
its model call, whose Messages API goes away as the test ends. After the reset the same kernel
process has none of them: the run was stopped and recorded as stopped, its lease released; the
next run goes to the next test's API, in the next test's folder, and only it calls there.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from nb_durable.core.runs import read_run
from tests.fakes import Delay, MessagesAPIServer, ScriptedScenario, reply
from tests.jupyter.kernels import Kernel
from tests.waiting import wait_until

PROBE = """import json, os, sys
import ipywidgets.widgets.widget as w
import nb_durable.agent
magics = [c for c in get_ipython().configurables if type(c).__name__ == "AgentMagics"]
print(json.dumps({
    "cwd": os.getcwd(),
    "left_env": os.environ.get("LEFT_BEHIND"),
    "api": os.environ.get("ANTHROPIC_BASE_URL"),
    "widgets": len(w._instances),
    "running": [r.run_id for r in sys.modules[nb_durable.agent.BackgroundRun.__module__].background_runs()],
    "max_turns": [m.max_turns == type(m).class_traits()["max_turns"].default_value for m in magics],
    "defined": "left" in get_ipython().user_ns,
}))"""


@pytest.mark.kernel
def test_a_reset_kernel_keeps_nothing_of_the_test_before(
    tmp_path: Path, server: MessagesAPIServer, kernels: Callable[[], Kernel]
) -> None:
    server.scenario = ScriptedScenario([Delay(30, reply("Too late."))])
    kernel = kernels()
    pid = kernel.manager.provisioner.pid  # type: ignore[union-attr]
    left = kernel.run(
        "import os, ipywidgets\nleft = 42\nos.environ['LEFT_BEHIND'] = '1'\n"
        "os.mkdir('elsewhere')\nos.chdir('elsewhere')\nkept = ipywidgets.Button(description='kept')\ndisplay(kept)"
    )
    assert left.status == "ok", left.text()
    assert kernel.run("%config AgentMagics.max_turns = 3").status == "ok"
    started = kernel.run("%%agent --background --run left --model claude-test-1 --workspace .\nWait for me.")
    assert started.status == "ok", started.text()
    wait_until(lambda: server.requests_to("messages"), "the background run's model call", 60)
    before = json.loads(kernel.run(PROBE).text())
    assert before["running"] == ["left"] and before["widgets"] > 1 and before["defined"], before

    # The test ends, and its Messages API with it (the server fixture closes it), mid-call.
    server.close()
    following = tmp_path / "next"
    following.mkdir()
    with MessagesAPIServer(ScriptedScenario([reply("Fresh.")])) as other:
        kernel.reset(following, ANTHROPIC_BASE_URL=other.url, ANTHROPIC_API_KEY="test-key")
        assert kernel.manager.provisioner.pid == pid, "the same kernel process, not a new one"  # type: ignore[union-attr]
        after = json.loads(kernel.run(PROBE).text())
        assert after == {
            "cwd": str(following), "left_env": None, "api": other.url, "widgets": 0, "running": [],
            "max_turns": [True], "defined": False,
        }  # fmt: skip
        assert kernel.run("left").error["ename"] == "NameError"  # type: ignore[index]
        stopped = read_run("left", tmp_path / "elsewhere" / "runs").summary
        assert stopped.holder is None and stopped.status != "running", stopped
        fresh = kernel.run("%%agent --run fresh --model claude-test-1 --workspace .\nSay something.")
        assert fresh.status == "ok" and "Fresh." in fresh.text(), fresh.text()
        assert (following / "runs" / "fresh.jsonl").is_file()
        assert len(other.requests_to("messages")) == 1, "the stopped run asked the new API"
