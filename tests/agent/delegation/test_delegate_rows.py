"""A delegate row's time is its child's: two delegations started in one turn run side by side,
so the run waits on the first while the second works; the second's row showed that wait
(``0.00s``), not how long its child ran. Read back (``%agent_show``) as well as live: there the
time is the child's index row's, first event to last, as the step's record holds only the wait."""

from __future__ import annotations

import io
import re
from pathlib import Path

from nb_durable.agent import DemoModel, RunHooks, run_agent
from nb_durable.agent.display.progress import TextProgress
from nb_durable.agent.models.demo import DEMO_TASK, prepare_demo_workspace
from nb_durable.core.runs import read_run
from nb_durable.jupyter.cells import show_run


def delegated(tmp_path: Path) -> str:
    """The demo's run with two children run side by side: what the terminal printed live."""
    work = prepare_demo_workspace(tmp_path / "work")
    out = io.StringIO()
    result = run_agent(
        DEMO_TASK, run_id="demo", client=DemoModel(latency=0.05), store=str(tmp_path / "runs"), workspace=str(work),
        delegate=True, hooks=RunHooks(observer=TextProgress(out, width=200, live=False)),
    )  # fmt: skip
    assert result.status == "completed", result.detail
    return out.getvalue()


def test_both_of_two_concurrent_delegate_rows_show_how_long_their_child_ran(tmp_path: Path) -> None:
    out = delegated(tmp_path)
    took = [float(s) for s in re.findall(r"^  live      delegate\s+(\d+\.\d\d)s", out, re.M)]
    # Each child makes several model calls of 0.05s at least.
    assert len(took) == 2 and min(took) >= 0.1, out


def test_delegate_rows_read_back_show_how_long_their_child_ran(tmp_path: Path) -> None:
    live = [float(s) for s in re.findall(r"^  live      delegate\s+(\d+\.\d\d)s", delegated(tmp_path), re.M)]
    store = str(tmp_path / "runs")
    recorded = {s.step_id: s.ms for s in read_run("demo", store).steps}
    page = show_run("demo", store).html
    summary = r'<span class="nbd-badge">recorded</span><span class="nbd-title">delegate</span><span class="nbd-brief">[^<]*</span>'
    rows = re.findall(rf'data-step="(tool:0:\d:[^"]+)"><details><summary>{summary}<span class="nbd-meta">(\d+\.\d\d)s</span>', page)
    shown = [float(s) for _, s in rows]
    assert len(shown) == 2 and min(shown) >= 0.1, (shown, live)
    # Each the child's own time, as live (first event to last of its log, where live counts from
    # when its thread took it up: close, not equal).
    assert all(abs(a - b) < 0.5 for a, b in zip(shown, live, strict=True)), (shown, live)
    # What the log records is untouched: the second call's step still holds the wait alone.
    assert recorded == {s.step_id: s.ms for s in read_run("demo", store).steps}
    assert min(recorded[step] or 0.0 for step, _ in rows) < min(shown) * 1000, (recorded, shown)
