"""A session's delegate calls: each child's start a recorded step, the children in threads.

For a turn whose reply holds delegate calls, the seam first records, in ``tool_use`` order,
one step ``delegate:T:I:ID`` per call: the start of its child (``core.whole_runs.children.start_child``,
the parent's record and the child's ``run_started`` written so a crash leaves both or
neither). Then the turn's tool steps run in ``tool_use`` order as always; a delegate call's
tool step (idempotent: running it again resumes the same child) waits for its child, which
runs in a thread of its own under its own lease. The first delegate call of a turn to run
live launches every later one too, bounded by ``delegate_fan_out``, so children run at the
same time while their results still go back in ``tool_use`` order.

A child that already ended hands back its recorded ending and runs nothing; one that did not
(a crash, a stop) is resumed here, or waited on while another process (a worker) holds its
lease. Replay of a finished parent replays both steps of each call and touches no child.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...core.codec import request_hash
from ...core.history import History
from ...core.log import EventLog
from ...core.stores import Store
from ...core.whole_runs.children import child_id, start_child
from ...core.writing.writer import held_here, leaving_others
from ...errors import (
    DecisionNeededError,
    InDoubtError,
    RetriesExhaustedError,
    RunError,
    RunLockedError,
    RunNotFoundError,
    SettingError,
)
from ..display.views import StepId, StepView, ToolCall, view_of
from ..run.hooks import RunHooks, StepStarting
from ..run.points import SessionAsks
from ..run.stopping import RunStopped
from ..settings import AgentSettings, Change
from ..tools import ToolRegistry, ToolResult, schema_errors
from .bill import TreeBill, child_gone
from .outcome import result_of, summary_result
from .stop import LinkedStop
from .tool import DELEGATE, asked_tools, child_registry, child_settings, with_delegate

if TYPE_CHECKING:
    from ..run.session import RunSession

__all__ = ["ChildRuns", "Delegation"]

_POLL = 0.05


@dataclass(frozen=True, slots=True)
class ChildRuns:
    """How a child run is made and run, handed in by ``run.loop`` (which imports this module):
    ``recorded`` is ``loop.recorded_settings``, ``go_on`` the loop's resume of a recorded run."""

    recorded: Callable[[AgentSettings, Any, ToolRegistry], AgentSettings]
    go_on: Callable[..., Any]


@dataclass(frozen=True, slots=True)
class _Call:
    index: int
    child: str
    step: str
    position: int
    """Where the step that started the child is in the parent's log (a fork before it goes on without it)."""


