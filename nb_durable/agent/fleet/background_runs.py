"""Runs off the caller's thread: ``background(run_agent, ...)`` returns a handle at once.

The run goes on in a daemon thread of this process, holding its own lease exactly as in the
foreground, so several background runs go on at once and each is safe from every other
writer. The handle is how the caller (a notebook cell, a script) reaches it:

* ``stop()`` asks the run to stop at its next step boundary (``agent.run.stopping``), recorded
  as interrupted, or in doubt if it cut a running command off;
* ``pending`` lists the questions the run waits on (approve a tool call, settle a step in
  doubt); answering one is a recorded decision, with who made it (``agent.fleet.decisions``);
* ``wait()`` blocks until the run ends and returns its ``AgentResult``, or raises its error,
  as the foreground call would have; ``status`` and ``result`` look without blocking.

Nothing a background run does is lost: an error it ends with is kept on the handle (and the
observer hears the run's last state); an unexpected exception (a bug) is also recorded in
the run's log as ``failed`` with its message, so the run is not mistaken for one whose
writer died. When this process exits, ``stop_all`` stops every run still going (atexit),
so each is recorded interrupted and its lease released before the process is gone.
"""

from __future__ import annotations

import atexit
import contextlib
import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Any, ParamSpec

from ...core.log import EventLog
from ...core.runs import read_summary
from ...core.status import Status
from ...errors import NbDurableError, RunNotRunningError, SimulatedCrash
from ..display.views import RunView, StepView, error_said
from ..run.hooks import Observer, Observers, RunHooks
from ..run.outcomes import AgentResult
from ..run.stopping import StopSignal
from ..secrets.redaction import redact_known
from .decisions import DecisionBox, PendingDecision

__all__ = ["BackgroundRun", "background", "background_run", "background_runs", "start_background", "started_background_runs", "stop_all"]

P = ParamSpec("P")

_RUNS: list[BackgroundRun] = []
_RUNS_LOCK = threading.Lock()

SHUTDOWN_WAIT = 10.0
"""Seconds ``stop_all`` waits at exit for each run to reach a step boundary and record its stop."""


class _Watcher(Observer):
    """Keeps the run's latest view on the handle (display only, like any observer)."""

    def __init__(self, handle: BackgroundRun) -> None:
        self.handle = handle

    def run_changed(self, run: RunView) -> None:
        self.handle.view = run
        self.handle.run_id = run.run_id
        self.handle.decisions.run_id = run.run_id

    def step_changed(self, step: StepView) -> None:
        pass


class BackgroundRun:
    """A run going on in a thread of this process: stop it, answer it, wait for it."""

    def __init__(self, run_id: str, store: Any = None) -> None:
        self.run_id = run_id
        self.store = store
        self.stop_signal = StopSignal()
        self.decisions = DecisionBox(run_id, self.stop_signal)
        self.view: RunView | None = None
        self._result: AgentResult | None = None
        self._error: BaseException | None = None
        self._logged: str | None = None
        self._done = threading.Event()
        self._ended: list[Callable[[BackgroundRun], None]] = []
        self._ending = False
        self._lock = threading.Lock()
        self.thread: threading.Thread | None = None

    def __repr__(self) -> str:
        return f"<BackgroundRun {self.run_id!r} {self.status}>"

    # -- looking ---------------------------------------------------------------------------

    @property
    def done(self) -> bool:
        """Whether the run's thread has ended (the run ended, stopped or failed)."""
        return self._done.is_set()

    @property
    def ending(self) -> bool:
        """Whether the run has ended and its thread is still drawing that end (its ``when_done``
        callbacks): what it recorded is final, but it is not ``done`` yet."""
        return (self._result is not None or self._error is not None) and not self._done.is_set()

    @property
    def stopping(self) -> bool:
        """Whether the run was asked to stop and its thread has not ended yet: it may have recorded
        its end and let its lease go while the stop still travels up the thread."""
        return self.stop_signal.requested and not self._done.is_set()

    @property
    def status(self) -> str:
        """``running``, ``waiting`` (for a decision), ``stopping``, then how the run ended."""
        if self._done.is_set():
            if self._result is not None:
                return self._result.status
            error = self._error
            if isinstance(error, SimulatedCrash):
                return self._as_logged()
            if isinstance(error, KeyboardInterrupt):
                view = self.view
                return view.status if view is not None and view.status == "in_doubt" else "interrupted"
            return error.outcome if isinstance(error, NbDurableError) else "failed"
        if self.stopping:
            return "stopping"
        view = self.view
        return str(view.status) if view is not None and view.status.going else "running"

    def _as_logged(self) -> str:
        """How a run that recorded no end reads (interrupted, or in doubt if a step is), once."""
        if self._logged is None:
            try:
                self._logged = str(read_summary(self.run_id, self.store).status)
            except NbDurableError:  # the store went away meanwhile: what a killed process leaves
                self._logged = "interrupted"
        return self._logged

    @property
    def result(self) -> AgentResult | None:
        """The run's result once it ended as the loop returns one; None while it goes on."""
        return self._result

    @property
    def error(self) -> BaseException | None:
        """What the run raised (a failure, a stop, a bug), or None."""
        return self._error

    @property
    def pending(self) -> list[PendingDecision]:
        """The questions the run waits on; answer one with ``.approve()``, ``.skip()``, ..."""
        return self.decisions.pending

    # -- acting ----------------------------------------------------------------------------

    def stop(self, reason: str = "stopped by the user") -> None:
        """Ask the run to stop at its next step boundary (a running command is killed); returns at once."""
        self.stop_signal.request(reason)

    def wait(self, timeout: float | None = None) -> AgentResult:
        """Block until the run ends; its result, or the error it ended with (as the foreground raises).

        ``TimeoutError`` after ``timeout`` seconds if it still goes on (it keeps going).
        """
        if not self._done.wait(timeout):
            raise TimeoutError(
                f"run {self.run_id!r} is still {self.status} after {timeout:g} s; it goes on in the background "
                "(wait again, or stop it)"
            )
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result

    def join(self, timeout: float | None = None) -> bool:
        """Block until the run's thread ends (at most ``timeout`` seconds); whether it has.
        Unlike ``wait``, never raises what the run raised (a stop is a ``KeyboardInterrupt``)."""
        return self._done.wait(timeout)

    def when_done(self, callback: Callable[[BackgroundRun], None]) -> None:
        """Call ``callback(self)`` once, from the run's thread as it ends (at once if it has).

        Callbacks run before ``wait()`` returns, so a waiter sees what they drew.
        """
        with self._lock:
            if not self._ending:
                self._ended.append(callback)
                return
        callback(self)

    # -- the thread ------------------------------------------------------------------------

    def _go(self, call: Callable[[], AgentResult]) -> None:
        try:
            self._result = call()
        except BaseException as e:  # kept for wait(); a background thread has nobody else to raise to
            self._error = e
            if not isinstance(e, (NbDurableError, KeyboardInterrupt, SimulatedCrash)):
                self._record_bug(e)
        finally:
            with self._lock:
                self._ending = True
                callbacks = list(self._ended)
            for callback in callbacks:
                with contextlib.suppress(Exception):  # display only: the run has ended and is recorded
                    callback(self)
            self._done.set()

    def _record_bug(self, error: BaseException) -> None:
        """Record an unexpected exception as the run's failure, unless the run had ended anyway."""
        try:
            summary = read_summary(self.run_id, self.store)
            if Status(summary.status).finished or summary.holder is not None:
                return
            with EventLog(self.run_id, self.store, scrub=redact_known) as log:
                log.finish_run(
                    "failed",
                    error=f"{error_said(error)} (an unexpected error in the background run; resume it to try again)",
                )
        except Exception:  # the store itself is gone: the error stays on the handle
            pass


