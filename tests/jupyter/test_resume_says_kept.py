"""A resume says which ``%config`` values it keeps the run's recorded settings over.

``%agent_resume`` goes on with every setting the run recorded, as documented, but said
nothing: a person who set ``%config AgentMagics.model = "claude-x"`` and resumed believed the
run went on with claude-x. Now it says so once, before the timeline, with the flag that
changes each setting a resume may change; and nothing when nothing differs.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from nb_durable.core.runs import read_run
from tests.fakes import MessagesAPIServer, ScriptedScenario, reply, tool_use
from tests.jupyter.kernels import Kernel

SAID = "goes on with its recorded settings"


def _models(server: MessagesAPIServer) -> list[str]:
    return [str(r.body["model"]) for r in server.requests if r.endpoint == "messages"]


@pytest.mark.kernel
def test_a_resume_says_once_which_config_values_the_run_keeps_its_own_over(
    tmp_path: Path, server: MessagesAPIServer, kernels: Callable[[], Kernel]
) -> None:
    (tmp_path / "notes.txt").write_text("buy milk\n")
    server.scenario = ScriptedScenario([
        reply(tool_use("read_file", {"path": "notes.txt"}, id="toolu_a")),
        reply(tool_use("read_file", {"path": "notes.txt"}, id="toolu_b")),
        reply("The notes say: buy milk."),
        reply("You are welcome."),
    ])  # fmt: skip
    kernel = kernels()
    started = kernel.run("%%agent --run k --model claude-test-1 --max-turns 1 --max-usd 3 --workspace .\nRead the notes.")
    assert started.status == "ok", started.text()
    assert SAID not in started.text()
    for line in (
        'AgentMagics.model = "claude-test-2"',
        "AgentMagics.max_usd = 5",
        'AgentMagics.workspace = "elsewhere"',
        "AgentMagics.max_tokens = 16000",  # as recorded: nothing to say
        "AgentMagics.max_turns = 2",  # a resume takes it for its session: nothing to say
    ):
        assert kernel.run(f"%config {line}").status == "ok"

    resumed = kernel.run("%agent_resume k")
    assert resumed.status == "ok", resumed.text()
    here = tmp_path.resolve()
    assert resumed.outputs[0]["msg_type"] == "stream", "said before the timeline"
    assert resumed.text().startswith(
        "nb_durable: run k goes on with its recorded settings, not %config's: model claude-test-1, not claude-test-2 "
        f"(--model changes it); workspace {here}, not {here / 'elsewhere'} (fixed when the run started); "
        "max_usd 3.0, not 5.0 (--max-usd changes it)\n"
    ), resumed.text()
    assert resumed.text().count(SAID) == 1
    assert _models(server) == ["claude-test-1", "claude-test-1"], "the run went on with its own model"
    record = read_run("k", str(tmp_path / "runs"))
    assert (record.summary.settings["model"], record.summary.settings["max_usd"]) == ("claude-test-1", 3.0)
    assert not [s.step_id for s in record.steps if s.step_id.startswith("settings:")], "nothing recorded of %config"

    # What the line gives is applied, so not said; what it changed is then the run's own.
    assert kernel.run("%config AgentMagics.max_turns = 3").status == "ok"
    changed = kernel.run("%agent_resume k --model claude-test-2 --max-usd 5")
    assert changed.status == "ok", changed.text()
    assert changed.text().startswith(
        f"nb_durable: run k goes on with its recorded settings, not %config's: workspace {here}, not {here / 'elsewhere'} "
        "(fixed when the run started)\n"
    ), changed.text()
    assert _models(server)[-1] == "claude-test-2"

    # Nothing differs now: the model and budget %config names are those the run changed to.
    assert kernel.run("%config AgentMagics.workspace = None").status == "ok"
    again = kernel.run("%agent_resume k")
    assert again.status == "ok", again.text()
    assert SAID not in again.text() and "%config" not in again.text(), again.text()

    # A follow-up goes on with the run as recorded too, and says so the same way.
    assert kernel.run("%config AgentMagics.max_usd = 9").status == "ok"
    follow = kernel.run("%%agent --continue k\nThanks.")
    assert follow.status == "ok", follow.text()
    assert follow.text().startswith(
        "nb_durable: run k goes on with its recorded settings, not %config's: max_usd 5.0, not 9.0 (--max-usd changes it)\n"
    ), follow.text()
