"""Processes that die at each point of a step reach the same end on reopen.

For every effect kind and every point (before the intent, after the intent, after the
effect, after the record), a worker process dies with ``os._exit``; a second process
reopens the run. Completed steps never run again; pure and idempotent steps in flight run
again; an external step in doubt follows the policy.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests import forkserver
from tests.conftest import make_store_url, subprocess_env
from tests.core.crash_worker import CRASH_CODE

WORKER = Path(__file__).with_name("crash_worker.py")
POINTS = ["before_intent", "after_intent", "after_effect", "after_record"]

# (effect, point, policy) -> (times "act" ran in the end, how the resumed run ends)
EXPECTED: dict[tuple[str, str, str], tuple[int, str]] = {}
for effect in ("pure", "idempotent"):
    for point in POINTS:
        EXPECTED[effect, point, "fail"] = (2 if point == "after_effect" else 1, "prepared+acted")
EXPECTED.update(
    {
        ("external", "before_intent", "fail"): (1, "prepared+acted"),
        ("external", "after_intent", "rerun"): (1, "prepared+acted"),
        ("external", "after_intent", "skip"): (0, "prepared+unknown"),
        ("external", "after_intent", "fail"): (0, "in doubt"),
        ("external", "after_effect", "rerun"): (2, "prepared+acted"),
        ("external", "after_effect", "skip"): (1, "prepared+unknown"),
        ("external", "after_effect", "fail"): (1, "in doubt"),
        ("external", "after_record", "fail"): (1, "prepared+acted"),
    }
)


def run_worker(*args: str) -> subprocess.CompletedProcess[str]:
    return forkserver.run(
        [sys.executable, str(WORKER), *args], capture_output=True, text=True, env=subprocess_env(), timeout=60, check=False
    )


@pytest.mark.parametrize("store_kind", ["jsonl", "sqlite", "postgres"])
@pytest.mark.parametrize(("effect", "point", "policy"), sorted(EXPECTED))
def test_a_crash_at_each_point_resumes_to_the_same_end(
    tmp_path: Path, store_kind: str, effect: str, point: str, policy: str
) -> None:
    store = make_store_url(store_kind, tmp_path)
    effects = tmp_path / "effects.txt"
    crashed = run_worker(store, effect, policy, str(effects), point)
    assert crashed.returncode == CRASH_CODE, crashed.stderr
    resumed = run_worker(store, effect, policy, str(effects))
    assert resumed.returncode == 0, resumed.stderr
    ran = effects.read_text().split()
    acts, outcome = EXPECTED[effect, point, policy]
    assert ran.count("prepare") == 1, "a completed step ran again"
    assert ran.count("act") == acts
    result = json.loads(resumed.stdout)
    assert result == ({"in_doubt": "act"} if outcome == "in doubt" else {"output": outcome})
    again = run_worker(store, effect, policy, str(effects))
    assert json.loads(again.stdout) == result
    assert effects.read_text().split() == ran, "a replay of the finished run executed something"
