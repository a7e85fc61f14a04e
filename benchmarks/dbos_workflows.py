"""DBOS's side of ``bench_worker.py``: workflows shaped like the bench's runs, in DBOS's own venv.

Run by ``dbos_recovery.py`` with the Python of a venv that has ``dbos`` (never nb_durable's:
DBOS is no dependency of the package), so it imports only DBOS and the standard library.

    python dbos_workflows.py crash   DB_URL API_URL REQUEST N WORKSPACE
    python dbos_workflows.py recover DB_URL API_URL REQUEST EXECUTOR WORKSPACE

A workflow is the bench's agent run as DBOS would write it: ``TURNS`` model steps, each a real
HTTP request to the bench's loopback Messages API (the same server, the same latency), each
but the last followed by a tool step listing the workspace. A request carries what the bench's
runs send: the conversation so far (the task, each reply, each listing as its tool result) and
what the file REQUEST holds (model, system prompt, tool schemas, thinking, streamed), so that
the loopback API, which shares the machine's cores, does the same work for both sides. The
streamed reply is read whole with the standard library and its events folded into the message
(no SDK, no typed events: in DBOS's favour, as the bare steps are). ``crash`` (executor ``crashed``)
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

TURNS = 10  # as bench_worker.TURNS
CRASH_TURN = 1  # its model call is a run's third step, where CrashAt(3) stops bench_worker's runs
WORKER_CONCURRENCY = 2
QUEUE = "bench"
POLL = 0.05  # seconds between the queue's looks for work (DBOS's default is 1 s: this favours it)


def message_of(body: bytes) -> dict[str, Any]:
    """The message a streamed reply's server-sent events build: text, tool input, stop, usage."""
    message: dict[str, Any] = {}
    inputs: dict[int, str] = {}
    for block in body.replace(b"\r\n", b"\n").split(b"\n\n"):
        data = b"\n".join(line[5:].lstrip() for line in block.split(b"\n") if line.startswith(b"data:"))
        if not data:
            continue
        event = json.loads(data)
        kind = event["type"]
        if kind == "message_start":
            message = event["message"]
        elif kind == "content_block_start":
            message["content"].append(event["content_block"])
        elif kind == "content_block_delta":
            delta, index = event["delta"], event["index"]
            if delta["type"] == "text_delta":
                message["content"][index]["text"] += delta["text"]
            elif delta["type"] == "input_json_delta":
                inputs[index] = inputs.get(index, "") + delta["partial_json"]
        elif kind == "content_block_stop" and inputs.get(event["index"]):
            message["content"][event["index"]]["input"] = json.loads(inputs.pop(event["index"]))
        elif kind == "message_delta":
            message["stop_reason"] = event["delta"].get("stop_reason")
            message["usage"]["output_tokens"] = event["usage"]["output_tokens"]
    return message


def ask(api_url: str, fixed: dict[str, Any], messages: list[dict[str, Any]]) -> dict[str, Any]:
    """A model step's work, DBOS's recording aside: POST the request, read the streamed reply
    whole, fold its events (``bench_model_call.py`` times this as the bare call)."""
    request = urllib.request.Request(
        f"{api_url}/v1/messages",
        data=json.dumps({**fixed, "messages": messages}).encode(),
        headers={"content-type": "application/json", "x-api-key": "sk-bench", "anthropic-version": "2023-06-01"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return message_of(response.read())


def main(argv: list[str]) -> int:
    # Imported here, so that ``bench_model_call.py`` can time ``ask`` without DBOS installed.
    from dbos import DBOS, DBOSConfig

    mode, db_url, api_url, request_file, arg, workspace = argv
    with open(request_file) as f:
        fixed = json.load(f)
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
    def model(messages: list[dict[str, Any]], turn: int) -> dict[str, Any]:
        if crash and turn == CRASH_TURN:
            time.sleep(3600)  # inside the step: SIGKILLed here, nothing recorded
        return ask(api_url, fixed, messages)

    @DBOS.step()
    def list_dir() -> list[str]:
        return sorted(os.listdir(workspace))

    @DBOS.workflow()
    def agent(task: str) -> str:
        messages: list[dict[str, Any]] = [{"role": "user", "content": task}]
        for turn in range(TURNS):
            answer = model(messages, turn)
            if turn + 1 < TURNS:
                listing = "\n".join(list_dir())
                calls = [b for b in answer["content"] if b["type"] == "tool_use"]
                messages.append({"role": "assistant", "content": answer["content"]})
                messages.append(
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": c["id"], "content": listing} for c in calls]}
                )
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
