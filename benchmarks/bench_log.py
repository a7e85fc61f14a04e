"""The step log against the reference design's naive JSONL log, side by side in one run.

For 1,000 and 10,000 small steps and 200 steps with 100 KB results, it measures per step:
recording with full durability (every record fsynced) and replaying (reopen the run and
run every step again from the log), for nb_durable's EventLog and for the naive log of the
reference design (a dict per line, ``json.dumps`` + write + flush, with and without fsync).
It prints ratios, taken within each repeat (this kind of machine drifts in speed between
repeats), and checks the absolute targets beside the naive log's own speed, for scale.

    python benchmarks/bench_log.py            # the full table
    python benchmarks/bench_log.py --quick    # fewer, smaller runs (a smoke test)
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nb_durable import EventLog, run_step


class NaiveLog:
    """The reference design's EventLog: one JSON object per line, a cursor, no checks."""

    def __init__(self, run_id: str, root: Path, fsync: bool) -> None:
        self.path = root / f"{run_id}.jsonl"
        self.fsync = fsync
        self.events: list[dict[str, Any]] = []
        if self.path.exists():
            with open(self.path) as f:
                self.events = [json.loads(line) for line in f]
        self.cursor = 0
        self.file = open(self.path, "a")  # noqa: SIM115 (closed by close())

    def append(self, event: dict[str, Any]) -> None:
        self.file.write(json.dumps(event) + "\n")
        self.file.flush()
        if self.fsync:
            os.fsync(self.file.fileno())

    def close(self) -> None:
        self.file.close()


def naive_run_step(log: NaiveLog, step_id: str, fn: Callable[[], Any]) -> Any:
    if log.cursor < len(log.events):
        event = log.events[log.cursor]
        assert event["step_id"] == step_id
        log.cursor += 1
        return event["result"]
    result = fn()
    log.append({"step_id": step_id, "result": result})
    log.cursor += 1
    return result


def small_result(i: int) -> Any:
    return {"i": i, "ok": True}


def big_result(i: int) -> Any:
    return {"i": i, "text": ("line %06d of a long tool output\n" % i) * 3200}  # ~100 KB


def time_it(fn: Callable[[], None]) -> float:
    gc.collect()
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure(n: int, make: Callable[[int], Any], root: Path, repeat: int) -> dict[str, float]:
    results = [make(i) for i in range(n)]
    ids = [f"step:{i}" for i in range(n)]
    timings: dict[str, list[float]] = {}

    def add(name: str, seconds: float) -> None:
        timings.setdefault(name, []).append(seconds / n)

    for r in range(repeat):
        folder = root / f"r{r}"
        folder.mkdir()

        def ours_record(folder: Path = folder) -> None:
            with EventLog("ours", folder, durability="full") as log:
                for sid, value in zip(ids, results, strict=True):
                    run_step(log, sid, lambda value=value: value)

        def ours_replay(folder: Path = folder) -> None:
            with EventLog("ours", folder) as log:
                for sid in ids:
                    run_step(log, sid, _never)

        def ours_reopen(folder: Path = folder) -> None:
            EventLog("ours", folder).close()

        def naive_record(fsync: bool, run_id: str, folder: Path = folder) -> Callable[[], None]:
            def go() -> None:
                log = NaiveLog(run_id, folder, fsync)
                for sid, value in zip(ids, results, strict=True):
                    naive_run_step(log, sid, lambda value=value: value)
                log.close()

            return go

        def naive_replay(folder: Path = folder) -> None:
            log = NaiveLog("naive-fsync", folder, False)
            for sid in ids:
                naive_run_step(log, sid, _never)
            log.close()

        def naive_reopen(folder: Path = folder) -> None:
            NaiveLog("naive-fsync", folder, False).close()

        add("naive record (write+flush)", time_it(naive_record(False, "naive-flush")))
        add("naive record (write+fsync)", time_it(naive_record(True, "naive-fsync")))
        add("ours record (full durability)", time_it(ours_record))
        add("naive replay", time_it(naive_replay))
        add("ours replay", time_it(ours_replay))
        timings.setdefault("ours reopen (whole run)", []).append(time_it(ours_reopen))
        timings.setdefault("naive reopen (whole run)", []).append(time_it(naive_reopen))
        # Ratios are taken within a repeat: this machine's speed drifts between repeats.
        last = {k: v[-1] for k, v in timings.items()}
        for name, ours, naive in (
            ("record ratio", "ours record (full durability)", "naive record (write+fsync)"),
            ("replay ratio", "ours replay", "naive replay"),
            ("reopen ratio", "ours reopen (whole run)", "naive reopen (whole run)"),
        ):
            timings.setdefault(name, []).append(last[ours] / last[naive])
        size = (folder / "ours.jsonl").stat().st_size
        payload = sum(len(json.dumps(v, separators=(",", ":"))) for v in results)
        timings.setdefault("bytes per step over result", []).append((size - payload) / n)
        shutil.rmtree(folder)
    return {k: statistics.median(v) for k, v in timings.items()}


