"""Waiting for one run from a process that does not run it: a run another process runs (a worker,
another kernel), one queued for a worker, or one that has ended, through the store as
``BatchHandle.wait`` waits for a batch (``nb-durable wait``); ``%agent_wait RUN`` uses it for a
run its kernel did not start.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from ...core.holders import describe_holder
from ...core.runs import read_summary
from ...core.stores import opened, password_left_out
from ...errors import RunFailedError, RunNotFoundError, StoreNotFoundError
from ..display.views import state_word
from ..display.words import store_flag
from .batch import BatchHandle, RunResult, settled

__all__ = ["wait_elsewhere"]


def wait_elsewhere(run_id: str, store: str | None, timeout: float | None, say: Callable[[str], None]) -> RunResult | None:
    """Wait until run ``run_id``, going on in another process or queued, ends (``say`` tells first what
    it waits on); a run that has ended is said at once. None for no such run, or one whose writer went
    away (nobody may be about to end it: it is resumed). ``TimeoutError`` past ``timeout`` (the run
    goes on); ``RunFailedError`` if it ended otherwise than completed; ``RunNotFoundError`` if it was deleted meanwhile."""
    with contextlib.ExitStack() as held:  # one connection for the look and every poll after it
        try:
            runs = held.enter_context(opened(store, existing=True))
            summary = read_summary(run_id, runs)
        except (StoreNotFoundError, RunNotFoundError):  # the caller's refusal says so; any other failure is said as it is
            return None
        going = summary.holder is not None or summary.status == "queued"
        if not going and not settled(summary):
            return None
        where = f"in another process ({describe_holder(summary.holder)})" if summary.holder else "in the queue, for a worker to take"
        if going:
            worker = "" if summary.holder else f" (no worker running? start one: nb-durable worker{store_flag(store)}{password_left_out(store)})"
            asking = f" ({summary.asking}: answered where it runs)" if summary.asking else ""
            # A queued run's state word is where it is: "queued in the queue" would say it twice.
            state = f"{state_word(summary.status)}{asking} {where}" if summary.holder else f"queued, for a worker to take{asking}"
            say(f"waiting for run {run_id}, {state}; the interrupt button stops the waiting, not the run{worker}")
        handle = BatchHandle((run_id,), runs)
        if not handle.wait(timeout, poll=0.5):
            raise TimeoutError(f"run {run_id} has not ended after {timeout:g} s: it goes on {where}; wait for it again")
        result = handle.results.get(run_id)
        if result is None:
            raise RunNotFoundError(
                run_id=run_id, where=runs.url, reason=f"was deleted from {runs.url} while it was waited for (pruned, or its log removed): there is no result to wait for"
            )
    if result.status != "completed":
        said = f": {result.error}" if result.error else ""
        raise RunFailedError(
            f"run {run_id} ended {state_word(result.status)}{said}; read_run('{run_id}') shows where it stopped, and "
            f"resume_agent('{run_id}') goes on from there",
            run_id=run_id,
        )
    say(f"run {run_id} completed; read_run('{run_id}') draws its timeline")
    return result
