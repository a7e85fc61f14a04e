"""What masking secrets costs a tool's output: ``Redactor.redact`` and a streamed redaction, on ordinary output.

Every tool result goes through a ``Redactor`` before the model or the log sees it (the
environment's secret variables, and the well-known credential formats even when none is set).
The corpus is ordinary output made by real commands on this machine: the Python sources of
the standard library's ``email``, ``http`` and ``json`` (``cat``), ``ls -l`` of /usr/bin, ``git log --stat``, columns of numbers (``seq |
paste``), and one dump (``xxd`` of ``json/decoder.py``). Each is redacted whole,
and as ``run_bash`` streams it (``RedactingStream``, 4 KiB pieces), by a redactor with no secret
and by one with three (API-key-like values, none of which is in the corpus, so the figures
are the search: the one line masked is ``email``'s ``TOKEN_ENDS = TSPECIALS``, read as a
``NAME=value`` line). Each figure is the least of 7 timings (the machine is shared: others' load only adds), in
ms a MB of output.

    python benchmarks/bench_redact.py

Measured 2026-12-06 on this 2-core shared machine (load average 1.4 to 2.2): three runs of the
code before and after the change that reads more hex dumps (two-byte words, 4 to 256 bytes a
row, credential formats in a dump's bytes), taken in turn, the least of each cell; after / before:

    output           no secret whole  streamed   3 secrets whole  streamed
    python sources         1.18x        1.29x         0.93x         0.87x
    ls -l                  1.08x        1.07x         0.98x         0.91x
    git log --stat         1.09x        1.08x         0.89x         0.86x
    number columns         1.33x        1.43x         0.80x         0.77x
    xxd                    3.21x        3.26x         1.00x         1.02x

With a known secret (a run's model key always is one) ordinary output is redacted faster: one
search for the lines a dump's rows may be, where there was one for each dialect. With none,
a dump is now read for the credential formats in its bytes (xxd's 3.2x), and that search
costs ordinary output 1.1x to 1.4x (before, nothing was read without a known secret). Before,
in ms a MB (whole, streamed; no secret, then 3): python sources 125, 280, 173, 489; xxd 44,
146, 174, 576.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from nb_durable.agent.secrets import Redactor  # noqa: E402

SECRETS = {
    "ANTHROPIC_API_KEY": "sk-ant-api03-" + "Zq9x" * 20,
    "GITHUB_TOKEN": "ghp_" + "a1B2" * 9,
    "DB_PASSWORD": "correct horse battery staple 42",
}


def output(command: str) -> str:
    return subprocess.run(command, shell=True, cwd=REPO, capture_output=True, check=True).stdout.decode(
        "utf-8", "replace"
    )


def corpus() -> dict[str, str]:
    stdlib = Path(shlex.__file__).parent
    sources = sorted(str(p) for name in ("email", "http", "json") for p in (stdlib / name).rglob("*.py"))
    return {
        "python sources": output("cat " + " ".join(map(shlex.quote, sources))),
        "ls -l": output("ls -l /usr/bin /usr/lib | head -4000"),
        "git log --stat": output("git log --stat -n 300"),
        "number columns": output("seq 100000 160000 | paste - - - - - -"),
        "xxd": output(f"xxd {shlex.quote(str(stdlib / 'json' / 'decoder.py'))}"),
    }


def per_mb(fn: Callable[[Redactor, str], object], redactor: Redactor, text: str, repeat: int = 7) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn(redactor, text)
        times.append(time.perf_counter() - started)
    return min(times) * 1000 / (len(text) / 1e6)


def streamed(redactor: Redactor, text: str) -> str:
    stream = redactor.stream()
    out = [stream.feed(text[i : i + 4096]) for i in range(0, len(text), 4096)]
    return "".join(out) + stream.flush()


def main() -> None:
    texts = corpus()
    redactors = {"no secret": Redactor(), "3 secrets": Redactor(SECRETS)}
    print(
        f"{'output':16} {'size':>8}  "
        + "  ".join(f"{name + ' ' + how:>22}" for name in redactors for how in ("whole", "streamed"))
    )
    for label, text in texts.items():
        cells = []
        for redactor in redactors.values():
            cells.append(per_mb(Redactor.redact, redactor, text))
            cells.append(per_mb(streamed, redactor, text))
        print(f"{label:16} {len(text):>8}  " + "  ".join(f"{c:>17.1f} ms/MB" for c in cells))


if __name__ == "__main__":
    main()
