"""Getting back to where a killed agent was: replaying its log against redoing its work.

The reference design's scenario: a 20-turn agent run whose model answers after 0.5 s, killed
when turn 13 starts (the process SIGKILLs itself as the model call of turn 13 begins, so the
point is the same every time). Each turn writes a file and reads one (the real built-in tools).

* durable: a fresh process runs ``resume_agent`` on the run: it replays turns 0-12 from the log
  (no model call, no tool) and then calls the model for turn 13. Measured from the moment the
  process is spawned to that first live model call, in three parts: process start (the
  interpreter and the standard library), imports (nb_durable), and replay (open the log,
  rebuild the conversation, reach turn 13). Measured three times, on copies of the killed
  run; the median is shown. One more restart runs to the end, to show the run completes.
* non-durable: a fresh process runs the same loop with the same model and tools but no log,
  so it must redo turns 0-12 (at 0.5 s each) before it asks the model for turn 13 again.

Both sides are measured in the same run of this script. The printed ratio "replay / redo" is
the time durability needs to get back, against the time the work took; "whole restart" adds
the process start and imports that both sides pay. A run on the real API would also import
``anthropic`` (2-3 s on these machines), on both sides alike.

    python benchmarks/bench_resume.py                 # 20 turns, 0.5 s, killed at 13 (~25 s)
    python benchmarks/bench_resume.py --latency 0.1   # quicker
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

STARTED = time.time()  # the interpreter and the standard library are up; nb_durable is not imported yet

REPO = Path(__file__).resolve().parent.parent
RUN = "bench-resume"
TASK = "Write a note per turn, reading the previous one each time."
RESTARTS = 3


# --- the agent both sides run ----------------------------------------------------------------


class TurnModel:
    """A model that answers by turn (the number of assistant messages), after ``latency`` seconds.

    Turn t writes notes/tNN.md and reads the previous note; the last turn ends the run. The
    first call in this process, and the call for ``stop_turn``, are timed; with ``stop`` the
    process prints its timings and exits at that call.
    """

    name = "bench"

    def __init__(self, turns: int, latency: float, stop_turn: int | None = None, stop_at_first: bool = False) -> None:
        self.turns = turns
        self.latency = latency
        self.stop_turn = stop_turn
        self.stop_at_first = stop_at_first
        self.first: tuple[int, float] | None = None
        self.imported = 0.0

    def create(self, request: Mapping[str, Any], on_text: Any = None) -> dict[str, Any]:
        from nb_durable.agent.models.messages import text_message, tool_use_message

        now = time.time()
        turn = sum(1 for m in request["messages"] if m["role"] == "assistant")
        if self.first is None:
            self.first = (turn, now)
            if self.stop_at_first:
                report(self.imported, now, turn)
        if turn == self.stop_turn:
            report(self.imported, now, turn)
        time.sleep(self.latency)
        if turn == self.turns - 1:
            message = text_message(f"Wrote {self.turns - 1} notes.", input_tokens=800 + 40 * turn, output_tokens=12)
        else:
            calls: list[Any] = [("write_file", {"path": f"notes/t{turn:02d}.md", "content": f"# Note {turn}\n\n" + "words " * 40})]
            if turn:
                calls.append(("read_file", {"path": f"notes/t{turn - 1:02d}.md"}))
            message = tool_use_message(calls, text=f"Turn {turn}: writing a note.", input_tokens=800 + 40 * turn, output_tokens=90)
        return {"message": message, "request_id": f"req_{turn}"}


def report(imported: float, live: float, turn: int) -> None:
    """Print this process's timings as one JSON line and exit."""
    print(json.dumps({"started": STARTED, "imported": imported, "live": live, "turn": turn}), flush=True)
    os._exit(0)


def child(mode: str, folder: Path, turns: int, kill_at: int, latency: float) -> None:
    """The body of one measured process."""
    from nb_durable.agent import Observer, RunHooks, StepView
    from nb_durable.agent.run.loop import resume_agent, run_agent
    from nb_durable.agent.tools import ToolContext, ToolRegistry, builtin_tools

    imported = time.time()
    registry = ToolRegistry(builtin_tools())
    store, workspace = str(folder / "runs"), folder / "work"
    if mode == "first":

        class KillAtTurn(Observer):
            def step_changed(self, step: StepView) -> None:
                if step.step_id == f"model:{kill_at}" and step.state == "in_flight":
                    print(json.dumps({"killed": time.time(), "imported": imported}), flush=True)
                    os.kill(os.getpid(), signal.SIGKILL)

        model = TurnModel(turns, latency)
        run_agent(TASK, run_id=RUN, client=model, model="bench-model", tools=registry, store=store,
                  workspace=workspace, max_turns=turns, hooks=RunHooks(observer=KillAtTurn()))  # fmt: skip
        raise SystemExit("the run was not killed")
    if mode in ("restart", "finish"):
        model = TurnModel(turns, latency, stop_at_first=mode == "restart")
        model.imported = imported
        result = resume_agent(RUN, client=model, tools=registry, store=store)
        assert model.first is not None
        print(json.dumps({"status": result.status, "turns": result.turns, "replayed": result.replayed_steps,
                          "live": result.live_steps, "first_turn": model.first[0]}), flush=True)  # fmt: skip
        return
    if mode == "plain":
        # The same loop without a log: every turn is redone, tools included.
        model = TurnModel(turns, latency, stop_turn=kill_at)
        model.imported = imported
        messages: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
        for turn in range(turns):
            reply = model.create({"model": "bench-model", "max_tokens": 4096, "messages": messages, "tools": registry.schemas()})
            content = reply["message"]["content"]
            messages.append({"role": "assistant", "content": content})
            uses = [b for b in content if b["type"] == "tool_use"]
            if not uses:
                break
            results = []
            for i, block in enumerate(uses):
                context = ToolContext.for_step(workspace, RUN, f"tool:{turn}:{i}:{block['id']}")
                out = registry.run(block["name"], block["input"], context)
                results.append({"type": "tool_result", "tool_use_id": block["id"], "content": out.content, "is_error": out.is_error})
            messages.append({"role": "user", "content": results})
        raise SystemExit("the plain loop never reached the turn it was killed at")
    raise SystemExit(f"unknown mode {mode!r}")


