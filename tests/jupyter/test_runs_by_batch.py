"""Naming a batch wrongly to a listing: ``nb-durable runs --batch``, ``nb-durable wait --batch``
and ``%agent_runs --batch`` say the same thing, and none says what only queueing could.

``runs --batch batch-typo`` said "no runs match those filters" (exit 0) where ``wait`` said no
run was submitted in that batch; ``%agent_runs --batch missing.jsonl`` ended in a raw
``ValueError`` where the CLI said the file is missing; and a file with a bad line, given to a
listing, told the person that "nothing was queued" and to "submit the batch again".
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError

from nb_durable.agent.fleet.batch import submit
from nb_durable.errors import EXIT_CODES
from tests.conftest import nb_durable_cli


def said_everywhere(ip: Any, cwd: Path, batch: str) -> str:
    """What ``runs --batch``, ``wait --batch`` and ``%agent_runs --batch`` say of ``batch``: the
    same refusal, exit 2 from both commands and a ``UsageError`` (no traceback) from the magic."""
    said = []
    for command in ("runs", "wait"):
        done = nb_durable_cli(command, "--batch", batch, "--timeout", "0", cwd=cwd) if command == "wait" else nb_durable_cli(
            command, "--batch", batch, cwd=cwd
        )
        assert done.returncode == EXIT_CODES["usage"], (command, done.stdout, done.stderr)
        assert done.stdout == "", (command, done.stdout)
        said.append(done.stderr.strip().removeprefix("nb-durable: "))
    with pytest.raises(UsageError) as magic:
        ip.run_line_magic("agent_runs", f"--batch {batch}")
    said.append(str(magic.value))
    assert said[0] == said[1] == said[2], said
    return said[0]


def test_a_listing_refuses_an_unknown_batch_id_naming_the_batches_there_are(ip: Any, tmp_path: Path) -> None:
    submit("the one queued task", store="runs", batch="nightly", demo=True)
    said = said_everywhere(ip, tmp_path, "nigthly")
    assert said.startswith("batch 'nigthly' is not in runs: no run was submitted with it") and "'nightly'" in said, said
    # A batch there is, filtered down to nothing, is no mistake: it says so and exits 0.
    none = nb_durable_cli("runs", "--batch", "nightly", "--status", "failed", cwd=tmp_path)
    assert (none.returncode, none.stdout) == (0, "no runs in runs match those filters\n"), none
    assert "match these filters" in repr(ip.run_line_magic("agent_runs", "--batch nightly --status failed"))


def test_a_listing_given_a_batch_file_it_cannot_read_says_so_and_nothing_of_queueing(ip: Any, tmp_path: Path) -> None:
    submit("a task so that the store is there", store="runs", demo=True)
    (tmp_path / "bad.jsonl").write_text(json.dumps({"task": "fine"}) + "\nnot json\n")
    (tmp_path / "folder").mkdir()
    for batch, why in (
        ("missing.jsonl", "cannot read the batch file missing.jsonl: No such file or directory"),
        ("folder", "cannot read the batch file folder: Is a directory"),
        ("bad.jsonl", "bad.jsonl, line 2: not JSON"),
    ):
        said = said_everywhere(ip, tmp_path, batch)
        assert said.startswith(why), said
        assert "nothing was queued" not in said.lower() and "submit" not in said, said  # the listing queues nothing
        assert "the batch's id" in said, said
