"""The resume worker: find agent runs whose writer died, or that were submitted (queued), and run them.

Which runs it takes (those whose writer died, and queued ones; never one a person must fix)
is ``choosing``'s; the store it looks on, and when it is asleep, ``looking``'s. A run in doubt (its writer died inside an external tool call) is resumed
with the ``in_doubt`` policy, ``skip`` by default (the model is told the outcome is unknown).

Safety comes from the lease alone: each resume opens the run exactly as any writer does, so
two workers (on one machine or many) never resume the same run, and a run a person is
resuming is never taken: the loser of the race gets ``RunLockedError`` and moves on. A lease
left free by a session that ended under a writer living on this host, or with a server restart,
is left to that writer for a while (``live_writers``), as it takes the lease back at its next write.

Stopping: ``stop()`` (a SIGTERM, in the CLI) takes no new run, and each run in flight stops at
its next step that is not an external effect (``before_step``): a model call is stopped before
its request goes out, so nothing is paid or done twice, and an external tool already running
is let finish and recorded first; a model call waiting on its Message Batch stops waiting (the
batch is recorded: the resume polls it). The run is recorded ``interrupted`` with an error naming the
worker (``STOPPED_BY_WORKER``), its lease is released, and any other worker continues it.

A run's MCP tools are rebuilt from its record as ``nb-durable resume`` rebuilds them
(``tools_for_run``: its servers started and its tools checked against them). Where that cannot
be done here (a server that does not start, a config or a variable it needs that is missing, a
tool that changed), or its workspace folder is not on this machine, the worker passes over the
run with the reason and leaves it as it is, for ``PASS_OVER_FOR`` seconds: a person's to fix
(or another machine's to run), never recorded as the run's failure. So is a run for the
Messages API when the worker has no credentials for it (its environment's fault, not the run's). So is a run whose store
failed while the worker ran it (a ``StoreError``: a database refusing writes, a full disk, a
server short of connections or locks past the wait): its log may never change again, and the
store, not the run, is at fault. A worker whose key the
Messages API refuses (401) stops itself (``refused`` says why) after the run that met it: that
run is recorded failed, as it must be once its call was answered, but no other is. A store
that can only be read (read-only media: ``StoreReadOnlyError``) stops it before its first
claim, or, turned so while it runs (a look, a claim or a run's write finds it), as ``stop()`` does:
no wait makes it writable; so do a store that refuses its user (``StoreAccessError``) and one
that names nothing there (``StoreNameError``), as it starts or once its server is back. Its
runs in flight stop at their next step, but nothing more of them can be recorded there (not
even ``interrupted``): each is left as a killed worker leaves it, its steps recorded so far
kept, for a worker where the store can be written to resume.

A run whose last ``max_deaths`` takes each died in a step before recording another (a tool or a
reply that kills the process) is recorded failed instead of resumed (``deaths``).

Who resumed a run is a recorded decision (``by: "worker host:pid"``) at the run's next point
(``resume_agent(resumed_by=...)``), read back as ``RunSummary.resumed_by``.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from ...core.holders import describe_holder
from ...core.index.claim import Wakeups
from ...core.index.rows import STOPPED_BY_WORKER
from ...core.runs import read_summary
from ...core.stores import Store, check_writable
from ...core.writing.writer import leaving_others
from ...errors import (
    LeaseLostError,
    ModelCallError,
    NbDurableError,
    RunLockedError,
    SettingError,
    StoreAccessError,
    StoreError,
    StoreNameError,
    StoreReadOnlyError,
)
from ..models.anthropic import CREDENTIAL_VARIABLES, credentials_in_environment, preload
from ..money.prices import load_prices
from ..run.hooks import Observer, RunHooks
from ..run.loop import resume_agent
from ..settings import DEFAULT_IN_DOUBT, TERMINAL_IN_DOUBT, InDoubtChoice
from ..tools.mcp.run_tools import tools_for_run
from .choosing import RunChoosing
from .deaths import DEFAULT_MAX_DEATHS, set_aside
from .live_writers import LiveWriters
from .looking import CANNOT_TAKE, Looking
from .stop_points import StopPoints, WorkerStopped
from .store_trouble import StoreTrouble
from .taken import PASSED_OVER, Taken
from .thread_stores import ThreadStores

__all__ = ["STOPPED_BY_WORKER", "ResumeWorker", "WorkerStopped", "worker_name"]


_NO_WAIT_MENDS = (StoreNameError, StoreAccessError, StoreReadOnlyError)
"""A store's errors no wait mends (a name no store can have, a refused user, read-only media): they stop a worker."""

