"""What importing nb_durable costs, beside the interpreter's own start, in one run.

For each statement it runs ``python -X importtime -c STATEMENT`` several times in fresh
interpreters and reads the cumulative time of nb_durable's own top-level modules (what
``import`` of them added, the standard library they pulled in included), then prints the
median and its ratio to the median start of a bare interpreter (``python -c pass``, wall
time) measured in the same run. Targets: ``import nb_durable`` <= 30 ms of its own.

    python benchmarks/bench_import.py
"""

from __future__ import annotations

import re
import statistics
import subprocess
import sys
import time

STATEMENTS = [
    ("import nb_durable", "import nb_durable"),
    ("the step log", "from nb_durable import EventLog, run_step"),
    ("the CLI's parser", "import nb_durable.cli"),
    ("%load_ext's module", "import nb_durable.jupyter.extension"),
    ("the agent loop (no SDK)", "from nb_durable import run_agent"),
]
REPEAT = 9
_LINE = re.compile(r"import time:\s+\d+ \|\s+(\d+) \|( *)(\S+)")


def own_ms(statement: str) -> float:
    """Microseconds of nb_durable's top-level imports in one fresh interpreter, in ms."""
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", statement], capture_output=True, text=True, check=True
    ).stderr
    total = 0
    for cumulative, indent, name in _LINE.findall(out):
        # A top-level entry (indent 1) of our package: it includes everything it imported.
        if len(indent) == 1 and name.split(".")[0] == "nb_durable":
            total += int(cumulative)
    return total / 1000


def bare_start_ms() -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return (time.perf_counter() - started) * 1000


def main() -> int:
    bare = statistics.median(bare_start_ms() for _ in range(REPEAT))
    print(f"bare interpreter start: {bare:.1f} ms (median of {REPEAT})\n")
    print(f"{'what':<26} {'ms of its own':>14} {'x bare start':>13}")
    ok = True
    for label, statement in STATEMENTS:
        ms = statistics.median(own_ms(statement) for _ in range(REPEAT))
        print(f"{label:<26} {ms:>14.1f} {ms / bare:>12.2f}x")
        if statement == "import nb_durable":
            ok = ms <= 30
    print("\n[ok]" if ok else "\n[MISSED]", "import nb_durable <= 30 ms of its own")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
