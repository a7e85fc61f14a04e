"""``nb-durable export``: a model turn's thinking is a folded ``nbd-thinking`` section before
its answer, inert whatever the model wrote; follow-ups and settings changes are Markdown cells;
a model turn that failed says so, and why, as the timeline's row does.
Judged through nbformat and the Markdown renderer nbconvert uses.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
import pytest
from nbconvert.filters.markdown_mistune import markdown2html_mistune

from nb_durable import read_run
from nb_durable.agent import RunHooks, continue_agent, resume_agent, run_agent
from nb_durable.agent.display.export import notebook_of
from nb_durable.agent.display.ipynb import Notebook
from nb_durable.agent.models.messages import text_message, tool_use_message
from nb_durable.agent.models.retry import RetryPolicy
from nb_durable.agent.models.scripted import ScriptedModel
from tests import forkserver
from tests.conftest import subprocess_env

FAST = RetryPolicy(max_attempts=2, base_delay=0.0, jitter=0.0)
THOUGHT = "Plan:\n\n- list <img src=x onerror=alert(1)> & **then** [read](javascript:alert(2))\n\n# not a heading"


@pytest.fixture(scope="module")
def notebook(tmp_path_factory: pytest.TempPathFactory) -> nbformat.NotebookNode:
    """A run that thinks, is truncated, resumed with more room, then given a follow-up; exported."""
    tmp_path = tmp_path_factory.mktemp("export")
    workspace = tmp_path / "work"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("milk\n")
    store = str(tmp_path / "runs")
    model = ScriptedModel(
        [
            tool_use_message([("list_dir", {"path": "."}, "toolu_1")], thinking=THOUGHT),
            text_message("Cut", stop_reason="max_tokens"),
            text_message("Listed: notes.txt.", thinking="done"),
            text_message("Sorted.", thinking="sorting <it>"),
        ]
    )
    hooks = RunHooks(sleep=lambda s: None)
    run = run_agent(
        "list the notes", run_id="thinky", client=model, model="claude-test-1", workspace=workspace, store=store,
        max_tokens=64, retry=FAST, hooks=hooks,
    )  # fmt: skip
    assert run.status == "truncated"
    resumed = resume_agent("thinky", client=model, store=store, max_tokens=128, hooks=hooks)
    assert resumed.status == "completed"
    followed = continue_agent("thinky", "now <sort> them", client=model, store=store, hooks=hooks)
    assert followed.status == "completed"
    done = forkserver.run(
        [sys.executable, "-m", "nb_durable.cli", "export", "thinky", "--store", store, "-o", str(tmp_path / "x.ipynb")],
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    notebook = nbformat.read(tmp_path / "x.ipynb", as_version=4)
    nbformat.validate(notebook)
    return notebook


def test_thinking_is_a_folded_inert_section_before_the_answer(notebook: nbformat.NotebookNode) -> None:
    turns = [c.source for c in notebook.cells if c.cell_type == "markdown" and c.source.startswith("**Model, turn")]
    first = turns[0]
    assert first.startswith('**Model, turn 0**\n\n<details class="nbd-thinking"><summary>Thinking</summary><pre>Plan:&#10;')
    assert "\n" not in first.split("\n\n", 1)[1].split("</details>")[0]  # one line: one HTML block, no Markdown
    html = markdown2html_mistune(first)
    section = html[html.index('<details class="nbd-thinking">') : html.index("</details>")]
    assert "&lt;img src=x onerror=alert(1)&gt; &amp; **then** [read](javascript:alert(2))" in section
    assert "# not a heading" in section
    assert not any(tag in html for tag in ("<img", "<a ", "<h1", "<li"))
    answer = turns[2]
    assert answer.index("nbd-thinking") < answer.index("Listed: notes.txt.")
    assert "nbd-thinking" not in turns[1]  # a turn without thinking has no section


def test_settings_changes_and_follow_ups_are_markdown_cells_saying_what_they_say(notebook: nbformat.NotebookNode) -> None:
    settings = [c for c in notebook.cells if "Settings changed" in c.source]
    assert len(settings) == 1 and settings[0].cell_type == "markdown"
    assert "max_tokens=128" in settings[0].source
    follow_ups = [c for c in notebook.cells if c.source.startswith("**Follow-up before turn")]
    assert len(follow_ups) == 1 and follow_ups[0].cell_type == "markdown"
    assert follow_ups[0].source.endswith("> now &lt;sort&gt; them")
    assert not [c for c in notebook.cells if c.cell_type == "code" and "null" in c.source]


def test_a_model_turn_that_failed_says_why_not_a_stop_reason_it_never_had(tmp_path: Path) -> None:
    # It said "(no text; stop reason None)": the reason the row and nb-durable show give was lost.
    model = ScriptedModel([ConnectionError("the <model> server hung up")])
    with pytest.raises(ConnectionError):
        run_agent(
            "list the notes", run_id="broke", client=model, model="claude-test-1", workspace=tmp_path,
            store=str(tmp_path / "runs"), retry=FAST, hooks=RunHooks(sleep=lambda s: None),
        )  # fmt: skip
    turn = [c.source for c in notebook_of(read_run("broke", str(tmp_path / "runs"))).cells if c.source.startswith("**Model")]
    assert turn == ["**Model, turn 0**\n\n*(failed: the &lt;model> server hung up)*"]


def test_a_tool_step_with_no_result_says_why_in_its_output(tmp_path: Path) -> None:
    """An external tool cut off mid-call was exported with an empty output: only the cell's
    metadata said it was in doubt, where the timeline and nb-durable show say so on its row."""
    from nb_durable.agent.tools import ToolRegistry, tool

    @tool(effect="external")
    def pay(amount: int) -> str:
        """Pay."""
        raise KeyboardInterrupt

    model = ScriptedModel([tool_use_message([("pay", {"amount": 5})])])
    with pytest.raises(KeyboardInterrupt):
        run_agent(
            "pay the bill", run_id="cut", client=model, model="claude-test-1", workspace=tmp_path,
            store=str(tmp_path / "runs"), tools=ToolRegistry([pay]),
        )  # fmt: skip
    (cell,) = [c for c in notebook_of(read_run("cut", str(tmp_path / "runs"))).cells if c.cell_type == "code"]
    assert cell.metadata["nb_durable"]["state"] == "in_doubt"
    assert cell.outputs[0].name == "stderr"
    assert cell.outputs[0].text == (
        "(in doubt: it started and recorded no result, so it may have taken effect: a resume decides (--in-doubt))\n"
    ), cell.outputs[0].text


def test_a_tool_step_of_a_run_still_being_written_is_in_flight_not_left_to_a_resume(tmp_path: Path) -> None:
    """Exported (or shown) while its tool ran, the step said "in flight: it started and recorded no
    result, so it may have taken effect: a resume decides (--in-doubt)": no resume is needed, it runs."""
    from nb_durable.agent.display.views import views_of
    from nb_durable.agent.tools import ToolRegistry, tool

    seen: list[Notebook] = []
    store = str(tmp_path / "runs")

    @tool(effect="external")
    def pay(amount: int) -> str:
        """Pay."""
        seen.append(notebook_of(read_run("paying", store)))  # as nb-durable export in another terminal
        return "paid"

    model = ScriptedModel([tool_use_message([("pay", {"amount": 5})]), text_message("Paid.")])
    run_agent(
        "pay the bill", run_id="paying", client=model, model="claude-test-1", workspace=tmp_path, store=store,
        tools=ToolRegistry([pay]),
    )  # fmt: skip
    (cell,) = [c for c in seen[0].cells if c.cell_type == "code"]
    assert cell.metadata["nb_durable"]["state"] == "in_flight"
    assert cell.outputs[0].text == "(in flight)\n", cell.outputs[0].text
    assert "**Status:** running" in seen[0].cells[1].source
    (done,) = [s for s in views_of(read_run("paying", store))[1] if s.kind == "tool"]
    assert (done.state, done.output, done.error) == ("recorded", "paid", "")


