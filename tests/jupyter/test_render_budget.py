"""A long run's timeline stays a sane size: past ``budget.DETAIL_BUDGET`` the middle steps keep
their one-line summary but not their detail, the first and last keep theirs, and the rows left
out say how to see them whole (``%agent_show RUN --turns``), which shows them from the log."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

import pytest

from nb_durable.agent import RunHooks, run_agent
from nb_durable.agent.display.views import RunView
from nb_durable.agent.models.messages import text_message, tool_use_message
from nb_durable.agent.models.scripted import ScriptedModel
from nb_durable.agent.run.hooks import Observers
from nb_durable.core.status import Status
from nb_durable.jupyter.budget import DETAIL_BUDGET, gap
from nb_durable.jupyter.flags import turns
from nb_durable.jupyter.timeline import Timeline

RUN = "long"
TURNS = 150
ROW = 600
"""Characters a row's markup takes beyond its detail, at most (badge, title, one-line summary, meta)."""


def content(turn: int) -> str:
    return "x" * 4000 + f"\n{end(turn)}"


def end(turn: int) -> str:
    """The end of the file of ``turn``: in its step's detail, beyond its one-line summary."""
    return f"end of the file read at turn {turn:04d}"


def long_run(tmp_path: Path, observer: Any = None) -> str:
    """A run of 300 steps, every tool output 4 KB, each saying its turn: 1.2 MB of detail."""
    for turn in range(TURNS):
        (tmp_path / f"f{turn:04d}.txt").write_text(content(turn))
    replies = [tool_use_message([("read_file", {"path": f"f{t:04d}.txt"}, f"toolu_{t:04d}")], text=f"Reading {t}.") for t in range(TURNS)]
    replies.append(text_message("Read them all."))
    hooks = RunHooks(sleep=lambda s: None) if observer is None else RunHooks(sleep=lambda s: None, observer=observer)
    run_agent(
        "read every file", run_id=RUN, client=ScriptedModel(replies), model="claude-test-1", workspace=tmp_path,
        store=str(tmp_path / "runs"), max_turns=TURNS + 2, hooks=hooks,
    )  # fmt: skip
    return str(tmp_path / "runs")


def test_the_gap_keeps_the_ends_and_leaves_out_one_middle_within_the_budget() -> None:
    assert gap([10] * 5, 100) == (5, 5), "all fit: nothing left out"
    start, end = gap([10] * 100, 95)
    assert 0 < start < end < 100
    assert 10 * (start + 100 - end) <= 95 < 10 * (start + 100 - end + 1)
    assert abs(start - (100 - end)) <= 1, "as many from either end"
    assert gap([500, 10, 10, 500], 100) == (1, 3), "the first and the last keep theirs, whatever they weigh"
    assert gap([10] * 50, None) == (50, 50)


