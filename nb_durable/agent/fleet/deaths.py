"""A run that kills the process resuming it: counted from its log, and set aside by a worker.

A step that ends its process every time (a tool that segfaults, an OOM kill, ``os._exit`` in a
tool, a reply too big for memory) and that a resume runs again (a model call, an idempotent
tool, an external one resumed with ``in_doubt='rerun'``) would be taken by the next worker, and
kill it, for ever, stopping each time the other runs that worker had in flight. Every live
attempt at such a step records its intent (``step_started``) before it runs, so the log alone
says how many processes in a row started a step and died before recording anything after it:
no result of any step, no end (a graceful stop and a failure record one). Every worker counts
the same log the same way (``History.starts_since_result``, from the lines' headers, no
result decoded: it may be the reply that exhausted memory), so they agree whoever counts; the run index keeps the
count (``IndexRow.unfinished_starts``), so a worker's look at a run reads no log for it.

At ``max_deaths`` such takes in a row a worker does not resume the run: it records it
``failed`` under its lease, saying why and what to do (``set_aside``). A person's resume is
never refused (it does not ask), and any step recorded after it starts the count again.

What it cannot count: a process that dies where no line is written first (a ``pure`` tool, a
run's replay, code between steps) leaves nothing in the log, and is taken again as before.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...core.log import EventLog
from ...core.stores import StoreSpec
from ...core.writing.writer import leaving_others
from ..secrets.redaction import redact_known

__all__ = ["DEFAULT_MAX_DEATHS", "Deaths", "set_aside"]

DEFAULT_MAX_DEATHS = 10
"""Takes in a row that ended with their process's death before a worker sets a run aside. Not
DBOS's 100: each death here also stops every run that worker had in flight. Not 2 or 3 either: a
machine preempted (a spot instance, a node drained) while a long step ran kills a healthy run the
same way, and a run is failed only after that many in a row at one point of its work."""


@dataclass(frozen=True, slots=True)
class Deaths:
    """How many takes in a row died before recording anything after them, and the step the last one started."""

    count: int
    step: str | None

    def said(self, run_id: str, by: str) -> str:
        """The run's recorded error: what happened, where, and what to do (``by``: the worker's name)."""
        return (
            f"set aside by worker {by}: taken {self.count} times in a row by processes that died before it "
            f"recorded another step (the last at step '{self.step}'), so workers take it no more: each death also "
            f"stopped that worker's other runs. Fix the cause (a tool or a model reply that crashes the process or "
            f"exhausts its memory), then resume it by hand: resume_agent('{run_id}')"
        )


def set_aside(run_id: str, root: StoreSpec, max_deaths: int, by: str) -> Deaths | None:
    """Record the run ``failed`` if its last ``max_deaths`` takes died, checked
    under its lease, once its index row said so (``RunSummary.unfinished_starts``); None
    (nothing written) when they did not. Raises ``RunLockedError`` when another writer holds
    it; ``by`` names the worker in the error."""
    with leaving_others(), EventLog(run_id, root, scrub=redact_known) as log:
        found = Deaths(*log.writer.history.starts_since_result())  # a writer may have recorded a step since the look
        if found.count < max_deaths:
            return None
        log.finish_run("failed", error=found.said(run_id, by))
        return found
