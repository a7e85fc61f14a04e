"""One bad value, one refusal, in every front end: the CLI's flags, the magics' flags,
``%config AgentMagics``, ``run_agent``/``resume_agent`` keywords and a batch file's lines.

Each case here was a value one front end took and another refused, or one that went past
every check and failed later, somewhere else, in words that named nothing the person gave.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pytest
from traitlets import TraitError

from nb_durable.agent import run_agent
from nb_durable.agent.fleet.batch import read_batch
from nb_durable.agent.models.scripted import ScriptedModel
from nb_durable.agent.settings import Change
from nb_durable.cli.commands import main
from nb_durable.errors import BatchFileError, SettingError


def _magics(ip: Any) -> Any:
    return next(c for c in ip.configurables if type(c).__name__ == "AgentMagics")


def test_an_infinite_number_is_refused_where_it_is_given(tmp_path: Path, ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    # A log holds JSON, which has no infinity: taken, it failed the run's first write with
    # "Out of range float values are not JSON compliant" (a traceback in the notebook).
    said = re.escape("must be a finite number of dollars (for no limit, leave it unset), not")
    with pytest.raises(SettingError, match=rf"^max_usd {said} inf$"):
        run_agent("x", client=ScriptedModel([]), store=str(tmp_path / "runs"), workspace=str(tmp_path), max_usd=math.inf)
    with pytest.raises(SettingError, match=rf"^max_usd {said} inf$"):
        Change.of(max_usd=math.inf)
    assert main(["run", "--demo", "--store", str(tmp_path / "runs"), "--max-usd", "inf", "x"]) == 2
    assert re.fullmatch(rf"nb-durable: --max-usd {said} inf\n", capsys.readouterr().err)
    assert main(["run", "--demo", "--store", str(tmp_path / "runs"), "--breaker-cooldown", "1e400", "x"]) == 2
    assert capsys.readouterr().err == "nb-durable: --breaker-cooldown must be a finite number of seconds, not inf\n"
    with pytest.raises(TraitError, match=rf"^AgentMagics.max_usd {said} inf$"):
        _magics(ip).max_usd = math.inf
    batch = tmp_path / "tasks.jsonl"
    batch.write_text('{"task": "x", "max_usd": Infinity}\n')  # Python's json reads it
    with pytest.raises(BatchFileError, match=rf"line 1: 'max_usd' {said} inf"):
        read_batch(batch)
    assert not (tmp_path / "runs").exists(), "nothing ran, nothing was written"
