"""What a model step's streamed text costs a run, with an observer that draws steps and with none.

A run whose observer draws steps (a notebook's timeline, the terminal's progress) gets the
reply's text piece by piece, and each piece makes the step's view anew with all the text so
far. A run whose observer draws none (a worker's, by default) is asked with no text callback
(``Observer.hears_steps``): nothing is made per piece. Both ways run the same one-turn run of
a scripted model whose reply is ``--words`` words streamed in as many pieces, on a JSONL store;
the baseline is the run that draws its steps, measured in the same process. Each figure is
the least of 7 timings (the machine is shared: others' load only adds), in ms a run.

    python benchmarks/bench_streamed_text.py [--words 100,1000,4000]

Measured 2026-12-07 on the 2-core machine (quiet):

     pieces  drawn ms  not drawn ms  drawn / not drawn
        100       3.0           2.2               1.3x
       1000      12.0           2.6               4.6x
       4000      66.4           3.0              21.8x

Drawn, a run's cost grows with the square of its reply's pieces (each view joins all the text
so far); not drawn, it barely grows.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nb_durable.agent import Observer, RunHooks, StepView, run_agent
from nb_durable.agent.models.messages import text_message
from nb_durable.agent.models.scripted import ScriptedModel


class Drawing(Observer):
    """An observer that draws steps (and does nothing with them, so only the run's cost counts)."""

    def step_changed(self, step: StepView) -> None:
        pass


def one_run(folder: Path, n: int, words: int, observer: Observer) -> float:
    """Seconds of one run answered with ``words`` words in as many pieces."""
    model = ScriptedModel([text_message(" ".join(["word"] * words))], pieces=words)
    start = time.perf_counter()
    run_agent(
        "say it", client=model, model="claude-test-1", workspace=folder, store=str(folder / "runs"),
        run_id=f"r{n}", hooks=RunHooks(observer=observer),
    )  # fmt: skip
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--words", default="100,1000,4000", help="the reply's words (each a piece), comma separated")
    args = parser.parse_args()
    print(f"{'pieces':>7} {'drawn ms':>9} {'not drawn ms':>13} {'drawn / not drawn':>18}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        counter = 0
        for words in (int(w) for w in args.words.split(",")):
            best = {"drawn": float("inf"), "none": float("inf")}
            for _ in range(7):
                for name, observer in (("drawn", Drawing()), ("none", Observer())):
                    counter += 1
                    best[name] = min(best[name], one_run(folder, counter, words, observer))
            print(f"{words:>7} {best['drawn'] * 1000:>9.1f} {best['none'] * 1000:>13.1f} {best['drawn'] / best['none']:>17.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
