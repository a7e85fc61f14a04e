"""What routing around the cause saves: a fallback model in a 529 storm, compaction of a full context.

Both through the real ``anthropic`` SDK against the loopback Messages API, every figure from
this run of the script:

* **A 529 storm.** The run's model answers every request with HTTP 529 (``overloaded_error``)
  for ``STORM`` seconds. With ``fallback_models`` the step moves to the fallback after three
  529s and the run completes there; without, it waits the storm out with the default backoff
  (1 s, doubling, capped at 60 s; more attempts than the default six, so it outlasts the
  storm). Time to completion of a three-turn run, each way.
* **A 40-turn run whose conversation outgrows the window** (the fake's ``context_window``: a
  prompt over it is a 400 "prompt is too long", as on the API; each turn reads a part of ~600
  tokens). With compaction (the default) it completes in one session, its ``compact:N`` steps
  summarising all but the last two exchanges. Without (``compaction="off"``) it stops
  ``context_full``, and a person continues it by hand: a new run whose task says which parts
  are read, until the parts are all read. Tokens, dollars (the price table's, for the usage
  the server reported) and how many times a person had to step in.

    python benchmarks/bench_healing.py
"""

from __future__ import annotations

import contextlib
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nb_durable.agent.models.anthropic import AnthropicModel
from nb_durable.agent.models.retry import RetryPolicy
from nb_durable.agent.money.cost import Usage
from nb_durable.agent.money.prices import price_for
from nb_durable.agent.run.compaction import SUMMARY_SYSTEM
from nb_durable.agent.run.loop import run_agent
from nb_durable.errors import TransientModelError
from tests.fakes import Error, FunctionScenario, MessagesAPIServer, OverloadStorm, reply, tool_use
from tests.fakes.messages_api.records import RecordedRequest

MODEL = "claude-sonnet-5-5"
FALLBACK = "claude-haiku-5-5"
STORM = 12.0
PARTS = 40
WINDOW = 12_000


def paid(server: MessagesAPIServer) -> tuple[int, float]:
    """Tokens (all kinds) and dollars of every message request, from the usage the server reported."""
    tokens, dollars = 0, 0.0
    for record in server.requests:
        if record.endpoint != "messages" or not record.usage:
            continue
        usage = Usage.parse(record.usage)
        tokens += usage.input_tokens + usage.output_tokens + usage.cache_read_input_tokens + usage.cache_creation_input_tokens
        dollars += price_for(str(record.body.get("model"))).dollars(usage)
    return tokens, dollars


def storm(root: Path, with_fallback: bool) -> dict[str, Any]:
    work = root / ("fallback" if with_fallback else "waited")
    work.mkdir(parents=True)
    (work / "notes.txt").write_text("buy milk\n")
    turns = [
        reply(tool_use("read_file", {"path": "notes.txt"}, id="toolu_1")),
        reply(tool_use("list_dir", {}, id="toolu_2")),
        reply("The notes say: buy milk."),
    ]
    started = time.monotonic()
    scenario = OverloadStorm(turns, [MODEL], lasts=lambda r: time.monotonic() - started < STORM)
    with MessagesAPIServer(scenario) as server:
        result = run_agent(
            "Read the notes.",
            run_id="storm",
            client=AnthropicModel(api_key="bench", base_url=server.url, timeout=30),
            model=MODEL,
            store=str(work / "runs"),
            workspace=work,
            retry=RetryPolicy(max_attempts=12),
            fallback_models=(FALLBACK,) if with_fallback else (),
            cache_ttl="off",
            thinking="off",
        )
        took = time.monotonic() - started
        asked = [str(r.body["model"]) for r in server.requests if r.endpoint == "messages"]
    return {"status": result.status, "seconds": round(took, 2), "requests": len(asked), "overloaded": scenario.overloaded,
            "answered_by": sorted(set(asked[-1:]))}  # fmt: skip


