"""How big a saved notebook grows with a long run: a run of 100, 1,000 and 5,000 steps (every
tool output 4 KB) by ``%%agent``, then replayed by ``%agent_resume`` in a second cell, executed
by nbclient (which saves every widget's last state), then written to disk.

    python benchmarks/bench_notebook_size.py [STEPS ...]

Each size is measured twice in the same script: as nb_durable saves it (the timeline's saved
forms within ``budget.DETAIL_BUDGET``), and unbounded, every row's detail kept (the kernel's
``budget.gap`` replaced by one that leaves nothing out), with the ratio of the two.
"""

from __future__ import annotations

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


def saved_size(steps: int, *, bounded: bool) -> tuple[int, float]:
    """Bytes of the saved notebook, and seconds to execute it."""
    folder = Path(tempfile.mkdtemp(prefix="nb-durable-bench-size-"))
    (folder / "big.txt").write_text(("0123456789abcde\n" * (OUTPUT // 16)), encoding="utf-8")
    turns = steps // 2
    script = [reply(f"Turn {t}: reading again.", tool_use("read_file", {"path": "big.txt"}, id=f"toolu_{t:05d}")) for t in range(turns - 1)]
    script.append(reply("Read it many times; it never changed."))
    with MessagesAPIServer(ScriptedScenario(script)) as server:
        first = "%load_ext nb_durable" + ("" if bounded else UNBOUNDED)
        nb = v4.new_notebook(
            cells=[
                v4.new_code_cell(first),
                v4.new_code_cell(f"%%agent --run big --model {MODEL} --max-turns {turns + 1}\nRead big.txt, many times."),
                v4.new_code_cell("%agent_resume big"),
            ]
        )
        env = subprocess_env(ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="test-key")
        started = time.perf_counter()
        NotebookClient(nb, timeout=1800, kernel_name="python3", resources={"metadata": {"path": str(folder)}}).execute(env=env)
        elapsed = time.perf_counter() - started
    path = folder / "saved.ipynb"
    nbformat.write(nb, path)
    return path.stat().st_size, elapsed


def main(sizes: list[int]) -> int:
    print(f"{'steps':>6} {'unbounded':>12} {'bounded':>12} {'ratio':>7}")
    for steps in sizes:
        whole, _ = saved_size(steps, bounded=False)
        kept, seconds = saved_size(steps, bounded=True)
        print(f"{steps:>6} {whole / 1e6:>10.2f}MB {kept / 1e6:>10.2f}MB {kept / whole:>7.3f}   ({seconds:.0f}s to execute)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main([int(a) for a in sys.argv[1:]] or [100, 1000, 5000]))
