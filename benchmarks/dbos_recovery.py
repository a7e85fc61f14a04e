"""DBOS recovering interrupted workflows, for ``bench_worker.py``: the same count, server and latency.

DBOS lives in a venv of its own (never a dependency of nb_durable): ``--dbos-python`` names its
Python, by default ``$NB_DURABLE_DBOS_PYTHON`` or ``.dbos-venv/bin/python`` at the repository
root (``SETUP`` makes it). This module runs in the bench's venv: it starts ``dbos_workflows.py``
with that Python and reads DBOS's system database (schema ``dbos``) with psycopg.

One measurement, on a fresh database of the bench's PostgreSQL server: a ``crash`` process
enqueues N workflows, waits until each has recorded its first two steps, and is SIGKILLed
(every workflow stopped inside its third step, as the bench's runs are); then K ``recover``
executors start, the first is told to recover the dead executor's workflows, and all take them
from the queue, two at a time each. With ``kill_one``, the first executor is SIGKILLed once
half the workflows are done and the second is told at once to recover it: without DBOS
Conductor someone outside must declare an executor dead, and here that costs DBOS nothing.

Figures, as the bench's: runs/s over the window from the first step a recovery executor started
to the last workflow's end (DBOS's own timestamps, so its start-up is left out; the wall time
with it beside), and p50/p99 of the time between a workflow's consecutive recorded steps.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import IO, Any

import psycopg

from benchmarks.proc_cpu import cpu_of, server_cpu
from tests.pg import server

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = Path(__file__).with_name("dbos_workflows.py")
ENV_PYTHON = "NB_DURABLE_DBOS_PYTHON"
DEFAULT_PYTHON = ROOT / ".dbos-venv" / "bin" / "python"
SETUP = "python3 -m venv .dbos-venv && .dbos-venv/bin/pip install dbos 'psycopg[binary]'"

__all__ = ["SETUP", "dbos_python", "recover"]


def dbos_python(given: str | None) -> tuple[str | None, str]:
    """The Python of a venv with DBOS and its version, or None and why not."""
    python = given or os.environ.get(ENV_PYTHON) or str(DEFAULT_PYTHON)
    if not Path(python).exists():
        return None, f"no Python at {python}"
    probe = subprocess.run(
        [python, "-c", "from importlib import metadata; import dbos, psycopg; print(metadata.version('dbos'))"],
        capture_output=True, text=True, timeout=120, check=False,
    )
    if probe.returncode != 0:
        return None, f"{python} cannot import dbos and psycopg: {(probe.stderr.strip().splitlines() or ['?'])[-1]}"
    return python, probe.stdout.strip()


def _start(python: str, args: list[str], log: IO[str]) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [python, str(SCRIPT), *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True, bufsize=1
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if line != "ready":
        proc.kill()
        raise RuntimeError(f"a DBOS process ({' '.join(args[:1])}) did not start: {line!r}; see {log.name}")
    return proc


def _tell(proc: subprocess.Popen[str], line: str) -> None:
    assert proc.stdin is not None
    proc.stdin.write(line + "\n")
    proc.stdin.flush()


def _count(db: psycopg.Connection[Any], sql: str) -> int:
    row = db.execute(sql).fetchone()
    return int(row[0]) if row else 0


def _wait(what: str, done: Any, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise RuntimeError(f"DBOS: timed out waiting for {what}")
        time.sleep(0.05)


_RECORDED_TWO = (
    "SELECT count(*) FROM (SELECT workflow_uuid FROM dbos.operation_outputs GROUP BY workflow_uuid "
    "HAVING count(*) >= 2) t"
)
_DONE = "SELECT count(*) FROM dbos.workflow_status WHERE status = 'SUCCESS'"


def recover(
    python: str, db_url: str, api_url: str, request: Path, n: int, workers: int, kill_one: bool, workspace: Path, logs: Path
) -> dict[str, Any]:
    """Crash N workflows, then have K executors recover them (their model requests carry what
    ``request`` holds besides the conversation, as the bench's runs send): whether one was killed, the window
    and wall seconds, the gaps between steps (seconds), the steps recorded, for the bench's
    ``figures``, and the CPU seconds of the recovery (``cpu``: the executors' since they were
    ready, this process's, PostgreSQL's). DBOS's output goes to a file in ``logs``, named in any error."""
    common = [db_url, api_url, str(request)]
    with open(logs / f"dbos-{workers}-{int(kill_one)}.log", "w") as log, psycopg.connect(db_url, autocommit=True) as db:
        crashed = _start(python, ["crash", *common, str(n), str(workspace)], log)
        try:
            _wait("every workflow to record two steps", lambda: _count(db, _RECORDED_TWO) == n)
            _tell(crashed, "limit")
            assert crashed.stdout is not None and crashed.stdout.readline().strip() == "limited"
        finally:
            crashed.send_signal(signal.SIGKILL)
            crashed.wait()
        pending = _count(db, "SELECT count(*) FROM dbos.workflow_status WHERE status = 'PENDING' AND executor_id = 'crashed'")
        assert pending == n, f"DBOS: {pending} of {n} workflows were left pending by the crash"
        mark, started = time.time(), time.monotonic()
        procs: list[subprocess.Popen[str]] = []
        killed = False
        try:
            procs = [_start(python, ["recover", *common, f"r{i}", str(workspace)], log) for i in range(workers)]
            # Their start-up (importing DBOS, launching) is before this: only the recovery counts.
            cpu = {"executors": -cpu_of(p.pid for p in procs), "own": -time.process_time(), "database": -server_cpu(server().data)}
            _tell(procs[0], "recover crashed")
            while (done := _count(db, _DONE)) < n:
                if kill_one and not killed and done >= n // 2:
                    cpu["executors"] += cpu_of([procs[0].pid])
                    procs[0].send_signal(signal.SIGKILL)
                    procs[0].wait()
                    _tell(procs[1], "recover r0")
                    killed = True
                for p in procs[int(killed):]:
                    if p.poll() is not None:
                        raise RuntimeError(f"a DBOS executor exited ({p.returncode}); see {log.name}")
                time.sleep(0.05)
            wall = time.monotonic() - started
            cpu["executors"] += cpu_of(p.pid for p in procs[int(killed):])
            cpu["own"] += time.process_time()
            cpu["database"] += server_cpu(server().data)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.send_signal(signal.SIGKILL)
                p.wait()
        since = int(mark * 1000)
        steps = db.execute(
            "SELECT workflow_uuid, started_at_epoch_ms, completed_at_epoch_ms FROM dbos.operation_outputs "
            "WHERE completed_at_epoch_ms >= %s ORDER BY workflow_uuid, function_id",
            (since,),
        ).fetchall()
        end = _count(db, "SELECT max(completed_at) FROM dbos.workflow_status")
        recorded = _count(db, "SELECT count(*) FROM dbos.operation_outputs")
    first = min(int(s[1] or s[2]) for s in steps)
    gaps: list[float] = []
    spans: list[tuple[int, int]] = []  # each workflow's recovered stretch, to check the concurrency
    for _, group in itertools.groupby(steps, key=lambda s: s[0]):
        rows = list(group)
        stamps = [int(r[2]) for r in rows]
        gaps += [(b - a) / 1000 for a, b in itertools.pairwise(stamps)]
        spans.append((int(rows[0][1] or rows[0][2]), stamps[-1]))
    most = _most_at_once(spans)
    if most > 2 * workers:
        raise RuntimeError(f"DBOS ran {most} workflows at once on {workers} executor(s) of 2: not like for like")
    return {"killed": killed, "window": (end - first) / 1000, "wall": wall, "gaps": gaps, "steps": recorded, "cpu": cpu}


def _most_at_once(spans: list[tuple[int, int]]) -> int:
    """The most workflows being recovered at one moment (one ending as another starts: not both)."""
    most = now = 0
    for _, change in sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans]):
        now += change
        most = max(most, now)
    return most
