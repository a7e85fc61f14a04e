"""What prompt caching saves an agent run, and what replay saves on top of it.

A 20-turn run with realistic token counts: a ~3,000-token system prompt, the four built-in
tool schemas, and a tool result that grows every turn (each turn reads a file of ~1,500
tokens more than the last). It runs through the real ``anthropic`` SDK against the loopback
Messages API, which accounts the prompt cache the way the API does (the prefix written by
one turn is read back by the next, at a tenth of the input price; writes cost 1.25x for 5
minutes). Every figure below is computed from the usage the server reported and the price
table, in the same run of this script:

* no caching (``cache_ttl="off"``): every turn pays its whole conversation at the input price;
* caching (the default, 5 minutes): each turn pays for what it adds, and reads the rest;
* caching, killed as turn 13 starts and resumed: turns 0-12 come from the log for free, so
  the resumed session pays only for turns 13-19 (and the first of them writes its prefix anew,
  as the API's cache would have expired over a long outage, or not; here it is still warm).

    python benchmarks/bench_cache.py
"""

from __future__ import annotations

import contextlib
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nb_durable.agent import RunHooks
from nb_durable.agent.models.anthropic import AnthropicModel
from nb_durable.agent.money.cost import Usage
from nb_durable.agent.money.prices import price_for
from nb_durable.agent.run.crash import CrashAt
from nb_durable.agent.run.loop import resume_agent, run_agent
from nb_durable.errors import SimulatedCrash
from tests.fakes import MessagesAPIServer, reply, tool_use

TURNS = 20
KILL_AT_TURN = 13
MODEL = "claude-sonnet-5-5"
SYSTEM = "You are a careful software agent. " + " ".join(f"Rule {i}: keep the workspace tidy and explain each change." for i in range(300))


def scenario() -> list[Any]:
    turns: list[Any] = [
        reply(f"Reading part {i}.", tool_use("read_file", {"path": f"part{i}.txt"}, id=f"toolu_{i:02d}"))
        for i in range(TURNS - 1)
    ]
    return [*turns, reply("All parts read; here is the summary.")]


def workspace(root: Path) -> Path:
    work = root / "work"
    work.mkdir(parents=True)
    for i in range(TURNS):
        (work / f"part{i}.txt").write_text(f"line {i} of the report, with figures and notes.\n" * (110 + 10 * i))
    return work


def paid(server: MessagesAPIServer) -> tuple[float, float, int]:
    """Dollars paid, input-side dollars, and requests, from the usage the server reported."""
    price = price_for(MODEL)
    total = inputs = 0.0
    count = 0
    for record in server.requests:
        if record.endpoint != "messages" or not record.usage:
            continue
        usage = Usage.parse(record.usage)
        total += price.dollars(usage)
        inputs += price.dollars(Usage(**{**usage.to_json(), "output_tokens": 0}))
        count += 1
    return total, inputs, count


def session(root: Path, name: str, cache_ttl: Any, *, kill: bool = False) -> dict[str, Any]:
    work = workspace(root / name)
    store = str(root / name / "runs")
    with MessagesAPIServer(scenario()) as server:
        model = AnthropicModel(api_key="bench", base_url=server.url, timeout=30)
        kwargs: dict[str, Any] = dict(
            run_id=name, client=model, model=MODEL, store=store, workspace=work, system=SYSTEM,
            max_turns=TURNS + 1, cache_ttl=cache_ttl, thinking="off",
        )
        if kill:
            # Turn n's model step is step 2n (each turn has one tool call): die as turn 13 starts.
            with contextlib.suppress(SimulatedCrash):
                run_agent("Read every part and summarise.", hooks=RunHooks(before_step=CrashAt(2 * KILL_AT_TURN + 1)), **kwargs)
            before, before_inputs, before_count = paid(server)
            result = resume_agent(name, client=model, store=store)
        else:
            result = run_agent("Read every part and summarise.", **kwargs)
            before = before_inputs = 0.0
            before_count = 0
        total, inputs, count = paid(server)
    return {
        "status": result.status,
        "requests": count,
        "dollars": round(total, 4),
        "input_dollars": round(inputs, 4),
        "resumed_session_dollars": round(total - before, 4),
        "resumed_session_requests": count - before_count,
        "replay_saved_dollars": round(result.cost.saved_dollars, 4),
        "cache_saved_dollars": round(result.cost.cache_saved_dollars, 4),
        "_before_inputs": before_inputs,
    }


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        plain = session(root, "no-cache", "off")
        cached = session(root, "cached", "5m")
        resumed = session(root, "resumed", "5m", kill=True)
    for r in (plain, cached, resumed):
        r.pop("_before_inputs")
    print(json.dumps({"no_caching": plain, "caching": cached, "caching_killed_at_13_resumed": resumed}, indent=1))
    print(
        f"\ninput cost with caching / without: {cached['input_dollars'] / plain['input_dollars']:.2f}x "
        f"(${cached['input_dollars']:.4f} vs ${plain['input_dollars']:.4f}); whole run "
        f"{cached['dollars'] / plain['dollars']:.2f}x (${cached['dollars']:.4f} vs ${plain['dollars']:.4f})"
    )
    print(
        f"killed at turn {KILL_AT_TURN} and resumed: the resumed session paid ${resumed['resumed_session_dollars']:.4f} "
        f"for {resumed['resumed_session_requests']} requests; the whole run ${resumed['dollars']:.4f} "
        f"({resumed['dollars'] / cached['dollars']:.2f}x the uninterrupted cached run); replay saved "
        f"${resumed['replay_saved_dollars']:.4f} in that session"
    )


if __name__ == "__main__":
    main()