def _never() -> Any:
    raise AssertionError("replay must not execute a step")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller runs, one repeat")
    args = parser.parse_args()
    cases = [("1,000 small", 1000, small_result), ("10,000 small", 10000, small_result), ("200 x 100 KB", 200, big_result)]
    if args.quick:
        cases = [("300 small", 300, small_result), ("20 x 100 KB", 20, big_result)]
    repeat = 1 if args.quick else 5
    root = Path(tempfile.mkdtemp(prefix="nb-durable-bench-"))
    ok = True
    try:
        print(f"nb_durable step log vs the naive reference log ({repeat} repeat(s), median; disk: {root})\n")
        header = f"{'case':<14} {'record us/step':>15} {'/naive fsync':>13} {'replay us/step':>15} {'/naive':>7} {'steps/s':>9} {'reopen ms':>10} {'bytes/step+':>12}"
        print(header)
        print("-" * len(header))
        for name, n, make in cases:
            m = measure(n, make, root, repeat)
            record = m["ours record (full durability)"]
            replay = m["ours replay"]
            rec_ratio = m["record ratio"]
            rep_ratio = m["replay ratio"]
            rate = 1 / replay
            print(
                f"{name:<14} {record * 1e6:>15.1f} {rec_ratio:>12.2f}x {replay * 1e6:>15.2f} {rep_ratio:>6.2f}x "
                f"{rate:>9,.0f} {m['ours reopen (whole run)'] * 1e3:>10.1f} {m['bytes per step over result']:>12.0f}"
            )
            print(
                f"{'':<14} naive: write+flush {m['naive record (write+flush)'] * 1e6:.1f} us, "
                f"write+fsync {m['naive record (write+fsync)'] * 1e6:.1f} us, replay {m['naive replay'] * 1e6:.2f} us, "
                f"reopen {m['naive reopen (whole run)'] * 1e3:.1f} ms (ours {m['reopen ratio']:.2f}x)"
            )
            checks = [
                (rec_ratio <= 1.3, f"record <= 1.3x naive write+fsync ({rec_ratio:.2f}x)"),
                (rep_ratio <= 2.0, f"replay <= 2x naive replay ({rep_ratio:.2f}x)"),
                (m["bytes per step over result"] <= 300, f"bytes per step <= result + 300 ({m['bytes per step over result']:.0f})"),
            ]
            if "small" in name:
                checks.append((rate >= 100_000, f"replay >= 100,000 small steps/s ({rate:,.0f})"))
            if n == 10000:
                reopen = m["ours reopen (whole run)"]
                checks.append((reopen <= 0.05, f"reopen 10,000 steps <= 50 ms ({reopen * 1e3:.1f} ms)"))
            for passed, text in checks:
                ok &= passed
                print(f"{'':<14} [{'ok' if passed else 'MISSED'}] {text}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print("\nall targets met" if ok else "\nsome targets missed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
