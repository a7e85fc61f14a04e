"""The rule that makes the run index's rows is pinned to its version.

A stored row is believed only when the rule in use made it (``core.index.rows.current_rule``),
so a change to what ``row_of`` or the agent's figures counter makes of a log must raise
``ROW_RULE`` or ``AgentFigures.rule``: else every row an older version stored would be believed
with the old figures. ``rows.json`` beside the 0.1 logs of ``tests/fixtures/logs`` holds the rows
the rule in use makes of them; this test fails when they change under the same rule, and asks
for the file to be made again once the rule is raised::

    python tests/core/test_row_rule.py     # writes tests/fixtures/logs/rows.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

import nb_durable.agent  # noqa: F401  (registers the agent's figures counter, as any agent run does)
from nb_durable.core.history import History
from nb_durable.core.index.rows import current_rule, row_of
from nb_durable.core.stores import opened

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"
PINNED = LOGS / "rows.json"
_WHEN_WRITTEN = ("rule",)
"""What a row holds that is not made from the log: the rule's own name, pinned beside the rows."""


def _of_the_log(row: dict[str, Any]) -> dict[str, Any]:
    """A row without what is not the rule's: its stamp, and its dollars, which follow the price
    table installed (genai-prices), not the rule."""
    out = {k: v for k, v in row.items() if k not in _WHEN_WRITTEN}
    out["figures"] = {k: v for k, v in row["figures"].items() if not k.endswith("dollars")}
    return out


def rows_now() -> dict[str, Any]:
    """The rows the rule in use makes of the fixture logs (read in place: nothing is written)."""
    out: dict[str, Any] = {}
    with opened(str(LOGS / "jsonl")) as store:
        for run_id in sorted(store.run_ids()):
            out[run_id] = _of_the_log(row_of(History.load(run_id, store.load(run_id))).to_json())
    return out


def test_the_rows_of_a_log_change_only_with_the_rule() -> None:
    pinned = json.loads(PINNED.read_text(encoding="utf-8"))
    assert pinned["rule"] == current_rule(), (
        f"the row rule is now {current_rule()} ({PINNED.name} pins {pinned['rule']}): "
        f"make the file again with python {Path(__file__).relative_to(LOGS.parents[2])}"
    )
    assert rows_now() == pinned["rows"], (
        "row_of or the agent's figures counter now makes other rows of the same logs: raise ROW_RULE "
        "(core/index/rows.py) or AgentFigures.rule (agent/money/figures.py), so rows stored by the older "
        f"rule are recounted, not believed, then make {PINNED.name} again"
    )


if __name__ == "__main__":
    PINNED.write_text(json.dumps({"rule": current_rule(), "rows": rows_now()}, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {PINNED} (rule {current_rule()})", file=sys.stderr)


CORE_ONLY = """
import json, sys
from nb_durable.core.index.check import check_index, repair_index
from nb_durable.core.runs import list_runs
from nb_durable.core.stores import open_store
assert "nb_durable.agent" not in sys.modules
with open_store(sys.argv[1]) as store:
    problems = check_index(store)
    repaired = repair_index(store)[0]
print(json.dumps({"figures": {s.run_id: dict(s.figures) for s in list_runs(sys.argv[1])}, "problems": problems, "repaired": repaired}))
"""


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_a_process_that_counts_no_figures_believes_the_rows_an_agent_made(kind: str, tmp_path: Path) -> None:
    """A process that never imported the agent (``from nb_durable.core... import list_runs``)
    has no figures counter, so its rule read every row an agent wrote as an older one's: its
    listings recounted them with no tokens or dollars, its check-index flagged every run, its
    repair stripped their figures, and a JSONL sidecar flipped between the two kinds of row."""
    import subprocess

    from nb_durable.agent.models.messages import text_message
    from nb_durable.agent.models.scripted import ScriptedModel
    from nb_durable.agent.run.loop import run_agent
    from nb_durable.core.runs import list_runs
    from tests.conftest import make_store_url, subprocess_env

    store = make_store_url(kind, tmp_path)
    run_agent("say hi", run_id="r", client=ScriptedModel([text_message("hi")]), model="claude-test-1", workspace=tmp_path, store=store)
    made = {s.run_id: dict(s.figures) for s in list_runs(store)}
    assert made["r"]["tokens"] > 0 and made["r"]["dollars"] > 0
    sidecar = tmp_path / "runs" / ".index" / "runs.json"
    before = sidecar.read_bytes() if kind == "jsonl" else b""
    seen = subprocess.run(
        [sys.executable, "-c", CORE_ONLY, store], capture_output=True, text=True, env=subprocess_env(), check=True
    )
    assert json.loads(seen.stdout) == {"figures": made, "problems": [], "repaired": []}, seen.stderr
    if kind == "jsonl":
        assert sidecar.read_bytes() == before
    assert {s.run_id: dict(s.figures) for s in list_runs(store)} == made
