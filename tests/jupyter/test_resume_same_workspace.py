"""``%agent_resume RUN --workspace SAME`` goes on; another workspace is refused (see
tests/agent/test_resume_same_settings.py for the rule and the other front ends)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from IPython.utils.capture import capture_output


def test_agent_resume_takes_the_recorded_workspace_again(ip: Any, tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    with capture_output():
        ip.run_cell("%%agent --demo --run m --max-turns 1 --workspace work\nLook around.")
        other = ip.run_cell("%agent_resume m --workspace .")
        assert not other.success and "the run recorded" in str(other.error_in_exec), other.error_in_exec
        resumed = ip.run_cell(f"%agent_resume m --max-turns 30 --workspace {os.path.join('.', 'work')} -o res")
    assert resumed.success, resumed.error_in_exec
    assert ip.user_ns["res"].status == "completed"
