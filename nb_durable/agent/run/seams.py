"""The two seams where the agent meets the world, each call through ``run_step``.

The model seam is step ``model:{turn}``: one Messages API request (retried inside the step
on transient failures, every attempt recorded), idempotent, its reply the result. The tool
seam is step ``tool:{turn}:{i}:{tool_use_id}``, with the tool's own effect kind, preceded by
a recorded ``approval:...`` step when the call needs a person's approval. What a step
computes never depends on replay: these seams hand back the recorded result or the live
one, exactly as ``run_step`` does. Three things do look at replay, each for a reason: a
stop is checked, and a budget or a shared limit waited on, only before a live step (a
replayed one costs nothing and cannot be cut off halfway), and a point records what a
session brings only where the log has nothing more to replay (``points``).

A live model call is a ``ModelCall`` (``model_call``).

Displays hear of each step through the run's hooks, outside what is recorded: a finished
step's view is built from its record (``views.view_of``), so a live step looks exactly as it
will when shown again from the log.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ...core.context import current_step
from ...core.holders import Asking
from ...core.in_doubt import OutcomeUnknown
from ...core.log import EventLog, run_step
from ...core.steps import StepRecord
from ...errors import DecisionNeededError, InDoubtError, ModelError, NobodyToAskError
from ..delegation.tool import DELEGATE
from ..display.views import StepId, StepState, StepView, ToolCall, pending_view, view_of
from ..fleet.shared_limits import SharedLimits
from ..models.base import Model
from ..models.message_batches import Member
from ..models.retry import RetryPolicy
from ..money.cost import Cost
from ..secrets.environment import environment
from ..settings import InDoubtChoice
from ..tools import ToolContext, ToolRegistry
from ..tools.bad_input import InvalidCalls
from .hooks import RunHooks, who
from .model_call import ModelCall
from .stopping import cut_off_text

if TYPE_CHECKING:
    from ..delegation.spawn import Delegation

__all__ = ["ModelSeam", "Session", "ToolSeam"]


class Session(Protocol):
    """What the seams report to: the run's bookkeeping."""

    run_id: str
    hooks: RunHooks
    delegation: Delegation | None

    def step_done(self, view: StepView, ran: bool) -> None:
        """A step ended, live (``ran``) or replayed."""

    def waiting(self, asking: Asking | None) -> None:
        """The run waits for a person's answer to ``asking``, or goes on again (None)."""


def _finished(log: EventLog, state: StepState, call: ToolCall | None, retry: RetryPolicy) -> StepView:
    """The view of the step the log just recorded or replayed (the one before the cursor)."""
    return view_of(log.record_at(log.cursor - 1), state=state, call=call, max_attempts=retry.max_attempts)


