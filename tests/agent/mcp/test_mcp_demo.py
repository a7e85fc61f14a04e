"""Offline, the demo model uses the MCP tools a run is given: the docs' ``--mcp`` example does what it says.

* ``nb-durable run --mcp mcp.json "Find my notes about the release, ..."`` with no key, on the
  bundled notes server (a real stdio MCP server): the demo searches the notes for "release",
  tags the note it found, sends a note to the team, and reports each answer; every call is a
  recorded MCP step, the outbox holds one line with the step's idempotency key, and dollars
  are labelled simulated. The same command again replays the run: no call reaches the server
  again, the outbox keeps its one line.
* A search that finds nothing tags nothing; a server whose tools have other names (the
  ledger's ``lookup``/``append``) leaves the demo on its own project, as before.
* Arguments come from each tool's input schema, by property name, then type.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from nb_durable.agent import mcp_example_config
from nb_durable.agent.models.demo import DemoModel
from nb_durable.agent.models.demo.offered import arguments, keyword_of, plan_for, recipient_of
from nb_durable.core.runs import read_run
from tests import forkserver
from tests.conftest import subprocess_env

TASK = "Find my notes about the release, tag them, and send a summary to the team."


def offline(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return forkserver.run(
        [sys.executable, "-m", "nb_durable.cli", *args],
        cwd=cwd, env=subprocess_env(NB_DURABLE_DEMO_LATENCY="0"),
        capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip


def notes_folder(tmp_path: Path, notes: dict[str, str]) -> Path:
    folder = tmp_path / "notes"
    folder.mkdir()
    for name, text in notes.items():
        (folder / name).write_text(text + "\n")
    (tmp_path / "mcp.json").write_text(json.dumps(mcp_example_config(folder)))
    return folder


@pytest.mark.slow(20)
def test_offline_the_demo_searches_tags_and_sends_with_the_notes_server(tmp_path: Path) -> None:
    folder = notes_folder(tmp_path, {"standup.md": "Standup: the release moves to Friday.", "lunch.md": "Lunch."})
    done = offline("run", "--mcp", "mcp.json", TASK, "--run", "notes", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "offline demo model" in done.stderr and "MCP servers it is given" in done.stderr
    assert "`search_notes` found `standup.md`" in done.stdout
    assert "`tag_note` answered `standup.md: release`" in done.stdout
    assert "`send_note` answered `sent to team`" in done.stdout
    assert "simulated $" in done.stdout
    assert json.loads((folder / "tags.json").read_text()) == {"standup.md": ["release"]}
    [sent] = (folder / "outbox.txt").read_text().splitlines()
    key, line = sent.split("\t")
    assert line == "team: The offline demo searched for 'release': found standup.md."

    run = read_run("notes", str(tmp_path / "runs"))
    calls = [(s.step_id, s.result) for s in run.steps if s.step_id.startswith("tool:")]
    assert [step.split(":")[1:3] for step, _ in calls] == [["0", "0"], ["1", "0"], ["2", "0"]]
    assert key == f"notes:{calls[2][0]}", "the send carried its step's idempotency key"
    assert run.summary.status == "completed"

    again = offline("run", "--mcp", "mcp.json", TASK, "--run", "notes", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "0 live" in again.stdout
    assert len((folder / "outbox.txt").read_text().splitlines()) == 1


@pytest.mark.slow(10)
def test_offline_a_search_that_finds_nothing_tags_nothing(tmp_path: Path) -> None:
    folder = notes_folder(tmp_path, {"lunch.md": "Lunch on Thursday."})
    done = offline("run", "--mcp", "mcp.json", TASK, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "`search_notes` found nothing (`no note matches`)" in done.stdout
    assert not (folder / "tags.json").exists()
    [sent] = (folder / "outbox.txt").read_text().splitlines()
    assert sent.endswith("team: The offline demo searched for 'release': found nothing.")


def test_tools_with_other_names_leave_the_demo_on_its_project() -> None:
    # The ledger server's tools (tests/agent/mcp/ledger_server.py): none searches, tags or sends.
    schemas: dict[str, dict[str, object]] = {"lookup": {}, "set_label": {}, "append": {}, "read_file": {}, "list_dir": {}}
    assert plan_for(schemas, ("list_dir", "read_file", "write_file", "run_bash")) is None
    builtin = [{"name": n, "input_schema": {"type": "object"}} for n in ("list_dir", "read_file", "write_file", "run_bash")]
    request = {"messages": [{"role": "user", "content": TASK}], "tools": [*builtin, {"name": "append", "input_schema": {}}]}
    first = DemoModel(latency=0).create(request)["message"]
    assert [b["input"] for b in first["content"] if b["type"] == "tool_use"] == [{"path": "."}], "the demo project, as before"


def test_arguments_follow_the_schema() -> None:
    schema = {
        "type": "object",
        "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}, "exact": {"type": "boolean"}},
        "required": ["query", "limit", "exact"],
    }
    assert arguments(schema, {"query": "release", "": "release"}) == {"query": "release", "limit": 1, "exact": False}
    assert arguments({"properties": {"x": {}}}, {"": "v"}) == {}, "only required properties are filled"
    assert keyword_of(TASK) == "release" and keyword_of("What do my notes say?") == ""
    assert recipient_of(TASK) == "team" and recipient_of("Tell Ada about it") == "Ada" and recipient_of("Search") == "me"
    plan = plan_for({"search_notes": {}, "search": {}, "tag_note": {}, "whoami": {}}, ())
    assert plan is not None and [(r, n) for r, n, _ in plan.tools] == [("search", "search"), ("tag", "tag_note")]