def reader(request: RecordedRequest) -> Any:
    """Read part 0, 1, ... (the last tool result, or the task, says where it got), then say done."""
    body = request.body
    if body.get("system") == SUMMARY_SYSTEM:
        return reply("Summary: the agent reads the report's parts in order; the last part read is in the tail.")
    last = str(body["messages"][0]["content"])
    for message in body["messages"]:
        for block in message["content"] if isinstance(message["content"], list) else []:
            if block.get("type") == "tool_result":
                last = str(block.get("content"))
    done = [i for i in range(PARTS) if f"PART {i} " in last or f"parts 0-{i} are read" in last]
    following = done[-1] + 1 if done else 0
    if following == PARTS:
        return reply("Done: all forty parts read.")
    return reply(tool_use("read_file", {"path": f"part{following}.txt"}, id=f"toolu_{following}"))


def long_run(root: Path, compaction: bool) -> dict[str, Any]:
    work = root / ("compacted" if compaction else "by-hand")
    work.mkdir(parents=True)
    for i in range(PARTS):
        (work / f"part{i}.txt").write_text(f"PART {i} " + "figures, findings and notes of the quarter. " * 55)
    task = "Read the report's forty parts, part0.txt to part39.txt, in order."
    sessions, statuses = 0, []
    with MessagesAPIServer(FunctionScenario(reader), context_window=WINDOW) as server:
        while True:
            sessions += 1
            result = run_agent(
                task,
                run_id=f"long-{sessions}",
                client=AnthropicModel(api_key="bench", base_url=server.url, timeout=30),
                model=MODEL,
                store=str(work / "runs"),
                workspace=work,
                max_turns=PARTS + 10,
                compaction="auto" if compaction else "off",
                cache_ttl="off",
                thinking="off",
            )
            statuses.append(result.status)
            if result.status != "context_full":
                break
            # By hand: a person reads how far it got and starts a new run that says so.
            reads = [int(r.body["messages"][-1]["content"][0]["content"].split()[1]) for r in server.requests
                     if r.endpoint == "messages" and r.outcome == "reply" and isinstance(r.body["messages"][-1]["content"], list)
                     and r.body["messages"][-1]["content"][0].get("type") == "tool_result"]  # fmt: skip
            task = f"Read the report's forty parts in order; parts 0-{max(reads)} are read, go on from there."
        tokens, dollars = paid(server)
        compactions = sum(1 for r in server.requests if r.endpoint == "messages" and r.body.get("system") == SUMMARY_SYSTEM)
    return {"status": statuses[-1], "sessions": sessions, "people_stepping_in": sessions - 1, "compactions": compactions,
            "tokens": tokens, "dollars": round(dollars, 4)}  # fmt: skip


def warm_up() -> None:
    """Import what the SDK imports on its first answer and its first error, outside the timings."""
    with MessagesAPIServer([[Error(529), reply("warm")]]) as server:
        model = AnthropicModel(api_key="bench", base_url=server.url, timeout=30)
        for _ in range(2):
            with contextlib.suppress(TransientModelError):
                model.create({"model": MODEL, "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]})


def main() -> None:
    warm_up()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        fallback, waited = storm(root, True), storm(root, False)
        compacted, by_hand = long_run(root, True), long_run(root, False)
    print(json.dumps({"storm_with_fallback": fallback, "storm_waited_out": waited,
                      "compaction": compacted, "context_full_continued_by_hand": by_hand}, indent=1))  # fmt: skip
    print(
        f"\n{STORM:.0f} s 529 storm: completed in {fallback['seconds']:.2f} s with a fallback vs {waited['seconds']:.2f} s "
        f"waiting it out ({waited['seconds'] / fallback['seconds']:.1f}x faster)"
    )
    print(
        f"{PARTS}-turn run over a {WINDOW:,}-token window: compaction {compacted['tokens']:,} tokens "
        f"(${compacted['dollars']:.4f}, {compacted['compactions']} compactions, one session) vs stopped at "
        f"context_full and continued by hand {by_hand['tokens']:,} tokens (${by_hand['dollars']:.4f}, "
        f"{by_hand['people_stepping_in']} times a person stepped in): {compacted['tokens'] / by_hand['tokens']:.2f}x "
        f"the tokens, {compacted['dollars'] / by_hand['dollars']:.2f}x the dollars"
    )


if __name__ == "__main__":
    main()
