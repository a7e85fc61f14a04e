"""A delegate row's time is its child's: two delegations started in one turn run side by side,
so the run waits on the first while the second works; the second's row showed that wait
(``0.00s``), not how long its child ran."""

from __future__ import annotations

import io
import re
from pathlib import Path

from nb_durable.agent import DemoModel, RunHooks, run_agent
from nb_durable.agent.display.progress import TextProgress
from nb_durable.agent.models.demo import DEMO_TASK, prepare_demo_workspace


def test_both_of_two_concurrent_delegate_rows_show_how_long_their_child_ran(tmp_path: Path) -> None:
    work = prepare_demo_workspace(tmp_path / "work")
    out = io.StringIO()
    result = run_agent(
        DEMO_TASK, run_id="demo", client=DemoModel(latency=0.05), store=str(tmp_path / "runs"), workspace=str(work),
        delegate=True, hooks=RunHooks(observer=TextProgress(out, width=200, live=False)),
    )  # fmt: skip
    assert result.status == "completed", result.detail
    took = [float(s) for s in re.findall(r"^  live      delegate\s+(\d+\.\d\d)s", out.getvalue(), re.M)]
    # Each child makes several model calls of 0.05s at least.
    assert len(took) == 2 and min(took) >= 0.1, out.getvalue()
