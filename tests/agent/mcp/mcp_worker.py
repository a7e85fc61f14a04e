"""A durable agent with MCP tools in a process of its own, for the SIGKILL tests.

``python tests/agent/mcp/mcp_worker.py STORE WORKSPACE CONFIG RUN_ID [IN_DOUBT]`` starts run
RUN_ID with the MCP servers of the config file CONFIG (``tools_for_run``, as ``nb-durable run
--mcp`` does), or resumes it if its log exists (the servers from what the run recorded). The
model is the Messages API at ``$ANTHROPIC_BASE_URL`` through the real SDK. It prints one JSON
line: the run's status and step counts, and the pid of this process for the test to kill.
"""

from __future__ import annotations

import json
import os
import sys

from nb_durable.agent import AnthropicModel, resume_agent, run_agent, tools_for_run
from nb_durable.core.runs import read_summary
from nb_durable.errors import RunNotFoundError

TASK = "Record the delivery in the ledger."


def main(argv: list[str]) -> None:
    store, workspace, config, run_id = argv[:4]
    in_doubt = argv[4] if len(argv) > 4 else "skip"
    client = AnthropicModel(timeout=20)
    try:
        read_summary(run_id, store)
        exists = True
    except RunNotFoundError:
        exists = False
    with tools_for_run(run_id, store, mcp=config) as tools:
        if exists:
            result = resume_agent(run_id, client=client, store=store, tools=tools.registry, in_doubt=in_doubt)  # type: ignore[arg-type]
        else:
            result = run_agent(TASK, run_id=run_id, client=client, model="claude-test-1", tools=tools.registry,
                               store=store, workspace=workspace)  # fmt: skip
    print(json.dumps({"pid": os.getpid(), "status": result.status, "live": result.live_steps, "replayed": result.replayed_steps}))


if __name__ == "__main__":
    main(sys.argv[1:])
