"""A parent run that delegates to two children, for the delegation tests, in-process or alone.

The loopback Messages API answers by the conversation (``scenario``): the parent's first turn
delegates "find the bug" and "write the test" in one turn, each child records one entry in
the ledger service of ``agent_worker`` (deduplicated by idempotency key, every call counted)
and reports, and the parent ends with both reports. As a script,
``python tests/agent/delegation/tree_agent.py STORE WORKSPACE LEDGER RUN_ID [TOOLS]`` runs one session
(start or resume) against ``$ANTHROPIC_BASE_URL`` and prints its outcome as a JSON line.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nb_durable.agent import (
    AgentResult,
    ToolRegistry,
    builtin_tools,
)
from tests.agent.agent_worker import registry_for, start_or_resume
from tests.fakes.messages_api import RecordedRequest, Reply, reply, tool_use

PARENT = "Fix the failing test: delegate finding the bug and writing a regression test."
FIND = "Find the bug in calc.add and say where it is."
TEST = "Write a regression test for calc.add."
REPORTS = {FIND: "The bug is in calc.add: it subtracts.", TEST: "Wrote test_add_adds."}
ENTRIES = {FIND: "found the bug", TEST: "wrote the test"}


def _task(request: RecordedRequest) -> str:
    first = request.messages[0]["content"] if request.messages else ""
    return first if isinstance(first, str) else str(first[0].get("text", ""))


def _results(request: RecordedRequest) -> list[str]:
    last = request.messages[-1]["content"]
    return [str(b.get("content")) for b in last if isinstance(b, dict) and b.get("type") == "tool_result"]


def scenario(request: RecordedRequest) -> Reply:
    """The reply to any request of the tree, from its conversation alone."""
    task, turn = _task(request), request.turn or 0
    if task == PARENT:
        if turn == 0:
            return reply(
                "I split the fix in two.",
                tool_use("delegate", {"task": FIND}, id="toolu_find"),
                tool_use("delegate", {"task": TEST}, id="toolu_test"),
            )
        return reply("Done. " + " | ".join(_results(request)))
    if task in REPORTS:
        if turn == 0:
            tools = [t.get("name") for t in request.body.get("tools") or []]
            if "record_entry" not in tools:  # a tree of built-in tools only, which a worker can rebuild
                return reply(tool_use("list_dir", {"path": "."}, id=f"toolu_{ENTRIES[task][:4]}"))
            return reply(tool_use("record_entry", {"entry": ENTRIES[task]}, id=f"toolu_{ENTRIES[task][:4]}"))
        return reply(REPORTS[task])
    return reply(f"unexpected task {task!r}")


def session(store: str, workspace: str, ledger: str, run_id: str, tools: str = "ledger", **values: Any) -> AgentResult:
    """One session of the tree's parent: start it, or resume it from its log (``tools``:
    ``ledger`` for the built-ins and the ledger, ``builtin`` for the built-ins alone)."""
    registry = registry_for(Path(ledger)) if tools == "ledger" else ToolRegistry(builtin_tools())
    return start_or_resume(PARENT, run_id, store, workspace, registry, delegate=True, **values)


def main(argv: Sequence[str]) -> int:
    """Run one session; print its outcome as a JSON line."""
    result = session(*argv)
    print(json.dumps({"status": result.status, "text": result.text, "live": result.live_steps}), flush=True)
    return 0 if result.status == "completed" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
