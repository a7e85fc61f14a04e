"""A worker stopped (SIGTERM) between its claim and the runs it claimed: it takes none of them,
and gives their claims back, so another worker takes each at once and it stays queued, not
interrupted (no run started only to be stopped before its first step)."""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path

import pytest

from nb_durable.agent.fleet.batch import submit
from nb_durable.agent.fleet.taken import Taken
from nb_durable.agent.fleet.worker import ResumeWorker
from nb_durable.core.index.rows import CLAIM_SECONDS
from nb_durable.core.runs import read_summary


class StoppedAtItsClaim(ResumeWorker):
    """A worker whose stop comes just after its claim, as a SIGTERM may."""

    def candidates(self, busy: Iterable[str] = (), limit: int | None = None, *, claim: bool = False) -> list[str]:
        found = super().candidates(busy, limit, claim=claim)
        if claim and found:
            self.stop()
        return found


@pytest.mark.postgres
def test_a_worker_stopped_after_its_claim_takes_nothing_and_gives_its_claims_back(tmp_path: Path) -> None:
    """It started each run it had claimed only to stop it before its first step: the queued run
    was listed interrupted by the worker, and the claims it did not use held other workers off."""
    from tests.pg import postgres_url

    url = postgres_url()
    queued = [submit(f"say hello {i}", store=url, run_id=f"q{i}", workspace=str(tmp_path), demo=True) for i in range(2)]
    taken: list[Taken] = []
    stopped = StoppedAtItsClaim(store=url, concurrency=2, poll=0.2, report=taken.append)
    assert stopped.run() == [] and taken == []
    assert [read_summary(r, url).status for r in queued] == ["queued", "queued"]
    other = ResumeWorker(store=url, concurrency=2)
    looked = time.monotonic()
    assert sorted(other.candidates(limit=2, claim=True)) == sorted(queued)
    assert time.monotonic() - looked < CLAIM_SECONDS, "found at once, not once the stopped worker's claims ran out"
