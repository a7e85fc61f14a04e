"""``run_command``: run ``bash -c`` so that its whole process tree ends when the call does.

The command runs under a small supervisor process (``_supervisor.py``, standard library
Python, started by path with ``-I -S`` so it never imports this package) that owns the
command's whole process tree:

    this process ──control pipe──▶ supervisor ──fork──▶ bash -c COMMAND (own process group)
         ▲                             │                       └─ children, grandchildren...
         └────── output pipe ──────────┼──────────────────────────┘ (stdout+stderr, interleaved)

The supervisor kills every process below it when the timeout passes, when bash exits
(background processes never outlive their command), and when this process dies: the
control pipe's only writer is this process, so its death, even by SIGKILL, is an EOF the
supervisor sees at once. Invariant: when ``run_command`` returns or its caller dies, no
process of the command is left to finish an effect that the log will never record. The
output is redacted as it streams and capped to its head and tail (``Capture``).
``run_command`` is not a security sandbox: bash can reach anything the user can;
confinement of commands is the approval rule's job.
"""

from __future__ import annotations

import codecs
import json
import os
import select
import shutil
import subprocess
import sys
import time
from collections import deque
from dataclasses import dataclass

from ...errors import ToolError
from ..run.stopping import StopSignal
from ..secrets.redaction import Redactor

__all__ = ["MAX_COMMAND_BYTES", "Capture", "CommandResult", "run_command"]

MAX_COMMAND_BYTES = 100_000  # Linux refuses a single argument over 128 KiB
# Run by path, not with -m: -m would import nb_durable (and its package __init__) first.
_SUPERVISOR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_supervisor.py")


@dataclass(frozen=True)
class CommandResult:
    """What a command did: its output (redacted, capped), how it ended, and how long it took."""

    output: str
    exit_status: int | None  # None when it was stopped; negative: killed by that signal
    timed_out: bool = False
    cancelled: bool = False  # stopped from outside (a signal to the supervisor) before it ended
    omitted: int = 0  # characters of output left out by the cap
    leftovers: int = 0  # processes still running when bash exited, stopped then
    seconds: float = 0.0


class Capture:
    """Keeps the head and the tail of a redacted stream of bytes within ``limit`` characters."""

    def __init__(self, limit: int, redactor: Redactor) -> None:
        self.head_limit = limit // 2
        self.tail_limit = limit - self.head_limit
        self.head: list[str] = []
        self.head_size = 0
        self.tail: deque[str] = deque()
        self.tail_size = 0
        self.total = 0
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._stream = redactor.stream()

    def feed(self, data: bytes, final: bool = False) -> None:
        """Take the next bytes (``final``: the last, flushing what redaction held back)."""
        text = self._stream.feed(self._decoder.decode(data, final))
        if final:
            text += self._stream.flush()
        if not text:
            return
        self.total += len(text)
        if self.head_size < self.head_limit:
            room = self.head_limit - self.head_size
            self.head.append(text[:room])
            self.head_size += len(self.head[-1])
            text = text[room:]
        if text:
            self.tail.append(text)
            self.tail_size += len(text)
            while self.tail_size - len(self.tail[0]) >= self.tail_limit:
                self.tail_size -= len(self.tail.popleft())

    def result(self) -> tuple[str, int]:
        """The kept text, with a note where the middle was cut, and how many characters were cut."""
        tail = "".join(self.tail)
        if len(tail) > self.tail_limit:
            tail = tail[-self.tail_limit :]
        omitted = self.total - self.head_size - len(tail)
        head = "".join(self.head)
        if omitted:
            return f"{head}\n[... {omitted} characters of output omitted ...]\n{tail}", omitted
        return head + tail, 0


def run_command(
    command: str,
    *,
    cwd: str | os.PathLike[str],
    env: dict[str, str] | None = None,
    timeout: float,
    output_limit: int,
    redactor: Redactor | None = None,
    stop: StopSignal | None = None,
) -> CommandResult:
    """Run ``bash -c command`` in ``cwd``; its whole process tree ends by the time this returns.

    stdout and stderr are interleaved as they come; the output is redacted, then capped at
    ``output_limit`` characters (head and tail kept). If this process dies meanwhile, the
    supervisor kills the command's tree. KeyboardInterrupt stops the command, then propagates;
    so does ``stop`` (a run stopped from another thread), checked every tenth of a second.
    """
    if len(command.encode("utf-8", "surrogatepass")) > MAX_COMMAND_BYTES:
        raise ToolError(
            f"the command is {len(command)} characters; the limit is {MAX_COMMAND_BYTES} bytes: "
            "write a script with write_file and run it"
        )
    if "\0" in command:
        raise ToolError("the command contains a NUL character, which bash cannot receive")
    python = sys.executable or shutil.which("python3") or "python3"
    capture = Capture(output_limit, redactor or Redactor())
    started = time.monotonic()
    ctrl_r, ctrl_w = os.pipe()
    out_r, out_w = os.pipe()
    try:
        proc = subprocess.Popen(
            [python, "-I", "-S", _SUPERVISOR, repr(float(timeout)), str(out_w), str(os.getpid()), command],
            stdin=ctrl_r,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=(out_w,),
            cwd=cwd,
            env=env,
        )
    except BaseException:
        for fd in (ctrl_w, out_r):
            os.close(fd)
        raise
    finally:
        os.close(ctrl_r)
        os.close(out_w)
    try:
        # The supervisor enforces the timeout; this deadline only guards against it hanging.
        deadline = started + timeout + 10
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ToolError(f"the command supervisor did not stop the command within {timeout + 10:.0f}s; it was killed")
            if stop is not None:
                stop.check()
                remaining = min(remaining, 0.1)
            if select.select([out_r], [], [], remaining)[0]:
                data = os.read(out_r, 65536)
                if not data:
                    break
                capture.feed(data)
        capture.feed(b"", final=True)
        report_text, errors = proc.communicate(timeout=10)
    finally:
        # Closing the control pipe tells a still-running supervisor to kill the command now.
        os.close(ctrl_w)
        os.close(out_r)
        if proc.poll() is None:
            try:
                proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        # Left open when the command was stopped (a Ctrl-C, a run stopped) before communicate():
        # two descriptors a call, for as long as a kernel lives.
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
    try:
        report = json.loads(report_text.decode().strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise ToolError(
            f"the command supervisor failed (exit status {proc.returncode}): {errors.decode(errors='replace')[-2000:]}"
        ) from None
    output, omitted = capture.result()
    return CommandResult(
        output=output,
        exit_status=report.get("exit"),
        timed_out=bool(report.get("timed_out")),
        cancelled=bool(report.get("cancelled")),
        omitted=omitted,
        leftovers=int(report.get("leftovers") or 0),
        seconds=time.monotonic() - started,
    )
