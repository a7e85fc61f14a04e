"""The tutorial notebooks: committed clean, and each runs top to bottom offline under nbclient.

Each notebook is copied to a temporary folder and executed there by a real kernel with no
ANTHROPIC_* variable (so the magics use the demo model) and a low demo latency. Cells tagged
``raises-exception`` may fail and must: a crash cell that does not crash is a bug. Then the
facts the prose states are checked against what the cells printed, so the text cannot drift
from what the code does (``claims``). A notebook leaves nothing beside itself but ``tutorial-runs/``, and no
cell shows a kernel's log warning.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import nbformat
import pytest

from tests.conftest import subprocess_env
from tests.jupyter.kernels import notebook_client
from tests.notebooks import NOTEBOOKS, RAISES, cell_text, errors, tags
from tests.notebooks.claims import CLAIMS, Cells

CELL_TIMEOUT = 300


def _id(path: Path) -> str:
    return path.stem


# -- committed state ---------------------------------------------------------------------


def test_there_are_at_least_five_numbered_notebooks() -> None:
    numbers = [int(p.name[:2]) for p in NOTEBOOKS]
    assert len(numbers) >= 5
    assert numbers == list(range(1, len(numbers) + 1)), "numbered 01, 02, ... without gaps"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_id)
def test_committed_with_outputs_stripped(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            assert cell.outputs == [], f"cell {index} has outputs"
            assert cell.execution_count is None, f"cell {index} has an execution count"
        assert set(cell.metadata) <= {"tags"}, f"cell {index} has metadata {sorted(cell.metadata)}"
    assert "widgets" not in nb.metadata, "widget state is saved in the notebook"
    assert nb.metadata.get("kernelspec", {}).get("name") == "python3"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_id)
def test_shape_load_ext_first_summary_and_exercises_last(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code[0].source.strip() == "%load_ext nb_durable"
    assert nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# ")
    assert nb.cells[-1].cell_type == "markdown"
    assert "## Summary" in nb.cells[-1].source and "## Exercises" in nb.cells[-1].source
    for cell in nb.cells:
        if RAISES in tags(cell):
            assert cell.cell_type == "code"


# -- execution -----------------------------------------------------------------------------


@pytest.fixture(scope="module", params=NOTEBOOKS, ids=_id)
def executed(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> nbformat.NotebookNode:
    """The notebook run top to bottom in a copy of ``notebooks/``, as a person opening it would."""
    source: Path = request.param
    folder = tmp_path_factory.mktemp(source.stem)
    shutil.copy(source, folder / source.name)
    nb = nbformat.read(folder / source.name, as_version=4)
    env = subprocess_env(NB_DURABLE_DEMO_LATENCY="0.1")
    env.pop("NB_DURABLE_STORE", None)
    # ipykernel stops showing what child processes write to the kernel's stdout and stderr when
    # it sees this variable; a person's kernel shows it, so this one must too.
    env.pop("PYTEST_CURRENT_TEST", None)
    started = time.monotonic()
    with notebook_client(nb, folder, timeout=CELL_TIMEOUT) as client:
        client.execute(env=env)
    nb.metadata["nb_durable_test_seconds"] = round(time.monotonic() - started, 1)
    nb.metadata["nb_durable_test_left"] = sorted(p.name for p in folder.iterdir())
    nb.metadata["nb_durable_test_name"] = source.name
    return nb


def test_runs_top_to_bottom_offline(executed: nbformat.NotebookNode) -> None:
    code = [c for c in executed.cells if c.cell_type == "code"]
    assert code, "the notebook has no code cells"
    assert all(c.execution_count is not None for c in code), "every code cell ran"
    unexpected = {i: errors(c) for i, c in enumerate(executed.cells) if errors(c) and RAISES not in tags(c)}
    assert unexpected == {}


def test_cells_tagged_raises_exception_really_fail(executed: nbformat.NotebookNode) -> None:
    for index, cell in enumerate(executed.cells):
        if RAISES in tags(cell):
            assert errors(cell), f"cell {index} is tagged {RAISES} but did not fail:\n{cell.source}"


def test_writes_only_under_tutorial_runs_and_shows_no_kernel_warning(executed: nbformat.NotebookNode) -> None:
    left = executed.metadata["nb_durable_test_left"]
    assert set(left) <= {executed.metadata["nb_durable_test_name"], "tutorial-runs"}, f"left outside tutorial-runs/: {left}"
    for index, cell in enumerate(executed.cells):
        if cell.cell_type == "code":
            assert "[IPKernelApp] WARNING" not in cell_text(cell), f"cell {index} shows a kernel's warning"


def test_the_magics_said_they_use_the_demo_model(executed: nbformat.NotebookNode) -> None:
    agent_cells = [c for c in executed.cells if c.cell_type == "code" and c.source.startswith("%%agent")]
    for cell in agent_cells:
        assert "offline demo model" in cell_text(cell)


def test_what_the_prose_claims(executed: nbformat.NotebookNode, request: pytest.FixtureRequest) -> None:
    prefix = request.node.callspec.id[:2]
    CLAIMS[prefix](Cells(executed))


def test_every_notebook_has_its_claims_checked() -> None:
    assert sorted(CLAIMS) == [p.name[:2] for p in NOTEBOOKS]
