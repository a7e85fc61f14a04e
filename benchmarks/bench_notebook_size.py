"""How big a saved notebook grows with a long run: a run of 100, 1,000 and 5,000 steps (every
tool output 4 KB) by ``%%agent``, then replayed by ``%agent_resume`` in a second cell, executed
by nbclient (which saves every widget's last state), then written to disk.

    python benchmarks/bench_notebook_size.py [--check] [STEPS ...]

Each size is given two ways: as nb_durable saves it (the timeline's saved forms within
``budget.DETAIL_BUDGET``), and unbounded, every row's detail kept, with the ratio of the two.
The unbounded form is drawn, not run: the same notebook with each cell's static form drawn
again from the same rows with no budget (a last cell, in the same kernel, draws them; it is
no part of what is weighed). The widgets' saved state is the same either way (a closed
timeline's widgets hold no markup), and running it unbounded took over 30 minutes at 5,000
steps (each throttle redrew every replayed row whole). ``--check`` runs it unbounded too (the
kernel's ``budget.gap`` replaced by one that leaves nothing out), to show the two agree.

Measured (2 cores shared with other work; "widgets" is the saved widget state's share):

     steps    unbounded      bounded   ratio    widgets
       100       1.02MB       1.01MB   0.987     0.16MB   (11s to execute; --check ran: 1.02MB)
      1000       9.42MB       2.89MB   0.307     0.92MB   (78s; --check ran: 9.42MB)
      5000      46.80MB      11.29MB   0.241     4.31MB   (698s: the run's requests grow with it)

Before the rows shared their layout and style models and a closed timeline's widgets were
emptied, 1,000 steps saved 6.56 MB (4.40 MB of it widget state), 17 MB unbounded. What the
widget state keeps now is one HTML model a live row, about 0.9 KB, markup emptied.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import nbformat
from nbclient import NotebookClient
from nbformat import v4

from tests.conftest import subprocess_env
from tests.fakes import MessagesAPIServer, ScriptedScenario, reply, tool_use

MODEL = "claude-test-1"
OUTPUT = 4096
UNBOUNDED = """
import nb_durable.jupyter.render as render, nb_durable.jupyter.row_boxes as row_boxes
row_boxes.gap = render.gap = lambda sizes, budget=None: (len(sizes), len(sizes))
"""
DRAWN_WHOLE = """
import json
from nb_durable.jupyter import displays
from nb_durable.jupyter.render import render_static
json.dump([render_static(t.run, list(t.steps.values()), later=t.later, inner=t.inner(), budget=None)._repr_mimebundle_()
           for t in displays._SHOWN["big"]], open("whole.json", "w"))
"""


def execute(steps: int, *, bounded: bool) -> tuple[nbformat.NotebookNode, Path, float]:
    """The notebook executed, the folder it ran in, and seconds to execute it."""
    folder = Path(tempfile.mkdtemp(prefix="nb-durable-bench-size-"))
    (folder / "big.txt").write_text(("0123456789abcde\n" * (OUTPUT // 16)), encoding="utf-8")
    turns = steps // 2
    script = [reply(f"Turn {t}: reading again.", tool_use("read_file", {"path": "big.txt"}, id=f"toolu_{t:05d}")) for t in range(turns - 1)]
    script.append(reply("Read it many times; it never changed."))
    with MessagesAPIServer(ScriptedScenario(script)) as server:
        cells = [
            "%load_ext nb_durable" + ("" if bounded else UNBOUNDED),
            f"%%agent --run big --model {MODEL} --max-turns {turns + 1}\nRead big.txt, many times.",
            "%agent_resume big",
        ]
        nb = v4.new_notebook(cells=[v4.new_code_cell(c) for c in [*cells, DRAWN_WHOLE][: 4 if bounded else 3]])
        env = subprocess_env(ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="test-key")
        started = time.perf_counter()
        NotebookClient(nb, timeout=1800, kernel_name="python3", resources={"metadata": {"path": str(folder)}}).execute(env=env)
        elapsed = time.perf_counter() - started
    return nb, folder, elapsed


def written(nb: nbformat.NotebookNode, path: Path) -> int:
    nbformat.write(nb, path)
    return path.stat().st_size


def saved_size(steps: int) -> tuple[int, int, int, float]:
    """Bytes of the saved notebook, of the same drawn unbounded, and of its widget state; and
    seconds to execute it."""
    nb, folder, elapsed = execute(steps, bounded=True)
    nb.cells.pop()  # the cell that drew the unbounded forms
    kept = written(nb, folder / "saved.ipynb")
    widgets = len(json.dumps(nb.metadata.get("widgets", {}), indent=1))
    forms = json.loads((folder / "whole.json").read_text(encoding="utf-8"))
    assert len(forms) == 2, f"{len(forms)} displays of the run, not the two cells'"
    for cell, form in zip(nb.cells[1:], forms, strict=True):
        (shown,) = [o for o in cell.outputs if o.output_type == "display_data"]
        shown.data.update(form)
    return kept, written(nb, folder / "whole.ipynb"), widgets, elapsed


def main(sizes: list[int], check: bool) -> int:
    print(f"{'steps':>6} {'unbounded':>12} {'bounded':>12} {'ratio':>7} {'widgets':>10} {'per step':>9}")
    for steps in sizes:
        kept, whole, widgets, seconds = saved_size(steps)
        line = f"{steps:>6} {whole / 1e6:>10.2f}MB {kept / 1e6:>10.2f}MB {kept / whole:>7.3f} {widgets / 1e6:>8.2f}MB {kept / steps:>8,.0f}B"
        if check:
            nb, folder, _ = execute(steps, bounded=False)
            line += f"   unbounded, run: {written(nb, folder / 'saved.ipynb') / 1e6:.2f}MB"
        print(f"{line}   ({seconds:.0f}s to execute)", flush=True)
    return 0


if __name__ == "__main__":
    args = sys.argv[1:]
    sys.exit(main([int(a) for a in args if a != "--check"] or [100, 1000, 5000], "--check" in args))
