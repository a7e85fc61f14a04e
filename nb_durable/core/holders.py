"""Who holds a run's lease and what it waits on: the holder's description (pid, host, since,
what program it is, and what it asks a person), and the words for it.

A process says what it is with ``name_this_process`` (the command line names its command);
one that says nothing is a Jupyter kernel while it runs one, else just a process. The advice
to a refused writer follows the program: a kernel, a terminal command and a worker are each
stopped their own way.

A run waits for a person (an approval of a tool call, a decision on a step in doubt) while its
writer holds the lease, so waiting is a state of the writer, not a fact of the log: the writer
marks its lease with an ``Asking`` as it asks and clears the mark when the answer comes
(``StoreWriter.mark_asking``; each store keeps the mark where it keeps the lease's holder, under
the key ``asking``). A reader in any process then reports ``waiting``, not ``running``, for that
run (``core.runs``). The mark lives and dies with the lease: a holder that dies, even by SIGKILL,
takes it along, and the next writer's lease starts without one, so a stale "waiting" cannot
outlive its asker. Replay and the log are untouched: nothing about waiting is ever recorded.

A writer that waits on no person but on a job outside it that can take hours (a Message Batch
it polls) marks its lease the same way with an ``Awaiting``, under the same key with a kind no
``asking_of`` takes, this nb_durable's or an older one's: every reader says ``running`` still
(``waiting`` is for a person), and a listing says beside it what the run waits on.
"""

from __future__ import annotations

import contextlib
import functools
import os
import socket
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

__all__ = [
    "ASKING",
    "KERNEL",
    "WORKER",
    "Asking",
    "AskingKind",
    "Awaiting",
    "asking_of",
    "awaiting_of",
    "describe_holder",
    "holder_is_alive",
    "lives_here",
    "locked_message",
    "name_this_process",
    "on_this_host",
    "stop_advice",
    "this_holder",
]


@functools.lru_cache(maxsize=1)
def _host() -> str:
    return socket.gethostname()


KERNEL = "Jupyter kernel"
WORKER = "nb-durable worker"
_named: list[str] = []  # what an entry point said this process is (``name_this_process``)


@contextlib.contextmanager
def name_this_process(program: str) -> Iterator[None]:
    """Say, while the block runs, what this process is (``nb-durable resume``, ``nb-durable
    worker``), so a second writer of its runs is told how to stop it."""
    _named.append(program)
    try:
        yield
    finally:
        _named.pop()


def _program() -> str:
    if _named:
        return _named[-1]
    # A kernel may write runs through the Python API without the extension: ask whether this
    # process runs one (a script driving kernels through nbclient imports ipykernel too).
    app = getattr(sys.modules.get("ipykernel.kernelapp"), "IPKernelApp", None)
    return KERNEL if app is not None and app.initialized() else ""


def this_holder() -> dict[str, Any]:
    """The description this process leaves in the leases it takes."""
    holder: dict[str, Any] = {"pid": os.getpid(), "host": _host(), "since": round(time.time(), 3)}
    if program := _program():
        holder["program"] = program
    return holder


def describe_holder(holder: dict[str, Any] | None) -> str:
    """A holder as words: 'pid 4242 on host nb1 since 12:04:05'."""
    if not holder:
        return "another process"
    since = holder.get("since")
    when = (
        f" since {datetime.fromtimestamp(since).strftime('%Y-%m-%d %H:%M:%S')}"
        if isinstance(since, (int, float))
        else ""
    )
    mine = " (this process)" if holder.get("pid") == os.getpid() and holder.get("host") == _host() else ""
    return f"pid {holder.get('pid')} on host {holder.get('host')}{when}{mine}"


def holder_is_alive(holder: dict[str, Any] | None) -> bool:
    """Whether a recorded holder may still run (for stores whose lock outlives its process
    briefly, as a database session does); a holder on another host is assumed to."""
    if not holder:
        return False
    if not on_this_host(holder):
        return True
    return _lives(holder.get("pid"))


def lives_here(holder: Mapping[str, Any] | None) -> bool:
    """Whether ``holder`` is a live process of this host other than this one."""
    if holder is None or not on_this_host(holder) or holder.get("pid") == os.getpid():
        return False
    return _lives(holder.get("pid"))


def on_this_host(holder: Mapping[str, Any] | None) -> bool:
    """Whether ``holder`` names this host."""
    return holder is not None and holder.get("host") == _host()


