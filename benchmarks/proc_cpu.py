"""CPU time of processes, from Linux's /proc: user and system seconds, by name or by pid.

What the worker benchmarks compare beside throughput: on a machine whose cores are all busy,
runs per second is CPU a run, so each side's CPU is read from every process it used.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from pathlib import Path

__all__ = ["POSTGRES", "cpu_of", "cpu_seconds"]

POSTGRES = frozenset({"postgres", "postmaster"})


def _stat(pid: int | str) -> tuple[str, float] | None:
    with contextlib.suppress(OSError):
        name, _, rest = Path(f"/proc/{pid}/stat").read_text().partition(") ")
        fields = rest.split()
        return name.partition(" (")[2], (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return None


def cpu_seconds(names: frozenset[str]) -> float:
    """The CPU time of the live processes with these names."""
    found = (_stat(pid) for pid in filter(str.isdigit, os.listdir("/proc")))
    return sum(cpu for name, cpu in filter(None, found) if name in names)


def cpu_of(pids: Iterable[int]) -> float:
    """The CPU time of these processes (those that have ended count nothing)."""
    return sum(stat[1] for stat in map(_stat, pids) if stat is not None)