PASS_OVER_FOR = 60.0
"""Seconds a worker leaves a run it cannot run here (its MCP tools not rebuilt: a server down, a
config gone, a tool changed; its workspace folder missing; the store failing as it ran it)
before it tries again."""


def worker_name() -> str:
    """This process as a worker names itself: ``host:pid``."""
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass
class ResumeWorker(RunChoosing, StopPoints, Looking):
    """Runs the queued runs of one store and resumes those whose writer died, ``concurrency`` at a time (threads)."""

    store: str
    in_doubt: InDoubtChoice = DEFAULT_IN_DOUBT
    concurrency: int = 1
    tags: tuple[str, ...] = ()
    older_than: float = 0.0
    """Take only runs idle (no event) for at least this many seconds."""
    poll: float = 5.0
    max_deaths: int = DEFAULT_MAX_DEATHS
    """Takes in a row that died before recording another step, after which a run is recorded failed, not resumed (``deaths``)."""
    name: str = field(default_factory=worker_name)
    report: Callable[[Taken], None] = lambda taken: None
    """Hears what became of each run taken (the CLI prints a line)."""
    warn: Callable[[str], None] = lambda message: None
    """Hears trouble that does not stop the worker (a store it cannot reach for a while)."""
    ready: Callable[[], None] = lambda: None
    """Hears that ``run()`` is ready to take runs: the SDK imported, the store open (the CLI's banner);
    not called when ``stop()`` came first."""
    observer: Observer = field(default_factory=Observer)
    live_writers: LiveWriters = field(default_factory=LiveWriters, repr=False)
    """The runs left to writers that may live on, whose sessions ended holding their leases (``live_writers``)."""
    _stopping: threading.Event = field(default_factory=threading.Event, init=False, repr=False)
    _failed: dict[str, float | None] = field(default_factory=dict, init=False, repr=False)
    _passed_over: dict[str, float] = field(default_factory=dict, init=False, repr=False)
    """Runs that could not be run here (``PASS_OVER_FOR``), and when (monotonic) to try them again."""
    _poll_store: Store | None = field(default=None, init=False, repr=False)
    _opening: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _stores: ThreadStores = field(init=False, repr=False)
    """The store each resuming thread keeps open while ``run()`` runs (``thread_stores``)."""
    polls: int = field(default=0, init=False)
    """How many times the loop has looked for runs (woken, polled, or a slot freed)."""
    _wakeups: Wakeups | None = field(default=None, init=False, repr=False)
    _looked_while: int | None = field(default=None, init=False, repr=False)
    """Which span of the store's ability to wake it (``Wakeups.span``) the last look began in."""
    _idle: bool = field(default=False, init=False, repr=False)
    _trouble: StoreTrouble = field(init=False, repr=False)
    """What it has said of a store it could not list (``store_trouble``)."""
    _no_wait_mends: StoreError | None = field(default=None, init=False, repr=False)
    """The store found read-only, or refusing its URL or user, while it ran: ``run()`` stops and raises it."""
    refused: str | None = field(default=None, init=False)
    """Why the worker stopped itself: the Messages API refused its credentials (None: it did not)."""

    def __post_init__(self) -> None:
        self._stores = ThreadStores(self.store)
        self._trouble = StoreTrouble(self.store, self.poll, self.warn)
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, not {self.concurrency}")
        if self.max_deaths < 1:
            raise ValueError(f"max_deaths must be at least 1, not {self.max_deaths}")
        if self.in_doubt not in TERMINAL_IN_DOUBT:
            said = ", ".join(repr(c) for c in TERMINAL_IN_DOUBT)
            raise ValueError(f"a worker's in_doubt must be one of {said} (nobody is there to ask), not {self.in_doubt!r}")

    # -- resuming ---------------------------------------------------------------------------

    def take(self, run_id: str) -> Taken:
        """Resume one run if it still wants resuming; never raises for the run's own failures."""
        try:
            store = self._stores.here()
            summary = read_summary(run_id, store)
            if summary.holder is not None and summary.status != "queued":
                # Taken since the look (a JSONL look claims nothing): not "passed over", left for a reason.
                return Taken(run_id, "locked", f"another writer ({describe_holder(summary.holder)}) took it first and is running it")
            if not self.wants(summary):
                return Taken(run_id, PASSED_OVER, "no longer needs a worker")
            if summary.settings.get("model_kind", "anthropic") == "anthropic" and not credentials_in_environment():
                # The worker's environment is at fault, not the run: resumed, it would be failed for it.
                return self._pass_over(
                    run_id, f"this worker has no {' or '.join(CREDENTIAL_VARIABLES)} set, so it cannot call the "
                    "Messages API and leaves the run as it is: start the worker with one of them set",
                )  # fmt: skip
            if leave := self.live_writers.leave_until(store, run_id):  # its live writer's session ended holding its lease
                return self._pass_over(run_id, leave[1], until=leave[0])
            if summary.unfinished_starts >= self.max_deaths:  # its index row counts the takes that died in a step
                aside = set_aside(run_id, store, self.max_deaths, self.name)
                if aside is not None:
                    return Taken(run_id, "failed", aside.said(run_id, self.name))
            try:
                tools = tools_for_run(run_id, store, recorded=(summary.settings, summary.status))
            except (NbDurableError, OSError, ValueError) as e:  # a person's to fix; the run is not at fault
                return self._pass_over(run_id, f"cannot rebuild its MCP tools here, so it is left as it is: {e}")
            hooks = RunHooks(
                observer=self.observer, before_step=self._before_step, child_before_step=self._before_step,
                while_waiting=self._while_waiting, sleep=self._between_retries,
            )  # fmt: skip
            with tools, leaving_others():  # a parent's thread of this process may have opened it since the look
                # The settings read for the look above: the log is read again only under the lease.
                result = resume_agent(
                    run_id, store=store, in_doubt=self.in_doubt, hooks=hooks, resumed_by=self.name, tools=tools.registry, recorded=summary.settings
                )  # fmt: skip
        except WorkerStopped as e:
            return Taken(run_id, "interrupted", str(e))
        except LeaseLostError as e:  # its advice is a person's: here no one needs to open it again
            return Taken(run_id, "locked", f"{e} Workers take it again at their next look, as soon as its lease is free.")
        except RunLockedError as e:
            return Taken(run_id, "locked", str(e))
        except StoreError as e:
            if isinstance(e, _NO_WAIT_MENDS):
                self._cannot_go_on(e)
            # The store failed, not the run (a database refusing writes, a full disk): nothing
            # of the run is at fault, and its log may never change to bring it back.
            return self._pass_over(run_id, f"the store failed while it was taken, so it is left as it is: {e}")
        except NbDurableError as e:
            if isinstance(e, ModelCallError) and e.status == 401:
                # The worker's key is at fault, not the run (a 403 may be one model's, so one run's):
                # every run it took next would be recorded failed the same way, each left for a person.
                self.refused = (
                    f"the Messages API refused this worker's credentials (401) on run {run_id}, so it takes "
                    f"no more runs: set a valid {' or '.join(CREDENTIAL_VARIABLES[:2])} and start it again, then "
                    f"resume_agent({run_id!r}) (recorded failed; its completed steps will not repeat)"
                )
                self.stop()
            if isinstance(e, SettingError) and e.setting == "workspace":
                # Another machine sharing the store may have the folder, or a person may restore it here.
                return self._pass_over(run_id, f"its workspace is not on this machine, so it is left as it is: {e}")
            self._remember_failure(run_id)
            return Taken(run_id, e.outcome or "error", str(e))
        except Exception as e:  # one run's bad log or setting must not stop the worker
            self._remember_failure(run_id)
            return Taken(run_id, "error", f"{type(e).__name__}: {e}")
        if result.live_steps == 0 and result.status == "completed":
            # Another worker took and finished it between our look and our lease: replayed only.
            return Taken(run_id, PASSED_OVER, "another worker ran it first")
        return Taken(run_id, result.status, result.detail, result)

    def _cannot_go_on(self, e: StoreError) -> None:
        """Stop taking runs: the store can only be read now, or refuses its URL or user (a role
        dropped, a password changed, a right revoked), and waiting mends neither."""
        if self._no_wait_mends is None:
            self._no_wait_mends = e.said_as(CANNOT_TAKE) if isinstance(e, StoreReadOnlyError) else e
        self.stop()

    def _pass_over(self, run_id: str, why: str, until: float | None = None) -> Taken:
        """Leave a run this machine cannot run as it is, for ``PASS_OVER_FOR`` seconds (or ``until``, monotonic)."""
        self._passed_over[run_id] = time.monotonic() + PASS_OVER_FOR if until is None else until
        return Taken(run_id, PASSED_OVER, why)

    def _remember_failure(self, run_id: str) -> None:
        try:
            self._failed[run_id] = read_summary(run_id, self.store).updated_at
        except Exception:
            self._failed[run_id] = None

    def stop(self) -> None:
        """Take no new run; runs in flight stop at their next step boundary (thread-safe)."""
        self._stopping.set()

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def run(self, *, once: bool = False) -> list[Taken]:
        """Resume runs until ``stop()`` (or, with ``once``, until one pass over the store is done).

        Between polls (every ``poll`` seconds) the worker sleeps, woken at once when a slot
        frees or the store says a run became takeable (``core.index.claim.Wakeups``)."""
        preload()
        load_prices()
        try:
            self._poll_store = self._open_poll_store()
        except _NO_WAIT_MENDS:
            raise  # a mistyped scheme, a refused user, or read-only media, is no outage to wait out: said before the banner
        except StoreError:
            pass  # unreachable now: each poll tries again, and warns
        wakeups = None
        if not once:
            # A store unreachable now is opened for its wake-ups as soon as it can be, not at a
            # poll: the first wake-up starts that poll, rather than one up to ``poll`` s later.
            opener = None if self._poll_store is not None else self._opener()
            wakeups = Wakeups(self._poll_store, opener=opener)
        self._wakeups = wakeups
        try:
            if self.stopping:  # stopped while it started: it never was ready, and takes nothing
                return []
            self.ready()
            with self._stores.kept():
                if self._poll_store is not None:
                    self._stores.share(self._poll_store)  # PostgreSQL's: its runs read on its one session
                return self._run(once, wakeups)
        finally:
            if wakeups is not None:
                wakeups.close()
            store, self._poll_store = self._poll_store, None
            if store is not None:
                store.close()

    def _run(self, once: bool, wakeups: Wakeups | None) -> list[Taken]:
        done: list[Taken] = []
        running: dict[str, Future[Taken]] = {}
        tried: set[str] = set()  # with ``once``: each run is taken at most once in the pass
        ended = threading.Event()
        with ThreadPoolExecutor(self.concurrency, thread_name_prefix="nb-durable-worker") as pool:
            queue: list[str] = []
            next_poll = 0.0
            found = True  # with ``once``: the last claim found something (or a slot freed since)
            while not self.stopping:
                for run_id, future in list(running.items()):
                    if future.done():
                        del running[run_id]
                        done.append(future.result())
                        self.report(done[-1])
                        next_poll, found = 0.0, True  # a free slot: look for the next run now
                woken = wakeups is not None and wakeups.event.is_set()
                due = (found and not queue) if once else (woken or time.monotonic() >= next_poll)
                if due and len(running) < self.concurrency:
                    # Looked at before the clear: a wake-up after it is seen by a later poll.
                    wakeable = self._wakeable()
                    if wakeups is not None:
                        wakeups.event.clear()
                    next_poll = time.monotonic() + self.poll
                    try:
                        check_writable(self._looking_store(), CANNOT_TAKE)  # a claim finding nothing writes nothing
                        queue = self.candidates(busy=[*running, *tried], limit=self.concurrency - len(running), claim=True)
                        found = bool(queue)
                        self.polls += 1
                        self._looked_while = wakeable
                        self._trouble.listed()
                    except _NO_WAIT_MENDS as e:  # e.g. a server down as it started, up now without its role
                        self._cannot_go_on(e)  # no wait mends it: every claim would fail
                        continue
                    except StoreError as e:  # the database restarting: a long-running worker waits it out
                        if once:
                            raise
                        self._trouble.failed(str(e))
                while queue and len(running) < self.concurrency and not self.stopping:  # a stop during the claim starts none
                    run_id = queue.pop(0)
                    if run_id not in running:
                        running[run_id] = pool.submit(self.take, run_id)
                        running[run_id].add_done_callback(lambda _: ended.set())
                        if once:
                            tried.add(run_id)
                idle = not queue and not running
                if idle and not self._idle and self._poll_store is not None:
                    # Sessions kept only for speed go back to the server, for other workers' runs:
                    # once, as the worker becomes idle, not at each nap.
                    getattr(self._poll_store, "idle", lambda: None)()
                self._idle = idle
                if once and not found and not queue and not running:
                    break
                # Short naps (the main thread must stay free to hear signals), cut short when a
                # run ends, so its slot takes the next run at once.
                ended.wait(0.02)
                ended.clear()
            self.give_back(queue)  # claimed, never taken: other workers' claims need not wait them out
            for future in running.values():
                done.append(future.result())
                self.report(done[-1])
        if self._no_wait_mends is not None:
            raise self._no_wait_mends
        return done
