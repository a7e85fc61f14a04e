"""A tool step's line at a narrow terminal: its input takes the room the other columns leave.

At 80 columns a tool's input was cut to ten characters (``$ grep -r…``) while a listing's
time column stood empty on every line and the output kept 30 characters it might not have.
Now a listing (``nb-durable show``) has no time column, what came back keeps only what it has
(up to 30 characters, never more than half the room), and the input takes the rest; a live
run's lines keep their time column. No line is wider than the terminal.
"""

from __future__ import annotations

import io

from nb_durable.agent.display.progress import TextProgress
from nb_durable.agent.display.views import StepState, StepView

COMMAND = "grep -rn 'def main' src/ | head -20"


def line(step: StepView, *, listing: bool, width: int = 80) -> str:
    out = io.StringIO()
    TextProgress(out, width=width, listing=listing, live=False).step_changed(step)
    (said,) = out.getvalue().splitlines()
    assert len(said) <= width, said
    return said


def bash(state: StepState, output: str, ms: float | None = None) -> StepView:
    return StepView("tool:0:0:t1", "tool", 0, state, "run_bash", input={"command": COMMAND}, output=output, ms=ms)


def test_a_listing_gives_a_tool_s_input_the_room_a_short_output_leaves() -> None:
    said = line(bash("recorded", "1 [exit status 0]"), listing=True)
    assert said.endswith("$ grep -rn 'def main' src/…  -> 1 [exit status 0]") and len(said) == 80, said
    assert f"$ {COMMAND}  -> 1 [exit status 0]" in line(bash("recorded", "1 [exit status 0]"), listing=True, width=90)


def test_a_long_output_leaves_the_input_half_the_room_at_80_columns() -> None:
    said = line(bash("recorded", "grep: src/: No such file or directory " * 3), listing=True)
    shown_input = said.split("$ ", 1)[1].split("  -> ", 1)[0]
    assert len(shown_input) >= 20 and shown_input.startswith("grep -rn 'def main'"), said
    assert "  -> grep: src/" in said, said


def test_a_live_run_keeps_its_time_column() -> None:
    said = line(bash("live", "1 [exit status 0]", ms=1234.0), listing=False)
    assert " 1.23s    $ grep -rn" in said, said


def test_the_room_a_wide_terminal_gives_is_unchanged_for_what_came_back() -> None:
    output = "y" * 300
    said = line(bash("recorded", output), listing=True, width=200)
    assert f"$ {COMMAND}  -> " in said and said.count("y") > 100, said
