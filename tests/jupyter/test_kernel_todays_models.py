"""Today's models in a real kernel: a thinking stream killed with its kernel, honest outcomes,
resumes that change a setting, and follow-ups, each through the magics a person types.

What must hold: a kernel SIGKILLed while a thinking stream is arriving resumes in a new
kernel and sends exactly the request it had sent (thinking blocks of earlier turns byte for
byte, so the server's signature check passes); a turn cut off at max_tokens shows as
truncated, never completed, and ``%agent_resume --max-tokens`` asks it again; ``%%agent
--continue RUN`` sends the cell's text as a follow-up; bad flags are usage errors.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from nb_durable.core.runs import read_run
from tests.fakes import MessagesAPIServer, ScriptedScenario, reply, tool_use
from tests.fakes.messages_api.content import thinking
from tests.fakes.messages_api.scenario import cut_off
from tests.jupyter.kernels import Kernel

CELL = "%%agent --run km --model claude-test-1 --workspace .\nRead the notes and report."


def messages(server: MessagesAPIServer) -> list[dict[str, object]]:
    return [r.body for r in server.requests if r.endpoint == "messages"]


def test_a_kernel_killed_mid_thinking_resumes_sending_the_identical_request(
    tmp_path: Path, server: MessagesAPIServer, kernels: Callable[[], Kernel]
) -> None:
    (tmp_path / "notes.txt").write_text("buy milk\n")
    slow = reply(thinking("Now I will summarise. " * 40), "The note says buy milk.", event_delay=0.05)
    server.scenario = ScriptedScenario(
        [
            reply(thinking("First, read the notes."), tool_use("read_file", {"path": "notes.txt"}, id="toolu_r")),
            [slow, reply(thinking("Summarising."), "The note says buy milk.")],
        ]
    )
    first = kernels()
    first.start(CELL)
    # Killed once the thinking of turn 1 shows in the timeline: well inside its 8 s stream.
    first.pump(
        lambda: any("Now I will summarise." in json.dumps(m) for m in first.widgets.models.values()),
        what="turn 1's thinking streaming into the timeline",
    )
    first.kill()
    killed = messages(server)[-1]

    second = kernels()
    resumed = second.run("%agent_resume km", timeout=60)
    assert resumed.status == "ok", resumed.text()
    assert "The note says buy milk." in resumed.text()
    again = messages(server)[-1]
    assert again == killed, "the resumed turn sends exactly what the killed one sent"
    assert again["messages"][1]["content"][0]["type"] == "thinking"  # type: ignore[index]
    assert server.rejected == []
    assert 'class="nbd-thinking' in resumed.html()


def test_a_truncated_turn_is_not_completed_and_a_resume_with_more_room_finishes_it(
    tmp_path: Path, server: MessagesAPIServer, kernels: Callable[[], Kernel]
) -> None:
    (tmp_path / "notes.txt").write_text("buy milk\n")
    server.scenario = ScriptedScenario([[cut_off(thinking("plan " * 300), "never", after=40), reply("Done.")]])
    kernel = kernels()
    cut = kernel.run(CELL, timeout=60)
    assert cut.status == "ok"
    assert "truncated" in cut.text() and "completed" not in cut.text().split("truncated")[0][-40:]
    assert read_run("km", str(tmp_path / "runs")).summary.status == "truncated"
    listed = kernel.run("%agent_runs")
    assert "truncated" in listed.text()
    bad = kernel.run("%agent_resume km --max-tokens 0")
    assert bad.status == "error" and "UsageError: --max-tokens must be at least 1" in bad.text()
    resumed = kernel.run("%agent_resume km --max-tokens 32000", timeout=60)
    assert resumed.status == "ok" and "Done." in resumed.text()
    assert [b["max_tokens"] for b in messages(server)] == [16000, 32000]


def test_a_finished_run_takes_a_follow_up_from_a_cell(
    tmp_path: Path, server: MessagesAPIServer, kernels: Callable[[], Kernel]
) -> None:
    (tmp_path / "notes.txt").write_text("buy milk\n")
    server.scenario = ScriptedScenario([reply("Read them."), reply("Sorted as well.")])
    kernel = kernels()
    assert kernel.run(CELL, timeout=60).status == "ok"
    followed = kernel.run("%%agent --continue km\nNow sort them too.", timeout=60)
    assert followed.status == "ok", followed.text()
    assert "Sorted as well." in followed.text()
    assert messages(server)[-1]["messages"][-1] == {"role": "user", "content": "Now sort them too."}  # type: ignore[index]
    steps = [s.step_id for s in read_run("km", str(tmp_path / "runs")).steps]
    assert steps == ["model:0", "user:1", "model:1"]
