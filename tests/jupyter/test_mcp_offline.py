"""The docs' notebook example ``%%agent --mcp mcp.json`` does what it says with no key.

In a real InteractiveShell with no key, the cell of the MCP page, with the bundled notes server
(a real stdio MCP server) on a folder holding one note: the demo model searches, tags and sends
through the server, the cell shows the MCP steps in its timeline, and running the cell again
replays it without a second note in the outbox.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from IPython.utils.capture import capture_output

from nb_durable.agent import mcp_example_config

MCP_PAGE = Path(__file__).resolve().parents[2] / "docs" / "mcp.md"


def the_page_s_cell() -> str:
    """The ``%%agent --mcp`` cell as docs/mcp.md shows it."""
    match = re.search(r"```\n(%%agent --mcp mcp\.json\n.*?)\n```", MCP_PAGE.read_text(), re.S)
    assert match, "docs/mcp.md shows a %%agent --mcp cell"
    return match.group(1)


@pytest.mark.slow(10)
def test_the_mcp_cell_searches_tags_and_sends_offline(ip: Any, tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "standup.md").write_text("Standup: the release moves to Friday.\n")
    (tmp_path / "mcp.json").write_text(json.dumps(mcp_example_config(notes)))
    cell = the_page_s_cell().replace("%%agent --mcp mcp.json", "%%agent --mcp mcp.json -o res", 1)
    with capture_output() as captured:
        done = ip.run_cell(cell)
    assert done.success, done.error_in_exec
    assert "offline demo model" in captured.stdout
    result = ip.user_ns["res"]
    assert result.status == "completed"
    assert "`send_note` answered `sent to team`" in result.text
    page = captured.outputs[-1].data["text/html"]
    for tool in ("search_notes", "tag_note", "send_note"):
        assert tool in page, f"the timeline shows the {tool} step"
    assert json.loads((notes / "tags.json").read_text()) == {"standup.md": ["release"]}
    assert len((notes / "outbox.txt").read_text().splitlines()) == 1
    with capture_output():
        again = ip.run_cell(cell)
    assert again.success and ip.user_ns["res"].live_steps == 0
    assert len((notes / "outbox.txt").read_text().splitlines()) == 1, "replay sent no second note"
