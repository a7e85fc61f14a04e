"""Agent runs in a process of their own, for the worker tests (``test_worker.py``), killed by the test.

``python tests/agent/worker_runs.py STORE WORKSPACE RUN_ID...`` starts one ``run_agent`` per
run id, each on a thread, with the built-in tools only (what a worker can rebuild from the
log), against the Messages API at ``$ANTHROPIC_BASE_URL`` through the real SDK. The test
SIGKILLs the process while every run waits for a model reply; what is left is each run's log.
"""

from __future__ import annotations

import re
import sys
import threading
from collections.abc import Sequence

from nb_durable.agent import AnthropicModel, RetryPolicy, run_agent

MODEL = "claude-test-1"  # made up: real names near end of life raise DeprecationWarning
TAG = "worker-test"
_TASK = re.compile(r"^Worker test run (\S+):")


def task_for(run_id: str) -> str:
    """Each run's task names it, so the loopback server can answer each run its own way."""
    return f"Worker test run {run_id}: record two entries in ledger.txt and read the notes."


def run_of(task: str) -> str | None:
    """The run id a task names (see ``task_for``)."""
    match = _TASK.match(task)
    return match.group(1) if match else None


def start(store: str, workspace: str, run_id: str, base_url: str | None = None, api_key: str | None = None) -> None:
    """One run, from its first step, as ``nb-durable run`` would start it (the API from the
    environment unless named)."""
    run_agent(
        task_for(run_id),
        run_id=run_id,
        client=AnthropicModel(timeout=30, base_url=base_url, api_key=api_key),
        model=MODEL,
        store=store,
        workspace=workspace,
        max_turns=8,
        max_tokens=512,
        retry=RetryPolicy(max_attempts=3, base_delay=0.05, jitter=0.0),
        tags=(TAG,),
    )


def main(argv: Sequence[str]) -> int:
    store, workspace, *run_ids = argv
    threads = [threading.Thread(target=start, args=(store, workspace, r)) for r in run_ids]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
