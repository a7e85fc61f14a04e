"""What ``nb-durable export`` of a 200-step run costs, against ``nb-durable show`` of the same run.

One run of 100 turns (a model call and a ``write_file`` call each: 200 steps) is recorded with
``ScriptedModel``; then, in fresh interpreters, ``nb-durable show RUN`` (the baseline: the same
process start, CLI and read of the run, and a timeline printed) and ``nb-durable export RUN``
run REPEAT times each. Printed: the median CPU (user + system, from ``getrusage`` of the
children) and wall time of each, the ratio export / show, the CPU ``import nbformat`` costs on
its own (for scale), and the export itself in this process, its imports done.

    python benchmarks/bench_export.py

Measured on these machines (2 cores, load ~4), nbformat 5.11. An export imported nbformat,
whose validator builds jsonschema's format grammars (1.5-2.3 s of CPU on its own), and
validated the notebook twice; it now writes the JSON itself (``agent/display/ipynb.py``):

                                 before          after
    nb-durable show (baseline)   0.67 s CPU      0.55 s CPU
    nb-durable export            3.09 s CPU      0.62 s CPU
    export / show                4.61x           1.12x
    in process, imports done     115 ms          64 ms
"""

from __future__ import annotations

import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TURNS = 100
REPEAT = 5
RUN = "bench-export"


def record(store: Path, workspace: Path) -> None:
    from nb_durable import run_agent
    from nb_durable.testing import ScriptedModel, text_message, tool_use_message

    script = [
        tool_use_message([("write_file", {"path": f"notes/t{turn:03}.md", "content": f"turn {turn}\n" * 20})], text=f"Turn {turn}.")
        for turn in range(TURNS - 1)
    ]
    model = ScriptedModel([*script, tool_use_message([("list_dir", {"path": "notes"})]), text_message("Done.")])
    run_agent("write a note a turn", run_id=RUN, client=model, model="claude-test-1", workspace=workspace, store=str(store),
              max_turns=TURNS + 1)


def timed(args: list[str]) -> tuple[float, float]:
    """CPU seconds (user + system) and wall seconds of one fresh process running ``args``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, wall


def median_of(args: list[str]) -> tuple[float, float]:
    runs = [timed(args) for _ in range(REPEAT)]
    return statistics.median(c for c, _ in runs), statistics.median(w for _, w in runs)


def in_process(store: Path, out: Path) -> float:
    """Median seconds of writing the notebook in this process, its imports already done: the
    export itself (read the run, build the cells, write the file)."""
    from nb_durable import read_run
    from nb_durable.agent.display.export import export_notebook

    export_notebook(read_run(RUN, str(store)), out)
    times = []
    for _ in range(REPEAT):
        started = time.perf_counter()
        export_notebook(read_run(RUN, str(store)), out)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> int:
    with tempfile.TemporaryDirectory() as folder:
        store, workspace = Path(folder) / "runs", Path(folder) / "work"
        workspace.mkdir()
        record(store, workspace)
        itself = in_process(store, Path(folder) / "y.ipynb")
        cli = [sys.executable, "-m", "nb_durable"]
        bare = median_of([sys.executable, "-c", "pass"])
        nbformat = median_of([sys.executable, "-c", "import nbformat"])
        show = median_of([*cli, "show", RUN, "--store", str(store)])
        export = median_of([*cli, "export", RUN, "--store", str(store), "-o", str(Path(folder) / "x.ipynb")])
    print(f"{TURNS * 2}-step run, median of {REPEAT} fresh processes each\n")
    print(f"{'what':<28} {'CPU s':>7} {'wall s':>7}")
    for label, (cpu, wall) in [("python -c pass", bare), ("python -c 'import nbformat'", nbformat),
                               ("nb-durable show (baseline)", show), ("nb-durable export", export)]:  # fmt: skip
        print(f"{label:<28} {cpu:>7.2f} {wall:>7.2f}")
    print(f"\nexport / show: {export[0] / show[0]:.2f}x CPU, {export[1] / show[1]:.2f}x wall")
    print(f"the export itself, in process (imports done): {itself * 1000:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
