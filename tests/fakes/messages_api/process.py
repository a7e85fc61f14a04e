"""The fake in a child process, for tests that kill or outlive the process under test.

``python -m tests.fakes.messages_api --port P --scenario FILE.json --log FILE.jsonl`` serves
a JSON :class:`~tests.fakes.messages_api.scenario.ScriptedScenario` and appends every record
to the log; :class:`MessagesAPIProcess` starts it and reads that log, so its
:meth:`~MessagesAPIProcess.turn_stats` are the numbers an in-process server would give.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from tests.fakes.messages_api.records import (
    RecordedRequest,
    TurnStats,
    UsageTotals,
    read_request_log,
    turn_stats,
    usage_totals,
)
from tests.fakes.messages_api.scenario import ScriptedScenario

REPO = Path(__file__).resolve().parents[3]


class MessagesAPIProcess:
    """The fake in a child process (``python -m tests.fakes.messages_api``); reads its request log."""

    def __init__(
        self,
        scenario: ScriptedScenario,
        directory: str | Path,
        *,
        port: int = 0,
        api_key: str | None = None,
        startup_timeout: float = 15.0,
        answering_model: str | None = None,
        min_cacheable_tokens: int = 0,
        default_thinking: str = "disabled",
        refuse_sampling: tuple[str, ...] = (),
        context_window: int | None = None,
    ) -> None:
        """Start the child; the keywords are :class:`MessagesAPIServer`'s, as command-line flags."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.scenario_path = scenario.dump(directory / "fake_api_scenario.json")
        self.log_path = directory / "fake_api_requests.jsonl"
        cmd = [sys.executable, "-m", "tests.fakes.messages_api", "--port", str(port)]
        cmd += ["--scenario", str(self.scenario_path), "--log", str(self.log_path)]
        if api_key is not None:
            cmd += ["--api-key", api_key]
        if answering_model is not None:
            cmd += ["--answering-model", answering_model]
        cmd += ["--min-cacheable-tokens", str(min_cacheable_tokens), "--default-thinking", default_thinking]
        for prefix in refuse_sampling:
            cmd += ["--refuse-sampling", prefix]
        if context_window is not None:
            cmd += ["--context-window", str(context_window)]
        env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
        env["PYTHONPATH"] = str(REPO) + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        self.proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, text=True)
        self.url = self._read_url(startup_timeout)

    def _read_url(self, timeout: float) -> str:
        box: list[str] = []
        assert self.proc.stdout is not None
        reader = threading.Thread(target=lambda: box.append(self.proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
        reader.start()
        reader.join(timeout)
        if not box or not box[0].startswith("http://"):
            self.close()
            raise RuntimeError(f"fake Messages API process did not start (exit code {self.proc.poll()}, said {box!r})")
        return box[0].strip()

    @property
    def requests(self) -> list[RecordedRequest]:
        """What the server has received so far (from its log)."""
        return read_request_log(self.log_path)

    def turn_stats(self) -> dict[int, TurnStats]:
        """Per-turn counters from the log."""
        return turn_stats(self.requests)

    def usage_totals(self) -> UsageTotals:
        """The usage reported over every message request so far (from its log)."""
        return usage_totals(self.requests)

    def wait_for(
        self, predicate: Callable[[list[RecordedRequest]], bool], timeout: float = 10.0
    ) -> list[RecordedRequest]:
        """Poll the log until ``predicate(requests)`` holds; TimeoutError if it does not."""
        deadline = time.monotonic() + timeout
        while True:
            records = self.requests
            if predicate(records):
                return records
            if time.monotonic() > deadline:
                raise TimeoutError(f"fake Messages API process: condition not met after {timeout}s; got {records!r}")
            time.sleep(0.02)

    def close(self) -> None:
        """Terminate the process (SIGTERM, then SIGKILL)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def __enter__(self) -> MessagesAPIProcess:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()