class ModelSeam:
    """The model call of each turn, as a recorded step."""

    def __init__(self, session: Session, client: Model, retry: RetryPolicy) -> None:
        self.session = session
        self.client = client
        self.retry = retry
        self.limits: SharedLimits | None = None
        """The endpoint's shared limits, if the session has any: every live attempt waits on them."""
        self.fallbacks: tuple[str, ...] = ()
        """The models to move on to when one keeps failing overloaded (the run's current chain)."""
        self.fallback_after = 3
        self.resumed_model: str | None = None  # a resume's model: its first unfinished model step moves to it (fallback.road)
        self.stall_timeout: float | None = None
        """Seconds a streamed call may go silent before its attempt fails (transient)."""
        self.budget_after: Callable[[dict[str, Any], Cost], str] | None = None
        """Why a call may not be tried again once its broken streams spent ``Cost`` more than the
        session has counted ('' if it may): the session's budget (``model_call.refusal``), while it runs."""
        self.batches: Member | None = None
        """In batch mode (``batch_api``), the run in the gatherer each live call's request goes through (``batch_step``)."""

    def call(
        self,
        log: EventLog,
        turn: int,
        request: dict[str, Any],
        digest: str,
        *,
        step: StepId | None = None,
        shape: Callable[[dict[str, Any] | ModelError], dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """The reply of turn ``turn``: recorded, or asked for live. ``step``: another step
        than ``model:turn`` made of a model call (a compaction), whose ``shape`` makes the
        result recorded of a live reply, or of the error that ended its attempts."""
        live = ModelCall(self, step or StepId.model(turn), request)

        def run() -> dict[str, Any]:
            if shape is None:
                return live.run()
            try:
                return shape(live.run())
            except ModelError as e:
                return shape(e)

        try:
            reply: dict[str, Any] = run_step(log, str(live.step), run, effect="idempotent", request_hash=digest)
        except ModelError as e:
            live.show(state="failed", error=str(e))
            raise
        except KeyboardInterrupt:
            # Stopped, not failed: the log holds the step unfinished, which a reader draws cut off.
            live.show(state="cut_off", error="interrupted; the call is asked again on resume")
            raise
        self.session.step_done(_finished(log, "live" if live.ran else "replayed", None, self.retry), live.ran)
        return reply


class ToolSeam:
    """The tool calls of a turn (and their approvals), each a recorded step."""

    def __init__(
        self, session: Session, registry: ToolRegistry, workspace: Path, in_doubt: InDoubtChoice, retry: RetryPolicy
    ) -> None:
        self.session = session
        self.registry = registry
        self.workspace = workspace
        self.in_doubt = in_doubt
        self.wording = 1
        """The run's recorded wording version (``cut_off``): the session sets it once the log is open."""
        self.retry = retry
        self.invalid = InvalidCalls(registry)
        """The run's calls with input their tool's schema refuses, per tool (live and replayed alike)."""

    def answer(self, log: EventLog, turn: int, tool_uses: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """A tool_result for every tool_use of a turn, in order (the API requires all of them)."""
        results = []
        if self.session.delegation is not None:
            self.session.delegation.start_turn(log, turn, tool_uses)
        for index, block in enumerate(tool_uses):
            if not log.replaying:
                self.session.hooks.check_stop()
            name = block.get("name", "")
            self.invalid.saw(name, block.get("input"))
            call = ToolCall(name, block.get("input"), self.registry.label_of(name))
            tool_use_id = block["id"]
            denied = self._approval(log, StepId.approval(turn, index, tool_use_id), call)
            if denied is not None:
                results.append({"type": "tool_result", "tool_use_id": tool_use_id, "content": denied, "is_error": True})
                continue
            result = self._tool(log, StepId.tool(turn, index, tool_use_id), call)
            results.append({"type": "tool_result", "tool_use_id": tool_use_id, **result})
        return results

    def _tool(self, log: EventLog, step: StepId, call: ToolCall) -> dict[str, Any]:
        hooks = self.session.hooks
        step_id = str(step)
        view = pending_view(step, call)
        tool = self.registry.get(call.name)
        ran = False

        def context() -> ToolContext:
            running = current_step()
            key = running.key if running is not None else log.idempotency_key(step_id)
            return ToolContext(self.workspace, self.session.run_id, step_id, key, environment(), stop=hooks.stop)

        def run() -> dict[str, Any]:
            nonlocal ran
            ran = True
            running = current_step()
            hooks.show_step(view)
            position = running.position if running is not None else log.cursor
            hooks.starting(position, view)
            delegation = self.session.delegation
            if delegation is not None and call.name == DELEGATE:
                return delegation.answer(step.index).to_json()
            result = self.registry.run(call.name, call.input, context()).to_json()
            hooks.effect_ran(position, view)
            return result

        check: Callable[[], dict[str, Any] | None] | None = None
        if tool is not None and tool.check is not None:

            def check() -> dict[str, Any] | None:
                found = self.registry.check(call.name, call.input, context())
                return None if found is None else found.to_json()

        effect = self.registry.effect_of(call.name)
        try:
            outcome = run_step(
                log,
                step_id,
                run,
                effect=effect,
                request={"name": call.name, "input": call.input},
                in_doubt=self._in_doubt_policy(step, call),
                check=check,
            )
        except KeyboardInterrupt:
            if effect == "external":
                # A step of the log from now on (readers count it): the header counts it as its row.
                self.session.step_done(view.but(state="in_doubt", error="interrupted while running: outcome unknown"), False)
            else:
                hooks.show_step(view.but(state="cut_off", error="interrupted; it runs again on resume"))
            raise
        except (InDoubtError, DecisionNeededError) as e:
            self.session.step_done(view.but(state="in_doubt", error=str(e)), False)
            raise
        if isinstance(outcome, OutcomeUnknown):
            result = {"content": cut_off_text(call.name, log, step_id, self.wording), "is_error": True}
            # Counted with the run's steps (neither replayed nor live), as a reader of the log counts it.
            self.session.step_done(view.but(state="skipped", output=result["content"], is_error=True), False)
            return result
        done = _finished(log, "live" if ran else "replayed", call, self.retry)
        delegation = self.session.delegation
        if ran and delegation is not None and call.name == DELEGATE:
            # The step's own time is how long the run waited for the answer: for the second of two
            # children run side by side, next to nothing, as the first one's wait held its run.
            done = done.but(ms=delegation.took(step.index, done.ms))
        note = tool.source.get("replay_note") if tool is not None and tool.source and not ran else None
        if note:
            # Replay hands back what a call returned, not what it did to a process's memory.
            done = done.but(title=f"{done.title} ({note})")
        self.session.step_done(done, ran)
        return {"content": outcome["content"], "is_error": bool(outcome.get("is_error"))}

    def _in_doubt_policy(self, step: StepId, call: ToolCall) -> Any:
        if self.in_doubt != "ask":
            return self.in_doubt
        session = self.session

        def decide(record: StepRecord) -> tuple[str, ...]:
            asker = session.hooks.ask
            if asker is None:
                raise DecisionNeededError(
                    f"step {record.step_id!r} of run {session.run_id!r} is in doubt: its process died "
                    "while the tool ran. Nobody can be asked here; resume with in_doubt='skip' "
                    "(the model is told the outcome is unknown), 'rerun' or 'fail'.",
                    run_id=session.run_id,
                )
            session.hooks.show_step(pending_view(step, call).but(state="in_doubt"))
            session.waiting(Asking.now(record.step_id, "in_doubt", call.name))
            try:
                answer = asker(record, call.input)
                return answer if isinstance(answer, tuple) else (answer, who())
            except NobodyToAskError as e:
                raise DecisionNeededError(
                    f"step {record.step_id!r} of run {session.run_id!r} is in doubt and {e}", run_id=session.run_id
                ) from None
            finally:
                session.waiting(None)

        return decide

    def _approval(self, log: EventLog, step: StepId, call: ToolCall) -> str | None:
        """Ask a person before a tool call that needs approval; the answer is a recorded step."""
        reason = self.registry.needs_approval(call.name, call.input)
        if not reason:
            return None
        session = self.session
        step_id = str(step)
        view = pending_view(step, call)
        ran = False

        def decide() -> dict[str, Any]:
            nonlocal ran
            ran = True
            nobody = (
                f"run {session.run_id!r} wants to call {call.name} with {call.input!r}, which needs a "
                f"person's approval ({reason}), and nobody can be asked here"
            )
            if session.hooks.approve is None:
                raise DecisionNeededError(
                    f"{nobody}. Run it where someone can answer (a notebook), or turn that approval rule "
                    "off (approve_bash).",
                    run_id=session.run_id,
                )
            running = current_step()
            session.hooks.show_step(view.but(state="waiting"))
            position = running.position if running is not None else log.cursor
            session.hooks.starting(position, view)
            session.waiting(Asking.now(step_id, "approval", call.name))
            try:
                answer = session.hooks.approve(call.name, call.input, reason)
            except NobodyToAskError as e:
                raise DecisionNeededError(f"{nobody}: {e}", run_id=session.run_id) from None
            finally:
                session.waiting(None)
            session.hooks.effect_ran(position, view)
            log.record_decision(step_id, "approved" if answer.approved else "denied", by=answer.by, note=answer.note)
            return {"approved": answer.approved, "by": answer.by, "note": answer.note}

        try:
            verdict = run_step(log, step_id, decide, request={"name": call.name, "input": call.input})
        except DecisionNeededError as e:
            # The log holds the approval as failed: its row must say so, not still wait for an answer nobody was asked.
            session.hooks.show_step(view.but(state="failed", error=str(e)))
            raise
        session.step_done(_finished(log, "live" if ran else "replayed", call, self.retry), ran)
        if verdict.get("approved"):
            return None
        note = f": {verdict['note']}" if verdict.get("note") else ""
        return f"The person reviewing this session denied this {call.name} call ({reason}){note}. Do not retry it."
