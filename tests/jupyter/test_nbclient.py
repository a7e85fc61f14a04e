"""A notebook with ``%%agent`` executed by nbclient, as CI and nbconvert would run it."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient.exceptions import CellExecutionError
from nbformat import v4

from nb_durable.agent.models.demo import DEMO_TASK
from nb_durable.jupyter.budget import DETAIL_BUDGET
from tests.conftest import subprocess_env
from tests.jupyter.kernels import notebook_client

pytestmark = pytest.mark.kernel  # every test runs a notebook in a real kernel

WIDGET = "application/vnd.jupyter.widget-view+json"


def execute(nb: nbformat.NotebookNode, folder: Path) -> nbformat.NotebookNode:
    """Run every cell in a fresh kernel working in ``folder``, offline (no Anthropic variables)."""
    with notebook_client(nb, folder, timeout=120) as client:
        client.execute(env=subprocess_env(NB_DURABLE_DEMO_LATENCY="0"))
    return nb


def test_an_agent_notebook_executes_to_its_static_timeline_and_closes_its_widgets(tmp_path: Path) -> None:
    census = "import ipywidgets.widgets.widget as w; print(len(w._instances))"
    nb = v4.new_notebook(
        cells=[v4.new_code_cell(f"%load_ext nb_durable\n{census}"), v4.new_code_cell(f"%%agent\n{DEMO_TASK}"), v4.new_code_cell(census)]
    )
    execute(nb, tmp_path)
    outputs = nb.cells[1].outputs
    shown = [o for o in outputs if o.output_type == "display_data"]
    assert len(shown) == 1, "one display per run"
    data = shown[0].data
    assert WIDGET not in data, "once the run ended, the display was replaced by its static form"
    page = data["text/html"]
    assert page.count('class="nbd-step nbd-live"') == 12 and "Done. The tests pass now" in page
    assert "completed" in data["text/plain"]
    # The static form is the timeline now: its widgets are closed, not kept by the kernel and the
    # front end (and a notebook saved from it) as a second copy of every row. nbclient itself
    # saves the last state of every widget ever opened, closed or not.
    before, after = (int(nb.cells[i].outputs[-1].text) for i in (0, 2))
    assert after == before, f"{after - before} widgets of the ended run stay open in the kernel"
    path = tmp_path / "ran.ipynb"
    nbformat.write(nb, path)
    nbformat.validate(nbformat.read(path, as_version=4))


def run_all(cells: list[str], folder: Path) -> tuple[nbformat.NotebookNode, str]:
    """Execute cells until one fails; the notebook and the failure's text."""
    nb = v4.new_notebook(cells=[v4.new_code_cell(c) for c in cells])
    try:
        execute(nb, folder)
    except CellExecutionError as e:
        return nb, str(e)
    return nb, ""


def test_a_failing_cell_stops_run_all(tmp_path: Path) -> None:
    nb, failure = run_all(["%load_ext nb_durable", "%agent_resume no-such-run", "print('after')"], tmp_path)
    assert "run 'no-such-run' is not in the folder runs" in failure
    assert nb.cells[2].outputs == []


def test_an_approval_nobody_can_give_under_nbclient_names_the_setting(tmp_path: Path) -> None:
    nb, failure = run_all(
        ["%load_ext nb_durable", "%config AgentMagics.approve_bash = 'unittest'", f"%%agent\n{DEMO_TASK}", "print('after')"],
        tmp_path,
    )
    assert "DecisionNeededError" in failure and "AgentMagics.approve_bash" in failure
    assert nb.cells[3].outputs == []


def displays_of(cell: nbformat.NotebookNode) -> list[dict[str, str]]:
    return [dict(o.data) for o in cell.outputs if o.output_type == "display_data"]