# --- the measurement --------------------------------------------------------------------------


def spawn(mode: str, folder: Path, args: argparse.Namespace) -> tuple[float, subprocess.CompletedProcess[str]]:
    """Run a child process; return when it was spawned, and what it did."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    env["PYTHONPATH"] = str(REPO)
    command = [sys.executable, __file__, "--child", mode, str(folder), "--turns", str(args.turns),
               "--kill-at", str(args.kill_at), "--latency", str(args.latency)]  # fmt: skip
    spawned = time.time()
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, check=False)
    return spawned, done


def timings(spawned: float, done: subprocess.CompletedProcess[str], turn: int) -> dict[str, float]:
    if done.returncode != 0:
        raise SystemExit(f"a measured process failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    t = json.loads(done.stdout.strip().splitlines()[-1])
    if t["turn"] != turn:
        raise SystemExit(f"the first live model call was for turn {t['turn']}, not {turn}")
    return {
        "start": t["started"] - spawned,
        "imports": t["imported"] - t["started"],
        "back": t["live"] - t["imported"],
        "total": t["live"] - spawned,
    }


def fresh(folder: Path) -> Path:
    (folder / "work").mkdir(parents=True)
    return folder


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--kill-at", type=int, default=13)
    parser.add_argument("--latency", type=float, default=0.5)
    parser.add_argument("--child", nargs=2, metavar=("MODE", "FOLDER"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], Path(args.child[1]), args.turns, args.kill_at, args.latency)
        return 0
    if not 0 < args.kill_at < args.turns:
        parser.error("--kill-at must be a turn after the first and before the last")

    root = Path(tempfile.mkdtemp(prefix="bench-resume-"))
    try:
        killed = fresh(root / "killed")
        spawned, first = spawn("first", killed, args)
        if first.returncode != -signal.SIGKILL:
            raise SystemExit(f"the first run was not killed ({first.returncode}):\n{first.stdout}\n{first.stderr}")
        died = json.loads(first.stdout.strip().splitlines()[-1])
        durable_live = died["killed"] - died["imported"]
        log = killed / "runs" / f"{RUN}.jsonl"
        steps = sum(1 for line in log.read_text().splitlines() if '"kind":"step_completed"' in line)
        log_kb = log.stat().st_size / 1000

        durable = []
        for n in range(RESTARTS):
            copy = root / f"restart-{n}"
            shutil.copytree(killed, copy)
            durable.append(timings(*spawn("restart", copy, args), args.kill_at))
        spawned, plain_done = spawn("plain", fresh(root / "plain"), args)
        plain = timings(spawned, plain_done, args.kill_at)
        _, finished = spawn("finish", killed, args)
        if finished.returncode != 0:
            raise SystemExit(f"the resumed run did not finish:\n{finished.stdout}\n{finished.stderr}")
        end = json.loads(finished.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(root, ignore_errors=True)

    middle = sorted(durable, key=lambda t: t["back"])[len(durable) // 2]
    replay = [t["back"] for t in durable]
    ratio = middle["back"] / plain["back"]
    whole = middle["total"] / plain["total"]
    k = args.kill_at
    print(
        f"nb_durable resume: {args.turns} turns, {args.latency:.2f} s model latency, killed when turn {k} starts\n"
        f"{'':32}{'process start':>14}{'imports':>10}{f'back to turn {k}':>17}{'restart -> live call':>22}\n"
        f"{'durable (replay turns 0-' + str(k - 1) + ')':<32}{middle['start']:>12.3f} s{middle['imports']:>8.3f} s"
        f"{middle['back']:>15.3f} s{middle['total']:>20.3f} s\n"
        f"{'non-durable (redo turns 0-' + str(k - 1) + ')':<32}{plain['start']:>12.3f} s{plain['imports']:>8.3f} s"
        f"{plain['back']:>15.3f} s{plain['total']:>20.3f} s\n"
        f"replay / redo: {100 * ratio:.2f} %  (target <= 2 %: {'met' if ratio <= 0.02 else 'NOT met'})\n"
        f"whole restart, durable / non-durable: {100 * whole:.1f} %\n"
        f"durable restarts: {RESTARTS} fresh processes, median shown (replay {min(replay):.3f}-{max(replay):.3f} s); "
        f"the killed run's log: {steps} steps, {log_kb:.1f} kB\n"
        f"first run to turn {k}: {durable_live:.2f} s durable (every step logged and fsynced) vs "
        f"{plain['back']:.2f} s without a log\n"
        f"the resumed run, to the end: {end['status']}, {end['turns']} turns, {end['replayed']} steps replayed, "
        f"{end['live']} live, first live call at turn {end['first_turn']}"
    )
    return 0 if ratio <= 0.02 and end["status"] == "completed" and end["first_turn"] == k else 1


if __name__ == "__main__":
    sys.exit(main())
