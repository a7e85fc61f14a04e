"""An exported notebook is the nbformat 4.5 document nbformat itself would write, and making it
imports no nbformat (``nb_durable.agent.display.ipynb``).

nbformat's import built its JSON-schema validator for every export, ~2 s of CPU, more than the
export. Judged here by nbformat's real validator and writer: what an export writes validates,
reads back with ``nbformat.reads`` and is byte for byte what ``nbformat.writes`` writes of it
(so Jupyter saving it again changes nothing); and fresh ``nb-durable`` processes (export, and
the commands people run most) and ``%load_ext`` load neither nbformat nor jsonschema.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nb_durable import read_run
from nb_durable.agent import run_agent
from nb_durable.agent.display.export import export_notebook
from nb_durable.agent.display.ipynb import Notebook, Stream, code_cell, dumps, markdown_cell
from nb_durable.agent.models.messages import text_message, tool_use_message
from nb_durable.agent.models.scripted import ScriptedModel
from tests.conftest import subprocess_env

RUN = "formats"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run with every kind of cell an export writes: thinking, tool output on stdout and stderr,
    a file written, text with CRLF and Unicode line breaks, a follow-up's result."""
    folder = tmp_path_factory.mktemp("export")
    model = ScriptedModel([
        tool_use_message([("run_bash", {"command": "printf 'a\\r\\nb\\u2028c'; echo é"})], text="Looking.\r\nFirst:", thinking="Plan:\n\n- look"),
        tool_use_message([("write_file", {"path": "notes.md", "content": "# Notes\n\nline\x0cpage\n"}), ("read_file", {"path": "missing.md"})]),
        text_message("Done: **all** of it.\n\n$5 < $6"),
    ])  # fmt: skip
    run_agent("look around\nand note it", run_id=RUN, client=model, model="claude-test-1", workspace=folder, store=str(folder / "runs"))
    return folder / "runs"


@pytest.mark.parametrize("runnable", [False, True])
def test_an_export_validates_and_is_what_nbformat_writes_of_it(store: Path, tmp_path: Path, runnable: bool) -> None:
    written = export_notebook(read_run(RUN, str(store)), tmp_path / "x.ipynb", runnable=runnable).read_text("utf-8")
    notebook = nbformat.reads(written, as_version=4)
    nbformat.validate(notebook)
    assert nbformat.writes(notebook) + "\n" == written
    assert [c.cell_type for c in notebook.cells].count("code") == 3
    (failed,) = [c for c in notebook.cells if c.cell_type == "code" and c.outputs[0].name == "stderr"]
    assert "missing.md" in failed.source


@settings(max_examples=150, deadline=None)
@given(
    markdown=st.text(),
    code=st.text(),
    output=st.text(),
    name=st.sampled_from(["stdout", "stderr"]),
    extra=st.dictionaries(st.text(), st.none() | st.booleans() | st.integers() | st.text()),
)
def test_any_text_is_written_as_nbformat_writes_it(markdown: str, code: str, output: str, name: Any, extra: dict[str, Any]) -> None:
    """Line breaks are where the two could differ: nbformat splits strings into lists of lines
    with ``str.splitlines``, which breaks at \\r, \\x0b, \\x1c, \\x85, \\u2028 and more."""
    ours = dumps(Notebook([markdown_cell(markdown), code_cell(code, Stream(name, output), {"nb_durable": extra})], {"nb_durable": extra}))
    notebook = nbformat.reads(ours, as_version=4)
    nbformat.validate(notebook)
    assert (notebook.cells[0].source, notebook.cells[1].source, notebook.cells[1].outputs[0].text) == (markdown, code, output)
    assert nbformat.writes(notebook) + "\n" == ours


def test_exporting_a_run_again_writes_the_same_bytes(store: Path, tmp_path: Path) -> None:
    """Cell ids were random (nbformat's), so a notebook kept in git changed on every export."""
    record = read_run(RUN, str(store))
    assert export_notebook(record, tmp_path / "a.ipynb").read_bytes() == export_notebook(record, tmp_path / "b.ipynb").read_bytes()


LOAD_EXT = (
    "from IPython.testing.globalipapp import get_ipython; ip = get_ipython(); ip.run_line_magic('load_ext', 'nb_durable');"
    "assert 'agent' in ip.magics_manager.magics['cell']"
)


@pytest.mark.parametrize(
    "args",
    [
        ["-m", "nb_durable", "export", RUN, "-o", "x.ipynb"],
        ["-m", "nb_durable", "--help"],
        ["-m", "nb_durable", "runs"],
        ["-m", "nb_durable", "show", RUN],
        ["-c", LOAD_EXT],
    ],
    ids=["export", "help", "runs", "show", "load_ext"],
)
def test_neither_nbformat_nor_its_validator_is_imported(store: Path, args: list[str]) -> None:
    """Fresh interpreters, so nothing this test process imported hides an import."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *args], cwd=store.parent, env=subprocess_env(), capture_output=True, text=True, timeout=120, check=False
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    imported = {line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    assert any(m.startswith("nb_durable.") for m in imported), "importtime saw none of nb_durable's modules"
    assert sorted(m for m in imported if m.split(".")[0] in ("nbformat", "jsonschema")) == []