class Delegation:
    """The delegate calls of one session of a run whose ``delegate`` setting is on."""

    def __init__(self, session: RunSession, registry: ToolRegistry, store: Store, runs: ChildRuns) -> None:
        self.session = session
        self.runs = runs
        self.registry = registry
        self.store = store
        self.children: list[str] = []
        """Every child this run has started so far (replayed or live), in order."""
        self.stops: dict[str, LinkedStop] = {}
        """Each running child's stop signal (stop one child alone with ``stops[id].request()``)."""
        self._turn: dict[int, _Call] = {}
        self._refused: dict[int, str] = {}
        """This turn's delegate calls whose input could not start a child, and why (by index)."""
        self._futures: dict[str, Future[ToolResult]] = {}
        self._pool: ThreadPoolExecutor | None = None
        self.bill = TreeBill(store, self.children, lambda: session.hooks.prices, session.run_id)
        """What the children cost (``bill``): the tree's budget and its header read it."""
        self._lock = threading.Lock()
        self._took: dict[str, float] = {}
        """How long each child this session ran took, in ms (``took``)."""
        self._halted = threading.Event()
        """Set once a child ended without an answer (a crash, a question, a stop): the session ends."""

    # -- the steps of a turn ---------------------------------------------------------------

    def start_turn(self, log: EventLog, turn: int, tool_uses: list[dict[str, Any]]) -> None:
        """Record (or replay) the start of the child of each delegate call of the turn."""
        calls = [(i, b) for i, b in enumerate(tool_uses) if b.get("name") == DELEGATE]
        refusals = {i: self._refusal(b.get("input")) for i, b in calls}
        self._turn, self._refused = {}, {}
        share: dict[str, Any] | None = None
        for left, (index, block) in enumerate(calls):
            step = str(StepId.delegate(turn, index, block["id"]))
            refused = refusals[index]
            if refused is not None and log.replaying and log.record_at(log.cursor, result=False).step_id == step:
                refused = None  # recorded as started (by a version that let such input through): it was
            if refused is not None:  # no child: the call's tool step answers what was wrong, on replay too
                self._refused[index] = refused
                continue
            given = block.get("input")
            request: dict[str, Any] = given if isinstance(given, dict) else {}
            if not log.replaying:
                self.session.hooks.check_stop()
            child = child_id(self.session.run_id, step)
            settings = None
            if not log.replaying:
                if share is None:  # the calls starting live share what remains, once for all
                    share = self._budget_left(sum(1 for i, _ in calls[left:] if refusals[i] is None))
                settings = self._settings_of(request, share).to_json()
            # Live, the start records where the session traces it, for a worker that resumes the child alone.
            trace = self.session.hooks.child_trace(child, step) if settings is not None else None
            started = start_child(log, step, child, settings or {}, request_hash=request_hash(request), trace=trace)
            # The child is the one the step recorded: a fork replays its source's start, and the
            # child it names (not one derived from the fork's id, which was never started) is its.
            child = str(started.get("child") or child)
            view = view_of(log.record_at(log.cursor - 1), state="live" if settings else "replayed", call=ToolCall(DELEGATE, request))
            view = view.but(child=child)  # a fork's copy, where its record names the source's child
            self.session.step_done(view, settings is not None)
            self._turn[index] = _Call(index, child, step, log.cursor - 1)
            self.bill.started[child] = (step, log.cursor - 1)
            if child not in self.children:
                self.children.append(child)

    def _refusal(self, given: Any) -> str | None:
        """Why a delegate call's input cannot start a child (the model's to fix), or None.

        Decided from the recorded input and the run's settings alone, so a replay refuses
        the same calls; a call refused here starts nothing and records no ``delegate`` step.
        """
        tool = self.registry.get(DELEGATE)
        errors = schema_errors(given if given is not None else {}, tool.input_schema) if tool is not None else []
        if not errors:
            request = given if isinstance(given, dict) else {}
            unknown = sorted(set(asked_tools(request) or ()) - {t.name for t in self.registry})
            if not str(request.get("task") or "").strip():
                errors = ["task is empty: say what the child should do"]
            elif unknown:
                known = ", ".join(sorted(t.name for t in self.registry))
                errors = [f"tools names {', '.join(map(repr, unknown))}, which this run does not have (it has: {known})"]
            else:
                try:
                    child_settings(self.session.current, request, {})
                except SettingError as e:
                    errors = [str(e)]
        if not errors:
            return None
        return f"Invalid input for {DELEGATE}: {'; '.join(errors)}. No child run was started; fix the input and call {DELEGATE} again."

    def _settings_of(self, request: Mapping[str, Any], share: Mapping[str, Any]) -> AgentSettings:
        parent = self.session.current
        settings = child_settings(parent, request, share)
        registry = with_delegate(child_registry(self.registry, asked_tools(request)), settings)
        return self.runs.recorded(settings, self.session.client, registry)

    def _budget_left(self, siblings: int) -> dict[str, Any]:
        """What remains of the parent's budgets, shared by the calls starting now: the tree
        can never spend more than the parent was given, however its children run."""
        current = self.session.current
        out: dict[str, Any] = {}
        if current.max_usd is None and current.max_run_tokens is None:
            return out
        own = self.session.cost
        kids = self.bill.spent()
        held_usd, held_tokens = self.bill.held()
        if current.max_usd is not None:
            left = current.max_usd - own.paid_dollars - own.saved_dollars - kids.paid_dollars - held_usd
            out["max_usd"] = max(left / siblings, 1e-6)
        if current.max_run_tokens is not None:
            left_tokens = current.max_run_tokens - own.paid.total - own.saved.total - kids.paid.total - held_tokens
            out["max_run_tokens"] = max(left_tokens // siblings, 1)
        return out

    def answer(self, index: int) -> ToolResult:
        """The tool result of delegate call ``index`` of the turn: its child's ending."""
        call = self._turn.get(index)
        if call is None:
            refused = self._refused.get(index, f"delegate call {index + 1} of this turn was not started")
            return ToolResult(refused, is_error=True)
        self._launch(index)
        result = self._futures[call.child].result()
        parent_stop = self.session.hooks.stop
        if parent_stop is not None and parent_stop.requested:
            # The child stopped because its parent did: nothing to report, the parent stops too.
            parent_stop.check()
        return result

    def took(self, index: int, waited: float | None) -> float | None:
        """How long the child of delegate call ``index`` of the turn ran, in ms: not its step's
        own time (``waited``), which is only how long the run waited for it once it asked."""
        call = self._turn.get(index)
        return self._took.get(call.child, waited) if call is not None else waited

    def _launch(self, index: int) -> None:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(
                    max_workers=self.session.current.delegate_fan_out, thread_name_prefix=f"child-of-{self.session.run_id}"
                )
            for call in sorted(self._turn.values(), key=lambda c: c.index):
                if call.index >= index and call.child not in self._futures:
                    self._futures[call.child] = self._pool.submit(self._run_child, call)

    def close(self) -> None:
        """Stop any child still running (the parent's session ended) and wait for it."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        for stop in self.stops.values():
            stop.request("its parent's session ended")
        pool.shutdown(wait=True)

    # -- one child -----------------------------------------------------------------------

    def _run_child(self, call: _Call) -> ToolResult:
        if self._halted.is_set():
            # A sibling's crash or question ends the tree's session: a child that a fan-out slot
            # freed by that sibling would reach must not start now; the resume runs it.
            raise RunStopped(f"child run {call.child!r} was not run: a sibling stopped the tree")
        child = call.child
        started = time.perf_counter()
        try:
            while True:
                ended = self._ending(call)
                if ended is not None:
                    return ended
                try:
                    return self._resume(call)
                except RunLockedError:
                    self._wait_for_holder(child)
        except BaseException:
            self._halted.set()
            raise
        finally:
            self._took[child] = (time.perf_counter() - started) * 1000

    def _ending(self, call: _Call, resumed: tuple[str, ...] = ("interrupted", "failed")) -> ToolResult | None:
        """The child's recorded ending, if it ended for good. An interruption is resumed, and so
        is a failure: this call is asked again only when its answer was never recorded (the
        tree stopped for the child's outage, or the parent died), so the child goes on."""
        child, parent = call.child, self.session.run_id
        try:
            history = History.load(child, self.store.load(child))
        except RunNotFoundError:
            # Deleted while the parent was stopped (allowed) or by hand: its answer is lost either way.
            raise child_gone(parent, child, self.store, call.step, call.position, "the call that started it can get no answer") from None
        finished = history.finished
        if finished is None or finished.status in resumed:
            return None
        self.bill.counted(child)
        return summary_result(child, finished.status, finished.output, finished.error)

    def _wait_for_holder(self, child: str) -> None:
        """Another process or thread (a worker) resumes the child: wait until its lease is free."""
        stop = self.session.hooks.stop
        while self.store.holder(child) is not None or held_here(self.store, child):
            if stop is not None:
                stop.check()
            time.sleep(_POLL)

    def _child_hooks(self, call: _Call, stop: LinkedStop) -> RunHooks:
        """The hooks of a child run: the parent's deciders (naming the child where they can),
        a display of its own inside the parent's, the parent's stop and the crash aimed at it."""
        hooks = self.session.hooks
        ask, approve = hooks.deciders_for(call.child, stop) if hooks.deciders_for is not None else (hooks.ask, hooks.approve)
        point = hooks.child_crash.below(self.children.index(call.child) + 1) if hooks.child_crash is not None else None
        crash = point.here(call.child) if point is not None else None
        return RunHooks(
            ask=ask, approve=approve, prices=hooks.prices, sleep=hooks.sleep, stop=stop,
            observer=hooks.child_observer(call.child, call.step, stop),
            before_step=_both(hooks.child_before_step, crash), child_before_step=hooks.child_before_step,
            child_crash=point if point is not None and point.children else None, deciders_for=hooks.deciders_for,
            while_waiting=hooks.while_waiting,
        )  # fmt: skip

    def _resume(self, call: _Call) -> ToolResult:
        child = call.child
        hooks = self.session.hooks
        stop = self.stops[child] = LinkedStop(hooks.stop)
        settings = AgentSettings.from_json(History.load(child, self.store.load(child)).settings)
        registry = with_delegate(child_registry(self.registry, [t["name"] for t in settings.tools]), settings)
        child_hooks = self._child_hooks(call, stop)
        try:
            with leaving_others():  # a worker's thread of this process may resume it: never take it over
                result = self.runs.go_on(
                    child, self.session.client, registry, self.store, self.session.options, child_hooks,
                    SessionAsks(Change(), None, True, None),
                )  # fmt: skip
        except (InDoubtError, DecisionNeededError, RunLockedError):
            # A step of the child waits for a person (in_doubt='fail', nobody to ask): the tree
            # stops with it, this call unanswered, so the decision reaches the parent on resume.
            raise
        except RetriesExhaustedError as e:
            # An outage outlasted the child's retries: the tree stops with it, this call
            # unanswered, so a resume of the parent once the service is back resumes the child
            # from its last step. Told to the model, a new child would pay for its steps again.
            parent = self.session.run_id
            raise RetriesExhaustedError(
                f"run {parent!r} stopped: its child run {child!r} kept failing to reach the model ({e.__cause__ or e}). "
                f"Nothing recorded is lost: resume it with resume_agent({parent!r}) when the service recovers, "
                "and the child goes on from its last step.",
                run_id=parent,
            ) from None
        except RunError as e:
            # A child that recorded its ending says it as a replay of it would (the error's own
            # words tell a person to resume the child, which can no longer reach this call).
            return self._ending(call, ("interrupted",)) or ToolResult(f"The child run {child!r} failed: {e}", is_error=True)
        except KeyboardInterrupt as e:
            parent_stop = hooks.stop
            if parent_stop is not None and parent_stop.requested:
                return ToolResult(f"The child run {child!r} was stopped with its parent.", is_error=True)
            if stop.asked_alone:  # a person stopped this child alone: that is its outcome
                return result_of(child, "interrupted", "", str(e) or "stopped")
            raise  # a worker's stop, Ctrl-C: the parent stops too, and its resume resumes the child
        finally:
            self.stops.pop(child, None)
        self.bill.counted(child)
        return result_of(child, result.status, result.text, result.detail)

def _both(first: StepStarting | None, second: StepStarting | None) -> StepStarting | None:
    """One ``before_step`` hook calling ``first`` then ``second`` (either may be None)."""
    if first is None or second is None:
        return first or second

    def both(position: int, view: StepView) -> None:
        first(position, view)
        second(position, view)

    return both
