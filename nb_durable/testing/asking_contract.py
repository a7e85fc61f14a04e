"""The waiting part of the store contract: a writer's "asking" mark, seen by every reader.

A writer that asks a person marks its lease (``StoreWriter.mark_asking``, ``core.holders``);
readers then say ``waiting``, not ``running``, and what the run waits on. The mark is live
state, never a record: clearing it makes the run running again, and it ends with the lease,
by close, by a newer writer, or by the death of its process (SIGKILL included). Where the store
is shared between processes (a path or URL other than ``memory://``), the checks read the mark
from another process, and kill a process that asks. Each check is a plain function of one
fresh, empty store, as in ``store_contract`` (which lists these in ``STORE_CONTRACT``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

from ..core.holders import Asking, Awaiting, asking_of, awaiting_of
from ..core.log import EventLog, run_step
from ..core.runs import list_runs, read_run, read_summary
from ..core.stores import StoreSpec, opened

__all__ = ["ASKING_CONTRACT"]

_QUESTION = Asking.now("approval:1:0:toolu_1", "approval", "run_bash")

# A reader in a process of its own: each run's status and what it waits on, as JSON.
_READER = """
import json, sys
from nb_durable.core.runs import list_runs
print(json.dumps({s.run_id: [s.status, s.asking.step_id if s.asking else None] for s in list_runs(sys.argv[1])}))
"""

# A writer in a process of its own that asks a person, says so, and waits to be killed.
_ASKER = """
import sys
from nb_durable.core.holders import Asking
from nb_durable.core.log import EventLog, run_step
log = EventLog("asker", sys.argv[1])
run_step(log, "model:0", lambda: 1)
log.writer.mark_asking(Asking.now("in-doubt-step", "in_doubt", "deploy"))
print("asking", flush=True)
sys.stdin.read()
"""


def _shared(spec: StoreSpec) -> str | None:
    """The spec as another process can open it, if the store is shared between processes."""
    if isinstance(spec, os.PathLike):
        return os.fspath(spec)
    if isinstance(spec, str) and not spec.strip().startswith("memory:"):
        return spec
    return None


def _python(code: str, spec: str, **kwargs: Any) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", code, spec], text=True, stdout=subprocess.PIPE, **kwargs)


def _read_elsewhere(spec: str) -> dict[str, list[Any]]:
    """``list_runs`` as another process reads it."""
    reader = _python(_READER, spec, stderr=subprocess.PIPE)
    out, err = reader.communicate(timeout=120)
    assert reader.returncode == 0, f"the reading process failed: {err.strip()[-2000:]}"
    return dict(json.loads(out))


def _status(spec: StoreSpec, run_id: str) -> tuple[str, str | None]:
    summary = {s.run_id: s for s in list_runs(spec)}[run_id]
    return summary.status, summary.asking.step_id if summary.asking else None


def a_writer_asking_a_person_reads_as_waiting_until_it_clears_the_mark(spec: StoreSpec) -> None:
    """Marked, a run reads as waiting (and on what) in listings, summaries, filters and other
    processes; cleared, as running again; closed, as interrupted, never waiting."""
    busy = EventLog("busy", spec)
    log = EventLog("asks", spec)
    try:
        run_step(busy, "a", lambda: 1)
        run_step(log, "a", lambda: 1)
        assert _status(spec, "asks") == ("running", None)
        log.writer.mark_asking(_QUESTION)
        assert _status(spec, "asks") == ("waiting", "approval:1:0:toolu_1")
        asking = {s.run_id: s for s in list_runs(spec)}["asks"].asking
        assert asking == _QUESTION, f"the mark reads back as {asking!r}, not {_QUESTION!r}"
        assert read_summary("asks", spec).status == read_run("asks", spec).summary.status == "waiting"
        with opened(spec) as store:
            holder = store.holder("asks")
            assert holder is not None and holder.get("asking", {}).get("step") == _QUESTION.step_id, holder
        assert [s.run_id for s in list_runs(spec, status=["waiting"])] == ["asks"]
        assert [s.run_id for s in list_runs(spec, status=["running"])] == ["busy"]
        assert sorted(s.run_id for s in list_runs(spec, status=["running", "waiting"])) == ["asks", "busy"]
        elsewhere = _shared(spec)
        if elsewhere is not None:
            seen = _read_elsewhere(elsewhere)
            assert seen == {"asks": ["waiting", _QUESTION.step_id], "busy": ["running", None]}, seen
        log.writer.mark_asking(None)
        assert _status(spec, "asks") == ("running", None)
        assert list_runs(spec, status=["waiting"]) == []
        if elsewhere is not None:
            assert _read_elsewhere(elsewhere)["asks"] == ["running", None]
        log.writer.mark_asking(_QUESTION)
        assert run_step(log, "b", lambda: 2) == 2, "a marked writer writes as before"
        assert _status(spec, "asks") == ("waiting", _QUESTION.step_id)
    finally:
        log.close()
        busy.close()
    assert _status(spec, "asks") == ("interrupted", None), "a closed writer's mark went with its lease"
    with EventLog("asks", spec) as again:
        assert _status(spec, "asks") == ("running", None), "a new writer's lease starts without the old mark"
        assert again.steps[1].result == 2


def a_resumed_run_asking_before_it_records_anything_is_waiting(spec: StoreSpec) -> None:
    """A run whose log ended (interrupted) and whose resume asks first (a step in doubt) is waiting
    while it asks, in listings and their filters; unmarked, it reads as its log ends again."""
    with EventLog("resumed", spec) as log:
        run_step(log, "a", lambda: 1)
        log.finish_run("interrupted", error="stopped")
    with EventLog("resumed", spec) as log:
        assert _status(spec, "resumed") == ("interrupted", None)
        log.writer.mark_asking(_QUESTION)
        assert _status(spec, "resumed") == ("waiting", _QUESTION.step_id)
        assert read_run("resumed", spec).summary.status == "waiting"
        assert [s.run_id for s in list_runs(spec, status=["waiting"])] == ["resumed"]
        assert list_runs(spec, status=["interrupted"]) == list_runs(spec, status=["running"]) == []
        log.writer.mark_asking(None)
        assert [s.run_id for s in list_runs(spec, status=["interrupted"])] == ["resumed"]


def a_dead_askers_mark_dies_with_its_lease(spec: StoreSpec) -> None:
    """A process killed while it asks leaves its run interrupted, never waiting; in one process,
    a newer writer of the run supersedes the asking one and its mark."""
    shared = _shared(spec)
    if shared is None:
        old = EventLog("asker", spec)
        run_step(old, "model:0", lambda: 1)
        old.writer.mark_asking(_QUESTION)
        assert _status(spec, "asker") == ("waiting", _QUESTION.step_id)
        with EventLog("asker", spec):
            assert _status(spec, "asker") == ("running", None)
        old.close()
        assert _status(spec, "asker") == ("interrupted", None)
        return
    asker = _python(_ASKER, shared, stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        line = asker.stdout.readline() if asker.stdout else ""
        assert line.strip() == "asking", f"the asking process said {line!r}: {asker.stderr.read() if asker.stderr else ''}"
        assert _status(spec, "asker") == ("waiting", "in-doubt-step")
        assert _read_elsewhere(shared)["asker"] == ["waiting", "in-doubt-step"]
    finally:
        asker.kill()  # SIGKILL on POSIX: no goodbye, no close
        asker.wait(60)
        for stream in (asker.stdin, asker.stdout, asker.stderr):
            if stream is not None:
                stream.close()
    deadline = time.monotonic() + 30  # a database server notices a dead client's connection at once, or soon
    while _status(spec, "asker")[0] in ("waiting", "running") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _status(spec, "asker") == ("interrupted", None)
    assert _read_elsewhere(shared)["asker"] == ["interrupted", None]


def a_writer_awaiting_an_outside_job_reads_as_running_with_it(spec: StoreSpec) -> None:
    """Marked with what it waits on outside it (a Message Batch: hours, no person), a run reads as
    running, in listings and their filters and other processes, with the job beside it; cleared,
    without it; the mark is nothing an asking reader (this nb_durable's, or an older one's) takes."""
    wait = Awaiting.now("model:1", "Message Batch msgbatch_01")
    with EventLog("batched", spec) as log:
        run_step(log, "a", lambda: 1)
        log.writer.mark_asking(wait)
        (summary,) = list_runs(spec)
        assert (summary.status, summary.asking, summary.awaiting) == ("running", None, wait), summary
        assert [s.run_id for s in list_runs(spec, status=["running"])] == ["batched"] and list_runs(spec, status=["waiting"]) == []
        with opened(spec) as store:
            assert asking_of(store.holder("batched")) is None and awaiting_of(store.holder("batched")) == wait
        elsewhere = _shared(spec)
        if elsewhere is not None:
            assert _read_elsewhere(elsewhere) == {"batched": ["running", None]}
        log.writer.mark_asking(None)
        assert list_runs(spec)[0].awaiting is None
        log.writer.mark_asking(wait)
    assert list_runs(spec)[0].awaiting is None, "a closed writer's mark went with its lease"


ASKING_CONTRACT = (
    a_writer_asking_a_person_reads_as_waiting_until_it_clears_the_mark,
    a_resumed_run_asking_before_it_records_anything_is_waiting,
    a_dead_askers_mark_dies_with_its_lease,
    a_writer_awaiting_an_outside_job_reads_as_running_with_it,
)
"""The checks of the waiting part of the contract, in order."""
