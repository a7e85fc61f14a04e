"""The Jupyter notebook format (nbformat 4.5) as an export writes it: the package's one owner of it.

An export builds its cells here and ``dumps`` writes them as the JSON ``nbformat.writes`` writes
for the same notebook (sorted keys, one-space indent, multi-line strings split into lines), so
a notebook saved again by Jupyter differs only where a person changed it. nbformat itself is
not imported: its import builds its JSON-schema validator, 1.5-2.5 s of CPU here, more than an
export of hundreds of steps costs (``benchmarks/bench_export.py``). Nothing is lost by it: the
tests validate what ``dumps`` writes with nbformat's own validator and read it back with it.

Cell ids (required since 4.5) are the cells' positions, not random: exporting a run again
writes the same bytes when the run has finished, so a notebook kept in git changes only where
the run did.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["Cell", "Notebook", "Stream", "code_cell", "dumps", "markdown_cell"]


@dataclass(frozen=True)
class Stream:
    """A code cell's stream output (what a tool printed, or said went wrong)."""

    name: Literal["stdout", "stderr"]
    text: str


@dataclass
class Cell:
    """A Markdown or code cell (made by ``markdown_cell`` or ``code_cell``: a Markdown cell has no outputs)."""

    cell_type: Literal["markdown", "code"]
    source: str
    metadata: dict[str, Any] = field(default_factory=dict)
    outputs: list[Stream] = field(default_factory=list)


@dataclass
class Notebook:
    """A notebook's cells and its metadata (an export's says which run it shows)."""

    cells: list[Cell] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)


def markdown_cell(source: str) -> Cell:
    return Cell("markdown", source)


def code_cell(source: str, output: Stream, metadata: dict[str, Any]) -> Cell:
    """A code cell shown as run (with ``output``) and never executed (no execution count)."""
    return Cell("code", source, metadata, [output])


def dumps(notebook: Notebook) -> str:
    """``notebook`` as the text of a ``.ipynb`` file, ending with a newline as ``nbformat.write``'s does."""
    document = {
        "cells": [_cell(cell, f"cell-{i}") for i, cell in enumerate(notebook.cells)],
        "metadata": notebook.metadata,
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    return json.dumps(document, indent=1, sort_keys=True, separators=(",", ": "), ensure_ascii=False) + "\n"


def _cell(cell: Cell, cell_id: str) -> dict[str, Any]:
    # Strings split after each line break, as nbformat splits them (str.splitlines) so that a
    # notebook under version control diffs line by line; a reader joins them back.
    said: dict[str, Any] = {"cell_type": cell.cell_type, "id": cell_id, "metadata": cell.metadata, "source": cell.source.splitlines(True)}
    if cell.cell_type == "markdown":
        return said
    outputs = [{"output_type": "stream", "name": out.name, "text": out.text.splitlines(True)} for out in cell.outputs]
    return {**said, "execution_count": None, "outputs": outputs}
