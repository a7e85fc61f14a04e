"""DBOS's side of ``bench_worker.py``: workflows shaped like the bench's runs, in DBOS's own venv.

Run by ``dbos_recovery.py`` with the Python of a venv that has ``dbos`` (never nb_durable's:
DBOS is no dependency of the package), so it imports only DBOS and the standard library.

    python dbos_workflows.py crash   DB_URL API_URL N WORKSPACE
    python dbos_workflows.py recover DB_URL API_URL EXECUTOR WORKSPACE

A workflow is the bench's agent run as DBOS would write it: ``TURNS`` model steps, each a real
HTTP request to the bench's loopback Messages API (the same server, the same latency), each
but the last followed by a tool step listing the workspace. ``crash`` (executor ``crashed``)
enqueues N workflows on the ``bench`` queue with no limit per process, and each one stops
inside its third step (sleeping, never recorded) until the bench SIGKILLs the process: two
steps recorded, the rest to recover, as the bench's runs. Told ``limit`` first, it sets the
queue's limit to ``WORKER_CONCURRENCY`` workflows at once per executor (``nb-durable worker
--concurrency 2``'s match) for the executors to come. ``recover`` launches one executor; it
prints ``ready``, then obeys stdin lines ``recover EXECUTOR`` (``DBOS._recover_pending_workflows``:
the dead executor's pending workflows go back on their queue, for every live executor to take).
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.request
from typing import Any

from dbos import DBOS, DBOSConfig

TURNS = 10  # as bench_worker.TURNS
CRASH_TURN = 1  # its model call is a run's third step, where CrashAt(3) stops bench_worker's runs
WORKER_CONCURRENCY = 2
QUEUE = "bench"
POLL = 0.05  # seconds between the queue's looks for work (DBOS's default is 1 s: this favours it)


def main(argv: list[str]) -> int:
    mode, db_url, api_url, arg, workspace = argv
    crash = mode == "crash"
    config: DBOSConfig = {
        "name": "nb-durable-bench",
        "system_database_url": db_url,
        "executor_id": "crashed" if crash else arg,
        "application_version": "bench",
        "log_level": "WARNING",
    }
    DBOS(config=config)
    @DBOS.step()
    def model(task: str, turn: int) -> dict[str, Any]:
        if crash and turn == CRASH_TURN:
            time.sleep(3600)  # inside the step: SIGKILLed here, nothing recorded
        body = json.dumps(
            {"model": "claude-test-1", "max_tokens": 256, "messages": [{"role": "user", "content": task}]}
        ).encode()
        request = urllib.request.Request(
            f"{api_url}/v1/messages",
            data=body,
            headers={"content-type": "application/json", "x-api-key": "sk-bench", "anthropic-version": "2023-06-01"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            answer: dict[str, Any] = json.loads(response.read())
        return answer

    @DBOS.step()
    def list_dir() -> list[str]:
        return sorted(os.listdir(workspace))

    @DBOS.workflow()
    def agent(task: str) -> str:
        for turn in range(TURNS):
            model(task, turn)
            if turn + 1 < TURNS:
                list_dir()
        return "Done."

    DBOS.launch()
    if crash:
        # No limit while the workflows start, so that all of them reach the crash together.
        queue = DBOS.register_queue(QUEUE, polling_interval_sec=POLL, on_conflict="always_update")
        for i in range(int(arg)):
            queue.enqueue(agent, f"dbos run {i}: look around")
    print("ready", flush=True)
    for line in sys.stdin:
        command, _, executor = line.strip().partition(" ")
        if command == "limit":
            # Before the crash: the executors read the queue's settings from the database as they
            # launch, so they start with the limit (a setting changed after launch may come late).
            DBOS.register_queue(QUEUE, worker_concurrency=WORKER_CONCURRENCY, polling_interval_sec=POLL, on_conflict="always_update")
            print("limited", flush=True)
        elif command == "recover":
            DBOS._recover_pending_workflows([executor])
            print(f"recovering {executor}", flush=True)
    time.sleep(3600)  # stdin closed: keep working until the bench ends this process
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
