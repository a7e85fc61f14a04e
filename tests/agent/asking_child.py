"""A run that asks a person, in a process of its own, answered through its standard input.

``python tests/agent/asking_child.py STORE WORKSPACE`` runs ``asks``: the model calls
``run_bash`` (``echo pushed > pushed.txt``), which needs approval (``approve_bash="echo"``); the
approver prints ``asking`` and reads one line from standard input (``yes`` approves, anything
else denies). The model's next call first prints ``thinking`` and reads another line, so a
test can look at the run while it runs after the answer; then the run completes and prints its
status. The test reads the run from other processes meanwhile (``nb-durable runs``), or kills
this one while it asks.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from nb_durable.agent import RunHooks, run_agent
from nb_durable.agent.run.hooks import Approval
from nb_durable.testing import text_message, tool_use_message
from tests.fakes.hooked import Hooked


def held(request: Mapping[str, Any]) -> None:
    """Every model call after the first waits for a line on standard input."""
    if len(request["messages"]) > 1:
        print("thinking", flush=True)
        sys.stdin.readline()


def approve(name: str, tool_input: Any, reason: str) -> Approval:
    """Ask the test: one line on standard input."""
    print("asking", flush=True)
    return Approval(sys.stdin.readline().strip() == "yes", by="the test")


def main(store: str, workspace: str) -> None:
    replies = [tool_use_message([("run_bash", {"command": "echo pushed > pushed.txt"})]), text_message("Pushed.")]
    result = run_agent(
        "push it", client=Hooked(replies, held), model="claude-test-1", workspace=workspace, store=store,
        run_id="asks", approve_bash="echo", hooks=RunHooks(approve=approve),
    )  # fmt: skip
    print(result.status, flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
