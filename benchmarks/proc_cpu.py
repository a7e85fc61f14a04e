"""CPU time of processes, from Linux's /proc: user and system seconds, by pid or by server.

What the worker benchmarks compare beside throughput: on a machine whose cores are all busy,
runs per second is CPU a run, so each side's CPU is read from every process it used.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from pathlib import Path

__all__ = ["cpu_of", "server_cpu"]


def _fields(pid: int | str) -> list[str] | None:
    """A process's /proc stat fields after its name (which may hold spaces or ")"), or None once it has gone."""
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/stat").read_text().rpartition(") ")[2].split()
    return None


def _seconds(fields: list[str], first: int) -> float:
    """Fields ``first`` and ``first + 1`` (user and system clock ticks) in seconds."""
    return (int(fields[first]) + int(fields[first + 1])) / os.sysconf("SC_CLK_TCK")


def _stat(pid: int | str) -> tuple[int, float] | None:
    """A process's parent pid and CPU seconds."""
    fields = _fields(pid)
    return None if fields is None else (int(fields[1]), _seconds(fields, 11))


def server_cpu(data: Path) -> float:
    """The CPU time of the PostgreSQL server whose data folder is ``data``: its postmaster, the
    live processes it started (backends, checkpointer, WAL writer) and those that have ended.
    By the server, not by the name ``postgres``: another cluster on the machine (a test
    suite's) must not count."""
    postmaster = int((data / "postmaster.pid").read_text().split()[0])
    found = ((int(pid), _stat(pid)) for pid in filter(str.isdigit, os.listdir("/proc")))
    live = sum(stat[1] for pid, stat in found if stat is not None and postmaster in (pid, stat[0]))
    return live + _reaped(postmaster)


def _reaped(pid: int) -> float:
    """The CPU seconds of a process's children that have ended and been waited for: a session
    closed during a measurement (a worker's spare, once it is idle) counts what it spent."""
    fields = _fields(pid)
    return 0.0 if fields is None else _seconds(fields, 13)


def cpu_of(pids: Iterable[int]) -> float:
    """The CPU time of these processes (those that have ended count nothing)."""
    return sum(stat[1] for stat in map(_stat, pids) if stat is not None)
