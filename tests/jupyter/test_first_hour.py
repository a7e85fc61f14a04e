"""A new user's first hour in a notebook: a timeline cut off by a dead kernel, where runs live.

* A kernel SIGKILLed while its cell's model call is in flight leaves outputs (what the
  notebook saves: ``nbformat.v4.output_from_msg`` of each message) that never say the run is
  running or a step in flight, and say how to resume it; the widget itself, while the run
  goes, says the same. The new kernel's ``%agent_resume`` completes it, and its finished
  timeline names the log and no longer offers the hint.
* ``%agent_runs`` says where the runs live; in Chromium, at the width of a notebook's
  output, every run id stays on one line.
"""

from __future__ import annotations

import json
import queue
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from IPython.core.error import UsageError

from nb_durable.agent import run_id_for
from nb_durable.agent.models.demo import DEMO_TASK
from tests.fakes import Delay, MessagesAPIServer, ScriptedScenario, reply, tool_use
from tests.jupyter.kernels import Kernel

CELL = "%%agent --run kr --model claude-test-1 --workspace .\nWrite a note, then think about it."


@pytest.fixture
def server() -> Iterator[MessagesAPIServer]:
    turns: list[Any] = [
        reply("A note first.", tool_use("write_file", {"path": "note.txt", "content": "hi\n"}, id="toolu_w")),
        [Delay(60, reply("too late")), reply("The note says hi.")],
    ]
    with MessagesAPIServer(ScriptedScenario(turns)) as s:
        yield s


def drain(kernel: Kernel, msg_id: str, until: Any, timeout: float = 60) -> list[dict[str, Any]]:
    """The cell's iopub messages (outputs and widget comm traffic) until ``until()`` holds, then 1 s more."""
    messages: list[dict[str, Any]] = []
    deadline, quiet_until = time.monotonic() + timeout, None
    while time.monotonic() < (quiet_until or deadline):
        try:
            msg = kernel.client.get_iopub_msg(timeout=0.1)
        except queue.Empty:
            msg = None
        if msg is not None and msg["parent_header"].get("msg_id") == msg_id:
            messages.append(msg)
        if quiet_until is None and until():
            quiet_until = time.monotonic() + 1.0
    assert quiet_until is not None, "the condition never held"
    return messages


@pytest.mark.kernel
def test_a_timeline_cut_off_by_a_dead_kernel_says_how_to_resume(tmp_path: Path, server: MessagesAPIServer) -> None:
    first = Kernel(tmp_path, ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="test-key")
    try:
        assert first.run("%load_ext nb_durable").status == "ok"
        cell = first.start(CELL)
        messages = drain(first, cell.msg_id, lambda: len(server.requests_at(1)) >= 1)
    finally:
        first.kill()

    saved = [
        nbformat.v4.output_from_msg(m) for m in messages if m["msg_type"] in ("display_data", "update_display_data")
    ]
    assert saved, "the cell showed its timeline"
    html = saved[-1]["data"]["text/html"]
    plain = saved[-1]["data"]["text/plain"]
    body = re.sub(r"<style>.*?</style>", "", html, flags=re.S)
    visible = re.sub(r"<[^>]+>", " ", body)
    for shown in (visible, plain):
        assert "%agent_resume kr" in shown and "if the kernel restarts" in shown, shown
        assert "running" not in shown and "in flight" not in shown, "a saved timeline never claims a live run"
    assert "nbd-run-running" not in body and "nbd-in_flight" not in body
    assert plain.startswith("run kr: started")

    headers = [
        m["content"]["data"]["state"]["value"]
        for m in messages
        if m["msg_type"] in ("comm_open", "comm_msg")
        and "nbd-header" in str(m["content"].get("data", {}).get("state", {}).get("value", ""))
    ]
    assert headers, "the widget's header went to the front end"
    live = headers[-1]
    assert "nbd-run-running" in live and "%agent_resume kr" in live, "the live widget says how to go on"
    assert "log: runs/kr.jsonl" in live, "and where the run's log is"

    second = Kernel(tmp_path, ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="test-key")
    try:
        assert second.run("%load_ext nb_durable").status == "ok"
        resumed = second.run("%agent_resume kr")
    finally:
        second.close()
    assert resumed.status == "ok", resumed.text()
    page = resumed.html()
    assert "The note says hi." in page and "nbd-run-completed" in page
    assert "%agent_resume" not in page, "a finished run needs no hint"
    assert "log: runs/kr.jsonl" in page


def test_agent_runs_says_where_runs_live(ip: Any) -> None:
    ip.run_cell_magic("agent", "--demo", DEMO_TASK)
    table = ip.run_line_magic("agent_runs", "")
    where = Path.cwd() / "runs"
    assert repr(table).splitlines()[0] == f"1 run in {where}"
    assert f"<caption>1 run in {where}</caption>" in table._repr_html_()
    with pytest.raises(UsageError, match="--status: must be one of queued, running, .*, not 'complete'"):
        ip.run_line_magic("agent_runs", "--status complete")



def test_a_notebook_run_is_tagged_as_a_terminal_one_and_found_by_its_tag(ip: Any) -> None:
    """%agent_runs filtered by --tag, but %%agent could not tag a run (the flag was the CLI's only)."""
    ip.run_cell_magic("agent", f"--demo --run {run_id_for(DEMO_TASK)}-t --tag exp1 --tag fast", DEMO_TASK)
    ip.run_cell_magic("agent", f"--demo --run {run_id_for(DEMO_TASK)}-u", DEMO_TASK)
    tagged = ip.run_line_magic("agent_runs", "--tag exp1 --tag fast")
    assert [s.run_id for s, _ in tagged.rows] == [f"{run_id_for(DEMO_TASK)}-t"]
    assert tagged.rows[0][0].settings["tags"] == ["exp1", "fast"]


def test_a_workspace_that_is_not_a_folder_is_a_mistake_in_the_cell_and_records_nothing(ip: Any) -> None:
    """It was a RunError (a failed run's traceback) from the session, not the cell's usage error."""
    with pytest.raises(UsageError, match="workspace of run 'w' must be a folder that exists: create it .*, not '.*no-such-folder'"):
        ip.run_cell_magic("agent", "--demo --run w --workspace no-such-folder", DEMO_TASK)
    assert not (Path.cwd() / "runs" / "w.jsonl").exists()

def test_agent_runs_keeps_each_run_id_on_one_line_in_a_browser(ip: Any, browser: Any) -> None:
    for n in range(3):
        ip.run_cell_magic("agent", f"--demo --run {run_id_for(DEMO_TASK)}-{n}", DEMO_TASK)
    html = ip.run_line_magic("agent_runs", "")._repr_html_()
    page = browser.new_page(viewport={"width": 760, "height": 600})  # a notebook's output area
    try:
        page.set_content(f"<body style='margin:0;width:700px'>{html}</body>")
        heights = page.eval_on_selector_all(
            "table.nbd-runs tbody td:first-child code",
            "cells => cells.map(c => [c.getClientRects().length, c.getBoundingClientRect().height,"
            " parseFloat(getComputedStyle(c).lineHeight) || 16])",
        )
    finally:
        page.close()
    assert len(heights) == 3
    assert all(lines == 1 for lines, _, _ in heights), json.dumps(heights)
