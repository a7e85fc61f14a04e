"""A new user's first words with the magics, typed as cells: each mistake gets one clear answer.

* A ``%%agent`` cell with nothing below its first line is told the task is missing, with an
  example, by ``%%agent`` itself (IPython would refuse the empty body first and point at the
  line magic ``%agent``, which points back).
* ``%agent_wait`` with no background run ever started says so, as ``%agent_stop`` does; once
  runs have ended it says there is nothing to wait for and names them, and succeeds.
* ``%agent_show`` with no run draws the run updated last, and says when there is none.
* An unknown run names the folder plainly (and where it is) and the magic that lists the runs,
  which works as printed, also for a folder with a space in its name (quoted as a shell would).
* ``-o`` takes a variable name: ``my-var``, ``1x`` or ``class`` is refused before anything
  runs (the namespace took them, and no cell could read them back).
* A magic's line is read as a shell reads it: quotes group words and are not part of them
  (IPython's own parsing kept them: ``--store "my runs"`` made a folder named with quotes),
  and a quote left open is told.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError

from nb_durable.agent.fleet import background_runs as background_runs_module
from nb_durable.agent.fleet.background_runs import background_runs
from nb_durable.agent.models.demo import prepare_demo_workspace
from nb_durable.core.runs import read_summary


def error_of(ip: Any, cell: str) -> BaseException | None:
    return ip.run_cell(cell).error_in_exec


@pytest.mark.parametrize("cell", ["%%agent", "%%agent\n", "%%agent --demo --max-turns 3\n\n  \n"])
def test_an_empty_agent_cell_is_told_the_task_is_missing(ip: Any, cell: str) -> None:
    error = error_of(ip, cell)
    assert isinstance(error, UsageError)
    assert str(error).startswith("%%agent needs a task: write it on the lines below the %%agent line"), error
    assert "%agent (single %)" not in str(error)


def test_agent_wait_with_nothing_running_says_so(
    ip: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A kernel that started no background run: this test process's other tests may have.
    monkeypatch.setattr(background_runs_module, "_RUNS", [])
    assert not background_runs()
    stopped, waited = error_of(ip, "%agent_stop"), error_of(ip, "%agent_wait")
    assert isinstance(waited, UsageError) and str(waited) == str(stopped), (waited, stopped)
    assert "no run goes on in the background" in str(waited)
    assert error_of(ip, "%%agent --background --demo --run bg\nfix the tests") is None
    assert error_of(ip, "%agent_wait bg") is None
    capsys.readouterr()
    assert error_of(ip, "%agent_wait") is None
    assert "nothing to wait for; ended here: bg (completed)" in capsys.readouterr().out


def test_an_unknown_run_names_its_folder_plainly_and_the_magic_that_lists_runs(
    ip: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert error_of(ip, "%%agent --demo --run there\nfix the tests") is None
    error = error_of(ip, "%agent_show nope")
    assert isinstance(error, UsageError)
    said = str(error)
    assert f"no run 'nope' in the folder runs ({tmp_path / 'runs'})" in said, said
    listing = said.split("; ")[-1].removesuffix(" lists them all.")
    assert listing == "%agent_runs --store runs", said
    table = ip.run_cell(listing).result
    assert "there" in repr(table)


@pytest.mark.parametrize("line", ["agent_runs --store sqlite:///typo.db", "agent_show r1 --store sqlite:///typo.db", "agent_runs --store typo"])
def test_a_mistyped_store_is_said_by_the_reading_magics_and_nothing_is_made(ip: Any, tmp_path: Path, line: str) -> None:
    # They listed "No runs yet" and left an empty typo.db behind, where nb-durable runs and show
    # say the store is not there and make nothing.
    error = error_of(ip, f"%{line}")
    assert isinstance(error, UsageError) and "(is the store's name right?)" in str(error), error
    assert not list(tmp_path.iterdir()), "looking made nothing"


def test_agent_show_without_a_run_draws_the_run_updated_last(ip: Any, tmp_path: Path) -> None:
    error = error_of(ip, "%agent_show")
    assert isinstance(error, UsageError)
    assert str(error).startswith("no run in runs to show: it holds none yet."), error
    for run in ("alpha", "zeta"):  # the later run sorts last by name: it is picked for being newer
        assert error_of(ip, f"%%agent --demo --run {run} --max-turns 1\nfix the tests") is None
    shown = ip.run_cell("%agent_show").result
    assert shown.text.startswith("run zeta"), shown.text


@pytest.mark.parametrize(
    ("cell", "said"),
    [
        ("%agent_wait --timeout soon", "argument --timeout: must be a number (such as 2.5), not 'soon'"),
        ("%%agent --crash-at abc\nfix the tests", "argument --crash-at: must be a whole number (such as 3), not 'abc'"),
        ("%%agent --crash-at 0\nfix the tests", "argument --crash-at: must be at least 1, not 0"),
        ("%agent_resume x --crash-at two", "argument --crash-at: must be a whole number (such as 3), not 'two'"),
    ],
)
def test_number_flags_of_the_magics_say_the_cli_s_words(ip: Any, cell: str, said: str) -> None:
    error = error_of(ip, cell)
    assert isinstance(error, UsageError) and said in str(error), error


@pytest.mark.parametrize(
    "cell",
    ["%%agent --demo --run ob -o my-var\nfix the tests", "%%agent --demo --run ob -o 1x\nfix the tests",
     "%agent_resume ob -o class", "%agent_wait ob -o=True"],
)  # fmt: skip
def test_o_takes_a_variable_name_before_anything_runs(ip: Any, tmp_path: Path, cell: str) -> None:
    before = set(ip.user_ns)
    error = error_of(ip, cell)
    assert isinstance(error, UsageError), error
    name = cell.split("-o", 1)[1].split()[0].lstrip("=")
    said = f"argument -o/--output: takes a variable name (letters, digits and _, not starting with a digit, not a keyword), not {name!r}"
    assert str(error).startswith(said), error
    assert set(ip.user_ns) == before and not (tmp_path / "runs").exists(), "nothing ran"


def test_quotes_in_a_magic_s_line_group_words_as_in_a_shell(ip: Any, tmp_path: Path) -> None:
    workspace = prepare_demo_workspace(tmp_path / "my project")
    cell = f"%%agent --demo --run q --store \"my runs\" --workspace '{workspace}' --tag 'needs review' --tag \"\"\nfix the tests"
    error = error_of(ip, cell)
    assert isinstance(error, UsageError) and "--tag must be non-empty strings, not ['needs review', '']" in str(error), error
    assert error_of(ip, cell.replace(' --tag ""', "")) is None
    summary = read_summary("q", tmp_path / "my runs")
    assert summary.status == "completed" and summary.settings["tags"] == ["needs review"], summary
    assert summary.settings["workspace"] == str(workspace)
    assert not any("'" in p.name or '"' in p.name for p in tmp_path.iterdir())

    said = str(error_of(ip, "%agent_show nope --store 'my runs'"))
    listing = said.split("; ")[-1].removesuffix(" lists them all.")
    assert listing == "%agent_runs --store 'my runs'", said  # as printed, so typed back
    assert "q " in repr(ip.run_cell(listing).result)
    open_quote = error_of(ip, "%agent_runs --store 'my runs")
    assert isinstance(open_quote, UsageError) and "a quote is not closed" in str(open_quote), open_quote