def test_a_record_export_shows_no_direction_control_a_tool_call_or_its_output_held(tmp_path: Path) -> None:
    # A tool cell's command and output, and a follow-up, kept U+202E: on GitHub and in nbconvert the
    # command read "rm -rf example.com/" reversed, other than it ran, where every other view drops it.
    bidi = set("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
    command = "echo 'rm -rf \u202e/ moc.elpmaxe\u202c'"
    model = ScriptedModel([
        tool_use_message([("run_bash", {"command": command})], thinking="I will \u2067say\u2069 it"),
        text_message("Said."),
        text_message("Said again."),
    ])  # fmt: skip
    store = str(tmp_path / "runs")
    run_agent("say it", run_id="said", client=model, model="claude-test-1", workspace=tmp_path, store=store)
    continue_agent("said", "and \u202eagain\u202c", client=model, store=store)
    record = read_run("said", store)
    shown = notebook_of(record)
    for cell in shown.cells:
        assert not bidi & set(cell.source), repr(cell.source)
        for output in cell.outputs:
            assert not bidi & set(output.text), repr(output.text)
    (bash,) = [c for c in shown.cells if c.cell_type == "code"]
    assert "# echo 'rm -rf / moc.elpmaxe'" in bash.source and bash.outputs[0].text.startswith("rm -rf / moc.elpmaxe\n")
    # A runnable cell is what runs, so it keeps the command as recorded, and the cell before it
    # says the command reads otherwise than it runs.
    runnable = notebook_of(record, runnable=True).cells
    (at,) = [i for i, c in enumerate(runnable) if c.cell_type == "code"]
    assert runnable[at].source == "%%bash\n" + command
    assert runnable[at - 1].source == (
        "**Careful:** the cell below holds Unicode direction controls (U+202C, U+202E), so it may read "
        "otherwise than it runs; it runs as recorded."
    )
    assert sum("direction controls" in c.source for c in runnable) == 1  # only where a command holds them
