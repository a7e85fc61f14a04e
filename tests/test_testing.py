"""``nb_durable.testing``: light to import, a sorted public API, and a scripted model that drives a run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import nb_durable
import nb_durable.testing
from nb_durable.testing import ScriptedModel, text_message, tool_use_message, usage
from tests.conftest import subprocess_env

HEAVY = ("pytest", "_pytest", "anthropic", "IPython")


def test_importing_it_loads_no_pytest_sdk_or_ipython() -> None:
    probe = (
        "import json, sys; import nb_durable.testing; "
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], check=False, capture_output=True, text=True, env=subprocess_env(), timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == []


def test_all_is_sorted_and_every_name_resolves() -> None:
    names = nb_durable.testing.__all__
    assert names == sorted(names)
    assert {"STORE_CONTRACT", "ScriptedModel", "check_store", "text_message", "tool_use_message"} <= set(names)
    for name in names:
        assert getattr(nb_durable.testing, name) is not None, name


def test_a_scripted_model_drives_an_agent_to_a_completed_run(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("buy milk\n")
    model = ScriptedModel(
        [
            tool_use_message([("read_file", {"path": "notes.txt"})], text="Reading the notes."),
            text_message("The notes say to buy milk.", input_tokens=40, output_tokens=9),
        ]
    )
    result = nb_durable.run_agent(
        "what do my notes say?", client=model, model="claude-test-1", workspace=tmp_path, store=str(tmp_path / "runs")
    )
    assert result.status == "completed"
    assert result.text == "The notes say to buy milk."
    assert result.turns == 2
    assert model.remaining == 0 and len(model.requests) == 2
    # The tool's answer went back to the model in the second request.
    assert "buy milk" in json.dumps(model.requests[1]["messages"])
    assert usage(40, 9)["input_tokens"] == 40
    assert nb_durable.read_run(result.run_id, tmp_path / "runs").summary.status == "completed"


def test_the_module_docstring_example_calls_a_tool_that_exists(tmp_path: Path) -> None:
    # It scripted a call of 'bash', which no built-in tool is: the example ran into a tool error.
    from nb_durable import read_run, run_agent

    doc = nb_durable.testing.__doc__ or ""
    made = next(line.strip() for line in doc.splitlines() if line.strip().startswith("model = ScriptedModel("))
    (tmp_path / "a.txt").write_text("a")
    scope: dict[str, object] = {"ScriptedModel": ScriptedModel, "text_message": text_message, "tool_use_message": tool_use_message}
    exec(made, scope)
    result = run_agent("list the files", client=scope["model"], workspace=tmp_path, store=tmp_path / "runs")  # type: ignore[arg-type]
    assert result.status == "completed"
    tool_result = read_run(result.run_id, tmp_path / "runs").steps[1].result
    assert not tool_result["is_error"] and "a.txt" in tool_result["content"]
