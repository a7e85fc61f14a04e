"""What the CLI shows of a run's tree: children under their parents, the tree's bill, its export.

A child run (``agent.delegation``) is an ordinary run, so every command works on it alone;
these helpers add the tree around it: ``runs`` lists children indented under their parent,
``show`` bills a parent's whole tree, its own cost said beside it (``--tree`` lists the runs
below, each billed the same way), ``export`` writes
the children's timelines after the parent's, each run headed with the same bill.
"""

from __future__ import annotations

from pathlib import Path

from ..agent.delegation.tree import (
    descendants,
    index_view,
    rows_below,
    started_order,
    tree_order,
    tree_views,
    with_children,
)
from ..agent.display.inert_text import terminal_text
from ..agent.display.ipynb import Notebook
from ..agent.display.progress import SIMULATED_NOTE, cost_line
from ..agent.display.views import many, state_word, tree_words, views_of
from ..core.runs import RunSummary, read_run
from ..core.stores import Store

__all__ = ["export_tree", "print_tree", "runs_in_tree_order"]


def runs_in_tree_order(runs: list[RunSummary]) -> list[tuple[RunSummary, int]]:
    """``runs`` with each run's children right after it, and each one's depth in its tree (whose
    child each is, ``RunSummary.child_of``: from the index, no log read)."""
    by_id = {s.run_id: s for s in runs}
    return [(by_id[run_id], depth) for run_id, depth in tree_order(list(by_id), {s.run_id: s.child_of for s in runs})]


def print_tree(store: Store, run_id: str) -> None:
    """One line per run below ``run_id``: its id (indented by depth), status, steps, cost (its
    own tree's, as ``show CHILD`` heads it) and task, all from the run index (``rows_below``,
    ``index_view``): no log is read but where the index cannot say, a row an older nb_durable
    wrote or a store with no index (``list_runs`` reads those runs' logs, once each)."""
    below = rows_below(store, [run_id])
    if not below:
        print("no child runs")
        return
    # Its children in the order its turns started them, as tree_order places theirs.
    below.sort(key=lambda s: started_order(s.run_id))
    rows = {s.run_id: s for s in below}
    # Each run billed with every run below it, each added once, deepest first (``tree_views``).
    parent = {run_id: None, **{s.run_id: s.child_of for s in below}}
    shown = tree_views({s.run_id: index_view(s) for s in below}, parent)
    print(f"child runs of {run_id}:")
    simulated = False
    for child, view, depth in shown:
        summary = rows[child]
        task = _cut_at_word(" ".join(terminal_text(str(summary.settings.get("task", ""))).split()), TASK_WIDTH)
        indent = "  " * (depth + 1)
        simulated = simulated or view.cost.simulated
        words = f" ({tree_words(view)})" if view.children else ""
        status = state_word(summary.status)
        print(f"{indent}└ {child}  {status}, {many(summary.steps, 'step')} · {cost_line(view.cost, brief=True)}{words}  {task}")
    if simulated:  # once, not on every line
        print(f"({SIMULATED_NOTE})")


TASK_WIDTH = 60
"""Characters of a child's task on its line of ``show --tree``."""


def _cut_at_word(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters, cut after a whole word and marked ``…`` when cut."""
    if len(text) <= width:
        return text
    cut = text[: width - 1]
    # A single word longer than the width is cut inside it: there is no boundary to cut at.
    return (cut.rsplit(" ", 1)[0] if " " in cut else cut).rstrip(" ,;:.") + "…"


def export_tree(store: Store, run_id: str, path: str | Path, *, runnable: bool, force: bool = False) -> tuple[Path, int]:
    """Write ``run_id``'s notebook, its children's timelines after its own; (path, children).

    A file already at ``path`` is written over only if it is an export of this run (exported
    again, it is brought up to date) or with ``force``: it may be a person's own notebook. A
    folder at ``path`` gets ``RUN.ipynb`` inside it, as ``cp`` puts a file in a folder."""
    from ..agent.display.export import write_notebook

    target = Path(path)
    if target.is_dir():
        target = target / f"{run_id}.ipynb"
    if not target.parent.is_dir():
        raise ValueError(f"cannot write {target}: there is no folder {target.parent}; create it, or name another file with -o")
    if not force and target.exists() and _exported_run(target) != run_id:
        raise ValueError(
            f"{target} exists and is not an export of run {run_id}: name another file with -o, "
            "or write over it with --force"
        )
    notebook = _notebook(store, run_id, runnable)
    below = descendants(store, run_id)
    for child in below:
        notebook.cells.extend(_notebook(store, child, runnable, child=True).cells)
    # Renamed into place: a notebook a full disk cut off would be no export, and a retry refused.
    write_notebook(notebook, target, run_id=run_id, elsewhere="name a file on another disk with -o")
    return target, len(below)


def _notebook(store: Store, run_id: str, runnable: bool, *, child: bool = False) -> Notebook:
    """A run's notebook headed as ``show`` heads it: a run with children bills its tree."""
    from ..agent.display.export import notebook_of

    record = read_run(run_id, store)
    run, _ = with_children(views_of(record)[0], store)
    return notebook_of(record, runnable=runnable, run=run, child=child)


def _exported_run(path: Path) -> str | None:
    """The run a notebook file was exported from, if it is an export (None: anything else)."""
    import json

    try:
        said = json.loads(path.read_bytes()).get("metadata", {}).get("nb_durable", {}).get("run_id")
    except (OSError, ValueError, AttributeError):
        return None
    return said if isinstance(said, str) else None
