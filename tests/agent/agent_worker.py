"""A durable agent in a process of its own, for the crash tests (``test_crash_resume.py``).

One *session* (the checkout on ``PYTHONPATH``):
``python tests/agent/agent_worker.py STORE WORKSPACE LEDGER RUN_ID [IN_DOUBT]`` resumes run
RUN_ID if its log exists (``resume_agent``, every setting from the log) and starts it
otherwise (``run_agent``). The model is the Messages API at ``$ANTHROPIC_BASE_URL`` (the
test's loopback server) through the real SDK, key ``$ANTHROPIC_API_KEY``; the tools are the
built-ins plus ``record_entry``, which posts to a *ledger service* that deduplicates by
idempotency key (``context.key``): an entry whose key is already in LEDGER is not added
again, and the service answers the same either way, as a payment API answers a retried
request with the first response. Every call the service receives is appended to
``LEDGER.calls`` and every call it deduplicated to ``LEDGER.dedup``, so a test can see the
re-executions that the idempotency key made harmless. The session prints one JSON line: the
run's status, final text and step counts.

The crash tests fork these sessions from the fork server of ``tests/forkserver.py`` (one
that has imported ``anthropic`` already), so that dozens of kills cost seconds.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nb_durable.agent import (
    AgentResult,
    AnthropicModel,
    RetryPolicy,
    Tool,
    ToolContext,
    ToolRegistry,
    builtin_tools,
    resume_agent,
    run_agent,
    tool,
)
from nb_durable.core.runs import read_run
from nb_durable.errors import RunNotFoundError

MODEL = "claude-test-1"  # made up: real names near end of life raise DeprecationWarning
TASK = "Summarise notes.txt, write a short report under out/, and record each step in the team ledger."
SERVICE_DELAY = 0.05
"""Seconds the ledger service takes before and after its effect, so kills land on both sides."""


def _append(path: Path, text: str) -> None:
    """Append and fsync: what a service has acknowledged survives a kill."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, text.encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def ledger_entries(ledger: Path) -> list[tuple[str, str]]:
    """The ledger's (key, entry) lines, in order."""
    if not ledger.exists():
        return []
    return [tuple(line.split("\t", 1)) for line in ledger.read_text().splitlines()]  # type: ignore[misc]


def receipt(key: str) -> str:
    """The service's receipt for an idempotency key (the same on every retry)."""
    return hashlib.sha256(key.encode()).hexdigest()[:12]


def ledger_tool(ledger: Path) -> Tool:
    """``record_entry``: an idempotent call to a service that deduplicates by ``context.key``."""
    calls = ledger.with_name(ledger.name + ".calls")
    dedup = ledger.with_name(ledger.name + ".dedup")

    @tool(effect="idempotent")
    def record_entry(entry: str, context: ToolContext) -> str:
        """Record one entry in the team ledger. Retrying with the same idempotency key adds nothing."""
        _append(calls, context.key + "\n")
        time.sleep(SERVICE_DELAY)
        if all(key != context.key for key, _ in ledger_entries(ledger)):
            _append(ledger, f"{context.key}\t{entry}\n")
        else:
            _append(dedup, context.key + "\n")
        time.sleep(SERVICE_DELAY)
        return f"ledger entry {entry!r} recorded (receipt {receipt(context.key)})"

    return record_entry


def registry_for(ledger: Path) -> ToolRegistry:
    """The tools every session offers: the built-ins and the ledger."""
    return ToolRegistry([*builtin_tools(bash_timeout=60), ledger_tool(ledger)])


def start_or_resume(
    task: str, run_id: str, store: str, workspace: str, registry: ToolRegistry, in_doubt: str = "skip", **values: Any
) -> AgentResult:
    """Start the run against the loopback API with the tests' settings, or resume it from its log."""
    try:
        read_run(run_id, store)
    except RunNotFoundError:
        return run_agent(
            task, run_id=run_id, client=AnthropicModel(timeout=30), model=MODEL, tools=registry, store=store,
            workspace=workspace, max_tokens=512, retry=RetryPolicy(max_attempts=3, base_delay=0.05, jitter=0.0),
            **values,
        )  # fmt: skip
    return resume_agent(run_id, tools=registry, store=store, in_doubt=in_doubt)  # type: ignore[arg-type]


def session(store: str, workspace: str, ledger: str, run_id: str, in_doubt: str = "skip") -> AgentResult:
    """One session of the run: start it, or resume it from its log."""
    return start_or_resume(TASK, run_id, store, workspace, registry_for(Path(ledger)), in_doubt, max_turns=12)


def main(argv: Sequence[str]) -> int:
    """Run one session; print its outcome as a JSON line."""
    result = session(*argv)
    print(
        json.dumps(
            {
                "status": result.status,
                "text": result.text,
                "turns": result.turns,
                "replayed": result.replayed_steps,
                "live": result.live_steps,
            }
        ),
        flush=True,
    )
    return 0 if result.status == "completed" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
