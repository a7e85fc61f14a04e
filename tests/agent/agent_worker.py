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

A fork server: ``python tests/agent/agent_worker.py --zygote`` imports everything once
(``anthropic`` alone takes 2-3 s here), prints ``{"ready": true}``, then reads JSON commands on stdin:
``{"cmd": "start", "args": [...], "env": {...}, "out": PATH}`` forks a child that runs one
session with that environment (stdout and stderr to PATH) and answers ``{"pid": N}``;
``{"cmd": "wait", "pid": N, "timeout": S}`` reaps it and answers ``{"status": CODE}``
(negative: killed by that signal; null: still running). Each child is a real, separate
process that imported nothing of the run and shares no state with the test: SIGKILL ends it
as it ends a kernel, and only its log and files remain. Children stay zombies until waited,
so a test can SIGKILL a pid without the risk that it names another process. ``Zygote``
starts a fork server and speaks this protocol for a test.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
import time
import traceback
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


def session(store: str, workspace: str, ledger: str, run_id: str, in_doubt: str = "skip") -> AgentResult:
    """One session of the run: start it, or resume it from its log."""
    registry = registry_for(Path(ledger))
    try:
        read_run(run_id, store)
    except RunNotFoundError:
        return run_agent(
            TASK,
            run_id=run_id,
            client=AnthropicModel(timeout=30),
            model=MODEL,
            tools=registry,
            store=store,
            workspace=workspace,
            max_turns=12,
            max_tokens=512,
            retry=RetryPolicy(max_attempts=3, base_delay=0.05, jitter=0.0),
        )
    return resume_agent(run_id, tools=registry, store=store, in_doubt=in_doubt)  # type: ignore[arg-type]


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


# --- the fork server ------------------------------------------------------------------------


def _answer(data: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(data) + "\n")
    sys.stdout.flush()


def _child(command: dict[str, Any]) -> None:
    """In the forked child: redirect output, take the environment, run a session, exit."""
    code = 1
    try:
        out = os.open(command["out"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.close(out)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)  # the zygote's command pipe is not the child's to read
        os.close(devnull)
        os.environ.update(command.get("env") or {})
        code = main(command["args"])
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _wait(pid: int, timeout: float) -> int | None:
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.005)


def zygote() -> int:
    """Serve start/wait commands on stdin until EOF (see the module docstring)."""
    import anthropic  # noqa: F401  (the point: import once, before any fork)
    import httpx2  # noqa: F401

    if threading.active_count() != 1:
        raise RuntimeError("the fork server must have no threads when it forks")
    _answer({"ready": True})
    children: set[int] = set()
    for line in sys.stdin:
        command = json.loads(line)
        if command["cmd"] == "start":
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                _child(command)
            children.add(pid)
            _answer({"pid": pid})
        elif command["cmd"] == "wait":
            status = _wait(int(command["pid"]), float(command.get("timeout", 30)))
            if status is not None:
                children.discard(int(command["pid"]))
            _answer({"status": status})
        else:
            _answer({"error": f"unknown command {command['cmd']!r}"})
    for pid in children:  # the test went away: leave nothing running
        try:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        except OSError:
            pass
    return 0


class Zygote:
    """A fork server in a child process (started with ``env``), and its client: start, wait, reap."""

    def __init__(self, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--zygote"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self._ask(None) == {"ready": True}

    def _ask(self, command: dict[str, Any] | None) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        if command is not None:
            self.proc.stdin.write(json.dumps(command) + "\n")
            self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the fork server died (exit status {self.proc.wait()})")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def start(self, args: list[str], env: dict[str, str], out: Path) -> int:
        """Fork a session with ``args`` and extra ``env``, its output to ``out``; its pid."""
        return int(self._ask({"cmd": "start", "args": args, "env": env, "out": str(out)})["pid"])

    def wait(self, pid: int, timeout: float) -> int | None:
        """Reap ``pid`` within ``timeout`` seconds: its exit status, or None if it still runs."""
        status = self._ask({"cmd": "wait", "pid": pid, "timeout": timeout})["status"]
        return None if status is None else int(status)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


if __name__ == "__main__":
    if sys.argv[1:] == ["--zygote"]:
        sys.exit(zygote())
    sys.exit(main(sys.argv[1:]))