def test_a_long_runs_page_keeps_every_summary_the_ends_whole_and_says_how_to_see_the_middle(ip: Any, tmp_path: Path) -> None:
    long_run(tmp_path)
    bundle = ip.run_line_magic("agent_show", RUN)._repr_mimebundle_()
    page, text = bundle["text/html"], bundle["text/plain"]
    steps = 2 * TURNS + 1
    assert page.count('class="nbd-step ') == steps, "every step keeps its row"
    assert len(page) < DETAIL_BUDGET + steps * ROW + 20_000, f"{len(page):,} characters for {steps} steps"
    assert end(0) in page and end(TURNS - 1) in page, "the first and last steps keep their detail"
    assert end(TURNS // 2) not in page
    note = re.search(r'<div class="nbd-gap">([\d,]+) steps \(turns (\d+)-(\d+)\): [^<]*%agent_show long --turns \2-\3', page)
    assert note, page[:3000]
    left_out, first, last = int(note.group(1).replace(",", "")), int(note.group(2)), int(note.group(3))
    assert page.count('<div class="nbd-detail nbd-left-out">') == left_out
    assert f"%agent_show long --turns {TURNS // 2} shows it" in page, "each row left out says how to see it"
    assert f"%agent_show long --turns {first}-{last}" in text and "nb-durable export long" in text
    whole = ip.run_line_magic("agent_show", f"{RUN} --turns {TURNS // 2}")._repr_mimebundle_()
    assert content(TURNS // 2) in whole["text/html"], "the step left out, shown whole from the log"
    assert 'class="nbd-gap"' not in whole["text/html"] and whole["text/html"].count('class="nbd-step ') == 2
    assert f"turns {TURNS // 2} only (2 of {steps} steps), each step whole" in whole["text/plain"]


def test_a_short_runs_page_leaves_nothing_out(ip: Any, tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text(content(0))
    run_agent(
        "read", run_id="short", client=ScriptedModel([tool_use_message([("read_file", {"path": "a.txt"}, "toolu_1")]), text_message("Done.")]),
        model="claude-test-1", workspace=tmp_path, store=str(tmp_path / "runs"),
    )  # fmt: skip
    page = ip.run_line_magic("agent_show", "short")._repr_mimebundle_()["text/html"]
    assert content(0) in page and 'class="nbd-gap"' not in page and 'nbd-left-out"' not in page


@pytest.mark.parametrize("given", ["x", "7-3", "-3", "3-", "1-2-3"])
def test_turns_refuses_what_is_not_a_turn_or_a_range(given: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="such as 7 or 7-93"):
        turns(given)
    assert turns("7") == (7, 7) and turns("7-93") == (7, 93)


def test_the_live_widget_holds_the_detail_of_a_bounded_part_of_its_rows(tmp_path: Path) -> None:
    timeline = Timeline(RunView(RUN, Status.RUNNING), throttle=0)
    timeline.finish = lambda: None  # type: ignore[method-assign]  # keep the widgets to weigh them
    store = long_run(tmp_path, Observers(timeline))
    widgets = [row for box in timeline._rows.box.children for row in box.children]
    rows = [row.value for row in widgets]
    assert len(rows) == 2 * TURNS + 1
    # A saved notebook keeps every model's state: a row is one, its layout and style shared by all.
    models = {id(model) for row in widgets for model in (row, row.layout, row.style)}
    assert len(models) == len(rows) + 2, f"{len(models)} widget models for {len(rows)} rows"
    held = sum(len(r) for r in rows)
    assert held < DETAIL_BUDGET + len(rows) * ROW, f"the live rows hold {held:,} characters"
    assert end(0) in rows[1] and end(TURNS - 1) in rows[-2]
    assert sum('nbd-left-out"' in r for r in rows) > TURNS // 2
    replay = Timeline(RunView(RUN, Status.RUNNING), throttle=0)
    replay.finish = lambda: None  # type: ignore[method-assign]
    run_agent("read every file", run_id=RUN, client=ScriptedModel([]), model="claude-test-1", workspace=tmp_path, store=store,
              max_turns=TURNS + 2, hooks=RunHooks(observer=replay))  # fmt: skip
    replayed = replay._replayed.value
    assert replayed.count('class="nbd-step ') == 2 * TURNS + 1 and 'class="nbd-gap"' in replayed
    assert len(replayed) < DETAIL_BUDGET + (2 * TURNS + 1) * ROW + 2_000


def test_a_restart_closes_the_old_rows_but_not_the_layout_and_style_the_new_ones_share(tmp_path: Path) -> None:
    timeline = Timeline(RunView(RUN, Status.RUNNING), throttle=0)
    timeline.finish = lambda: None  # type: ignore[method-assign]
    long_run(tmp_path, Observers(timeline))
    old = [row for box in timeline._rows.box.children for row in box.children]
    timeline.restart(RunView(RUN, Status.RUNNING))
    assert all(row.comm is None for row in old), "the rows of the session before stay open"
    shared = timeline._rows.shared
    assert len(shared) == 2 and all(part.comm is not None for part in shared), "the layout and style new rows share were closed"
    timeline._close()  # no row made since: the pair is closed all the same
    assert all(part.comm is None for part in shared), "the rows' shared layout and style outlive the timeline"