def background(fn: Callable[P, AgentResult], /, *args: P.args, **kwargs: P.kwargs) -> BackgroundRun:
    """Start ``fn(*args, **kwargs)`` (``run_agent``, ``resume_agent``, ``continue_agent``) in a thread.

    Its ``hooks`` get the handle's stop signal, and its ``approve`` and ``ask`` become questions
    on ``handle.pending``; its observer still hears every step.
    """
    named = kwargs.get("run_id") or (args[0] if fn.__name__ in ("resume_agent", "continue_agent") and args else "")
    base: RunHooks | None = kwargs.pop("hooks", None)  # type: ignore[assignment]

    def go(hooks: RunHooks) -> AgentResult:
        return fn(*args, **{**kwargs, "hooks": hooks})  # type: ignore[arg-type]

    # A new run's derived id is learnt from its first view.
    return start_background(go, hooks=base, run_id=str(named or ""), store=kwargs.get("store"))


def start_background(
    go: Callable[[RunHooks], AgentResult], *, hooks: RunHooks | None = None, run_id: str = "", store: Any = None
) -> BackgroundRun:
    """Start ``go(hooks)`` in a thread, with ``hooks`` (observer, prices, crash switch) made background ones."""
    base = hooks or RunHooks()
    handle = BackgroundRun(run_id, store)
    made = replace(
        base,
        stop=handle.stop_signal,
        approve=handle.decisions.approve,
        ask=handle.decisions.ask,
        deciders_for=handle.decisions.deciders_for,
        observer=Observers(_Watcher(handle), base.observer),
        sleep=handle.stop_signal.sleep,
    )
    thread = threading.Thread(target=handle._go, args=(lambda: go(made),), name=f"nb-durable-run-{run_id or 'new'}", daemon=True)
    handle.thread = thread
    _register(handle)
    thread.start()
    return handle


def _register(handle: BackgroundRun) -> None:
    with _RUNS_LOCK:
        if not _RUNS:
            # Daemon threads still run when atexit does (only non-daemon ones are joined first).
            atexit.unregister(stop_all)
            atexit.register(stop_all)
        _RUNS[:] = [h for h in _RUNS if not h.done]
        _RUNS.append(handle)


def started_background_runs() -> list[BackgroundRun]:
    """Every background run this process started and still knows of, ended ones too, oldest first."""
    with _RUNS_LOCK:
        return list(_RUNS)


def background_runs() -> list[BackgroundRun]:
    """The background runs of this process that have not ended, oldest first."""
    with _RUNS_LOCK:
        return [h for h in _RUNS if not h.done]


def background_run(run_id: str | None = None) -> BackgroundRun:
    """This process's background run ``run_id``, or (no id) the only one going on.

    ``RunNotRunningError`` if there is no such run, or several when no id is given.
    """
    going = background_runs()
    with _RUNS_LOCK:
        known = list(_RUNS)
    if run_id:
        for handle in reversed(known):
            if handle.run_id == run_id:
                return handle
        raise RunNotRunningError(run_id=run_id, going=[h.run_id for h in going])
    if len(going) == 1:
        return going[0]
    raise RunNotRunningError(run_id=None, going=[h.run_id for h in going])


def stop_all(reason: str = "stopped because the process running it is exiting", timeout: float = SHUTDOWN_WAIT) -> None:
    """Stop every background run of this process and wait (up to ``timeout`` s each) for it to record it."""
    going = background_runs()
    for handle in going:
        handle.stop(reason)
    for handle in going:
        if handle.thread is not None:
            handle.thread.join(timeout)