def _lives(pid: Any) -> bool:
    """Whether process ``pid`` of this host lives: a zombie (killed, not yet waited for by its
    parent) has ended, though signalling it still succeeds."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError):  # no /proc (macOS): signalling is all there is
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rpartition(b") ")[2][:1] != b"Z"
    return True


def stop_advice(run_id: str, holder: dict[str, Any] | None) -> str:
    """How to stop the writer ``holder`` names, by what program it is (a lease taken by an older
    nb_durable, or by a store that records no program, names none)."""
    holder = holder or {}
    program = str(holder.get("program", ""))
    kill = f"kill {holder.get('pid')}" + ("" if holder.get("host") == _host() else f" on host {holder.get('host')}")
    if program == KERNEL:
        return f"stop it in that kernel (interrupt its cell, %agent_stop {run_id} for a background run, or restart the kernel)"
    if program == WORKER:
        return f"stop that worker ({kill}: SIGTERM records the run interrupted, for a worker to continue)"
    if program.startswith("nb-durable "):
        return f"stop that {program} (Ctrl-C in its terminal, or {kill})"
    return "stop that process"


def locked_message(run_id: str, holder: dict[str, Any] | None) -> str:
    return (
        f"run {run_id!r} is being written by {describe_holder(holder)}. Only one process may "
        f"write a run at a time: wait for it to finish, {stop_advice(run_id, holder)}, or read the run "
        f"without writing it with read_run({run_id!r})."
    )

AskingKind = Literal["approval", "in_doubt"]
"""approval: may a tool call run? in_doubt: what to do with a step whose outcome is unknown."""

ASKING = "asking"
"""The key of a lease holder's description (pid, host, since) that carries its ``Asking``."""


@dataclass(frozen=True, slots=True)
class Asking:
    """What a writer asks a person: the step, the kind of question, the tool, since when."""

    step_id: str
    kind: AskingKind
    tool: str = ""
    since: float = 0.0

    @classmethod
    def now(cls, step_id: str, kind: AskingKind, tool: str = "") -> Asking:
        """The question asked from now on."""
        return cls(step_id, kind, tool, round(time.time(), 3))

    def to_json(self) -> dict[str, Any]:
        """The mark as the lease keeps it."""
        return {"step": self.step_id, "kind": self.kind, "tool": self.tool, "since": self.since}

    def __str__(self) -> str:
        tool = f" ({self.tool})" if self.tool else ""
        if self.kind == "approval":
            return f"approval of step {self.step_id}{tool}"
        return f"a decision on step {self.step_id}{tool}, in doubt"

    def in_words(self) -> str:
        """'waiting since 12:04:05 for approval of step approval:1:0:t1 (run_bash)'."""
        when = datetime.fromtimestamp(self.since).strftime("%H:%M:%S") if self.since else ""
        return f"waiting{f' since {when}' if when else ''} for {self}"


def asking_of(holder: Mapping[str, Any] | None) -> Asking | None:
    """The question a lease's holder is waiting on, if it marked one (anything malformed is none)."""
    mark = (holder or {}).get(ASKING)
    if not isinstance(mark, Mapping):
        return None
    step, kind, tool, since = mark.get("step"), mark.get("kind"), mark.get("tool", ""), mark.get("since", 0.0)
    if not isinstance(step, str) or kind not in ("approval", "in_doubt"):
        return None
    return Asking(
        step, kind, tool if isinstance(tool, str) else "", float(since) if isinstance(since, (int, float)) else 0.0
    )


_AWAITING = "awaiting"
"""The kind of a lease's mark that is an ``Awaiting``: none ``asking_of`` takes."""


@dataclass(frozen=True, slots=True)
class Awaiting:
    """What a writer waits on that is no person: a job outside it (``what``, a Message Batch by
    its id), polled by the step ``step_id`` since ``since``."""

    step_id: str
    what: str
    since: float = 0.0

    @classmethod
    def now(cls, step_id: str, what: str) -> Awaiting:
        """The wait from now on."""
        return cls(step_id, what, round(time.time(), 3))

    def to_json(self) -> dict[str, Any]:
        """The mark as the lease keeps it (under ``ASKING``, with a kind of its own)."""
        return {"step": self.step_id, "kind": _AWAITING, "what": self.what, "since": self.since}

    def in_words(self) -> str:
        """'in Message Batch msgbatch_01 since 12:04:05': said beside the status ``running``."""
        when = datetime.fromtimestamp(self.since).strftime("%H:%M:%S") if self.since else ""
        return f"in {self.what}{f' since {when}' if when else ''}"


def awaiting_of(holder: Mapping[str, Any] | None) -> Awaiting | None:
    """The outside job a lease's holder waits on, if it marked one (anything malformed is none)."""
    mark = (holder or {}).get(ASKING)
    if not isinstance(mark, Mapping) or mark.get("kind") != _AWAITING:
        return None
    step, what, since = mark.get("step"), mark.get("what"), mark.get("since", 0.0)
    if not isinstance(step, str) or not isinstance(what, str) or not what:
        return None
    return Awaiting(step, what, float(since) if isinstance(since, (int, float)) else 0.0)