def test_each_cell_of_a_run_keeps_its_own_story_in_the_saved_notebook(tmp_path: Path) -> None:
    crash = v4.new_code_cell(f"%%agent --run dup --crash-at 4\n{DEMO_TASK}")
    crash.metadata["tags"] = ["raises-exception"]
    nb = v4.new_notebook(
        cells=[
            v4.new_code_cell("%load_ext nb_durable"),
            crash,
            v4.new_code_cell("%agent_resume dup"),
            v4.new_code_cell(f"%%agent --run dup\n{DEMO_TASK}"),
        ]
    )
    execute(nb, tmp_path)
    path = tmp_path / "saved.ipynb"
    nbformat.write(nb, path)
    saved = nbformat.read(path, as_version=4)
    crashed, resumed, replayed = (displays_of(saved.cells[i]) for i in (1, 2, 3))
    assert [len(crashed), len(resumed), len(replayed)] == [1, 1, 1]
    # The crash cell: its partial timeline, above its SimulatedCrash, and one line of what came later.
    page, text = crashed[0]["text/html"], crashed[0]["text/plain"]
    assert text.startswith("run dup: crashed · ") and "Done. The tests pass" not in page
    assert 0 < page.count('class="nbd-step nbd-live"') < 12
    assert text.splitlines()[1] == "resumed in a later cell: completed there"
    assert [o.output_type for o in saved.cells[1].outputs][-1] == "error"
    assert saved.cells[1].outputs[-1].ename == "SimulatedCrash"
    # The resume: what it replayed and what it ran; the replay: nothing live, nothing added above.
    shown_live = page.count('class="nbd-step nbd-live"')
    assert resumed[0]["text/plain"].startswith(f"run dup: completed · 12 steps ({shown_live} replayed, {12 - shown_live} live)")
    assert "resumed in a later cell" not in resumed[0]["text/plain"], "a replay that changed nothing adds nothing"
    assert replayed[0]["text/plain"].startswith("run dup: completed · 12 steps (12 replayed, 0 live)")


def test_a_long_run_saves_a_notebook_of_a_sane_size_that_says_how_to_see_the_middle(tmp_path: Path) -> None:
    from tests.fakes import MessagesAPIServer, ScriptedScenario, reply, tool_use

    turns = 150  # 300 steps, each tool output 4 KB: 1.2 MB of detail, twice (the run, then its replay)
    (tmp_path / "big.txt").write_text("0123456789abcde\n" * 256)
    script = [reply(f"Turn {t}.", tool_use("read_file", {"path": "big.txt"}, id=f"toolu_{t:04d}")) for t in range(turns)]
    with MessagesAPIServer(ScriptedScenario([*script, reply("Done.")])) as server:
        nb = v4.new_notebook(
            cells=[
                v4.new_code_cell("%load_ext nb_durable"),
                v4.new_code_cell(f"%%agent --run big --model claude-test-1 --max-turns {turns + 2}\nRead big.txt again and again."),
                v4.new_code_cell("%agent_resume big"),
            ]
        )
        with notebook_client(nb, tmp_path, timeout=300) as client:
            client.execute(env=subprocess_env(ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="test-key"))
    path = tmp_path / "long.ipynb"
    nbformat.write(nb, path)
    # Unbounded, each cell's page and the widgets' saved state held all 1.2 MB of detail: 5 MB and more.
    assert path.stat().st_size < 3_500_000, f"{path.stat().st_size:,} bytes saved for a 301-step run and its replay"
    # Closed or not, every widget model is saved: a live row is one, not one with a layout and a style.
    saved = nb.metadata.widgets["application/vnd.jupyter.widget-state+json"]["state"].values()
    models = [m["model_name"] for m in saved]
    assert models.count("LayoutModel") < 50, f"{models.count('LayoutModel')} layouts saved for {models.count('HTMLModel')} HTML widgets"
    # Nor does it keep their rows a second time: the static forms that replaced the widgets have them.
    holding = {
        f"{m['model_name']} #{n}": str(m["state"].get("value", ""))
        for n, m in enumerate(saved)
        if 'class="nbd-step ' in str(m["state"].get("value", ""))
    }
    # Named with what they hold, so a failure says which widget kept its rows (6 rows, once, in CI on 2026-12-07).
    assert not holding, f"the saved state of closed widgets holds rows: { {k: v[:300] for k, v in holding.items()} }"
    for cell in nb.cells[1:]:
        (shown,) = [o.data for o in cell.outputs if o.output_type == "display_data"]
        assert len(shown["text/html"]) < DETAIL_BUDGET + 1_000 * (2 * turns + 1)
        assert shown["text/html"].count('class="nbd-step ') == 2 * turns + 1
        assert '<div class="nbd-gap">' in shown["text/html"] and "%agent_show big --turns" in shown["text/plain"]
