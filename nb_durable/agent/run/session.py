"""One session of one agent run: the turn loop, its stopping points, and its bookkeeping.

Each turn asks the model (the model seam) and answers its tool calls (the tool seam), both
through ``run_step``. The conversation is never stored: it is rebuilt from the recorded
replies, tool results, settings changes and follow-ups, so replay of a finished run sends no
request at all.

Before every model call is a *point* where the run may change course, each change a
recorded step replayed in place (``points``): ``settings:N`` (a resume's new model,
max_tokens, thinking or budget, recorded as a decision) and ``user:N`` (a follow-up).

A turn that ends without tool calls ends the run: *completed* only for ``end_turn``; a reply
cut off by ``max_tokens`` is *truncated*, a refusal *refused*, a full context window
*context_full* (see ``outcomes``). Resuming such a run records, at the point after the
stopped reply, either ``continue`` (a truncated reply is kept and the model asked to go on)
or ``reask`` (the reply is dropped and the turn asked again, with the new limit or model).
Budgets are checked before each live model call (``model_call.refusal``).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import replace
from functools import partial
from typing import Any

from ...core.codec import request_hash
from ...core.events import RunOutcome, RunStarted
from ...core.holders import Asking
from ...core.log import EventLog
from ...core.status import Status
from ...errors import (
    InDoubtError,
    ModelError,
    RunFailedError,
)
from ..delegation.spawn import ChildRuns, Delegation
from ..display.views import (
    SESSION,
    StepView,
    Tally,
    ended_status,
    error_said,
    message_text,
    run_view_of,
    starting_view,
    unfinished,
)
from ..models.base import Model
from ..models.stops import UNKNOWN_STOP, refused_as_too_long
from ..money.cost import Cost
from ..secrets.redaction import redact_known
from ..settings import AgentSettings, Change, SessionOptions
from ..tools import ToolRegistry
from ..workspace.names import folder_of_shown
from . import identity, model_call
from .batch_step import batch_mode
from .compaction import Compaction, compacted
from .fallback import models_asked, resumed_live, switched_to
from .hooks import RunHooks
from .identity import EndpointChangedWarning
from .outcomes import AgentResult, ending_outcome, explain, failed_error, tools_recorded
from .points import CONTINUE_TEXT, Points, SessionAsks, Stopped
from .request import complete_blocks, cut_off, fixed_request, sendable, strip_none, with_user_text
from .seams import ModelSeam, ToolSeam
from .stopping import recorded_wording

__all__ = ["EndpointChangedWarning", "RunSession"]


class RunSession:
    """One session of one run: the loop, and the bookkeeping its displays need."""

    def __init__(
        self,
        run_id: str,
        settings: AgentSettings,
        options: SessionOptions,
        client: Model,
        registry: ToolRegistry,
        hooks: RunHooks,
        asks: SessionAsks | None = None,
    ) -> None:
        self.run_id = run_id
        self.asks = asks or SessionAsks()
        # What holds for this session only (a turn limit, caching) is never recorded.
        settings = settings.but(**self.asks.change.for_session())
        self.settings = settings
        """The settings the run recorded, with this session's own."""
        self.current = settings
        """The settings the next model call is made with: ``settings`` and the recorded changes so far."""
        self.options = options
        self.client = client
        self.hooks = hooks
        self.tally = Tally()
        """What this session's steps add up to: replayed ones saved, live ones paid."""
        self.turns = 0  # the run's model turns: its replies, not its model steps
        self.last_step_live = False
        self.started = time.monotonic()
        self._header = {"task": settings.task, "model": settings.model, "model_kind": settings.model_kind}
        self.view = starting_view(run_id, self._header)
        """The run as this session shows it: the one builder of a run's view, over this session's steps."""
        self.model_seam = ModelSeam(self, client, settings.retry)
        self.model_seam.stall_timeout = options.stall_timeout
        self.model_seam.resumed_model = self.asks.change.values.get("model")
        self.tool_seam = ToolSeam(self, registry, folder_of_shown(settings.workspace), options.in_doubt, settings.retry)
        self.points = Points(self)
        self.compaction = Compaction(self)
        self.strict = registry.strict_names()
        self.delegation: Delegation | None = None
        """The run's delegate calls (``agent.delegation``), while ``go`` runs a run that has them."""
        self.child_runs: ChildRuns | None = None
        """How this session's children are made and run (set by ``loop``)."""
        self._log: EventLog | None = None  # the run's log while ``go`` has it open
        self._started: RunStarted | None = None  # its start, once ``go`` opened it (a child's parent and trace)
        self._unfinished = ""  # once the loop ended: the log's unfinished steps, in words (``views.unfinished``)

    # -- displays ------------------------------------------------------------------------

    def _run_changed(
        self, *, status: Status | None = None, location: str | None = None, error: str | None = None, output: Any = None
    ) -> None:
        """Show the run as it is now: built from this session's tally, with what changed."""
        view = self.view
        self.view = run_view_of(
            self.run_id,
            self._header,
            self.tally,
            status=view.status if status is None else status,
            scope=SESSION,
            location=view.location if location is None else location,
            elapsed=time.monotonic() - self.started,
            output=output if output is not None else {"text": view.text, "stop_reason": view.stop_reason},
            error=view.error if error is None else error,
            started=self._started,
        )
        if self._unfinished:
            self.view = replace(self.view, unfinished=self._unfinished)
        if self.delegation is not None and self.delegation.children:
            # The header bills the whole tree: what the children recorded in this session counts too.
            own = self.view.cost
            tree = own + self.delegation.bill.spent_this_session()
            self.view = replace(self.view, cost=tree, own=own, children=len(self.delegation.children))
        self.hooks.show_run(self.view)

    def step_done(self, view: StepView, ran: bool) -> None:
        """A step ended, live (``ran``), replayed, or settled in doubt: count it, price it, show it."""
        self.last_step_live = ran
        self.tally = self.tally.counted(view, self.current.model, self.hooks.prices)  # priced as views.views_of prices it
        self.hooks.show_step(view)
        self._run_changed()

    def _counted(self, log: EventLog) -> tuple[str, str | None, RunOutcome, str]:
        """The loop; however it ends, the header then counts every step the log holds, as its readers
        do: also one left unfinished (cut off, failed, in doubt; ``Tally.ended``), which no ``step_done`` counted."""
        try:
            return self._loop(log)
        except model_call.Overspent as e:  # a step's broken streams spent what its next attempt needed
            return "", None, "budget_exhausted", str(e)
        finally:
            steps = log.steps  # made from the whole history on each read
            self._unfinished = unfinished(steps)[1]
            self.tally = self.tally.ended(steps, self.current.model, self.hooks.prices)
            self._run_changed()

    def waiting(self, asking: Asking | None) -> None:
        """The run waits for a person's answer to ``asking``, or goes on again (None): the one
        place ``waiting`` is derived, shown here and marked on the run's lease for every reader."""
        if self._log is not None:
            self._log.writer.mark_asking(asking)
        self._run_changed(status=Status.WAITING if asking is not None else Status.RUNNING)

    @property
    def cost(self) -> Cost:
        """What this session paid, and what its replay saved."""
        return self.tally.cost

    # -- the run -------------------------------------------------------------------------

    def go(self, store: Any, *, check_identity: bool) -> AgentResult:
        """Replay what the run recorded, go on live, and record how this session ended."""
        identity.check_can_go(self.run_id, self.settings, self.asks.change)
        with (
            EventLog(self.run_id, store, in_doubt="fail", scrub=redact_known) as log,
            self._delegating(log.store),
            # A run keeps the mode it recorded, whatever this session asks: a step recorded in a
            # Message Batch is polled there, never asked again.
            batch_mode(self.model_seam, self.run_id, bool((log.settings or self.settings.to_json()).get("batch_api"))),
        ):
            self._log = log
            self.model_seam.budget_after = lambda request, more: model_call.refusal(self, log, request, spent=self.cost + more)
            recorded = log.start_run(self.settings.to_json())
            self._started = log.writer.history.started
            # What the run says in its own words is as its log recorded it, whatever this session's settings.
            self.tool_seam.wording = recorded_wording(recorded)
            if check_identity:
                identity.check_identity(self.run_id, self.settings, recorded)
                self.settings, change = identity.asked_again(self.settings, recorded)
                self.current = self.settings
                if change:
                    self.asks = self.asks.but(change=Change({**change.values, **self.asks.change.values}))
            identity.check_endpoint(self.run_id, self.client, recorded)
            self._run_changed(location=log.location)
            try:
                text, stop_reason, status, detail = self._counted(log)
            except KeyboardInterrupt as e:
                why = str(e) or "interrupted by the user"  # a worker's stop says who stopped it
                log.finish_run("interrupted", error=why)
                # Interrupted inside an external tool, the run is in doubt, not just interrupted.
                self._run_changed(status=Status(log.status), error=why)
                raise
            except InDoubtError as e:
                # No run_finished: readers see the run as in doubt until someone decides.
                self._run_changed(status=Status.IN_DOUBT, error=str(e))
                raise
            except (ModelError, RunFailedError) as e:
                raise self._failure(log, e) from e
            except BaseException as e:
                # A crash (simulated or a store's), or a bug: every observer hears the session
                # ended, so a trace's spans end and a display stops saying "running".
                self._run_changed(status=ended_status(e, self.view), error=log.scrub(error_said(e)))
                raise
            if self.tally.live or log.status != status:
                # A session that only replayed a finished run writes nothing, whatever its limits.
                output = {
                    "text": text,
                    "stop_reason": stop_reason,
                    "turns": self.turns,
                    "cost": self.cost.to_json(),
                }
                log.finish_run(status, output=output, error=detail or None)
            self._run_changed(status=Status(status), output={"text": text, "stop_reason": stop_reason}, error=detail)
            return AgentResult(
                self.run_id,
                status,
                text,
                stop_reason,
                self.turns,
                self.tally.replayed,
                self.tally.live,
                self.cost,
                log.location,
                time.monotonic() - self.started,
                detail,
            )

    @contextlib.contextmanager
    def _delegating(self, store: Any) -> Iterator[None]:
        """The run's delegation while the session runs; its children are stopped when it ends."""
        if not self.settings.delegate or self.child_runs is None:
            yield
            return
        self.delegation = Delegation(self, self.tool_seam.registry, store, self.child_runs)
        try:
            yield
        finally:
            self.delegation.close()

    def _failure(self, log: EventLog, error: ModelError | RunFailedError) -> RunFailedError:
        """Record the run as failed; the error to raise says what to fix before resuming."""
        log.finish_run("failed", error=str(error))
        self._run_changed(status=Status.FAILED, error=log.scrub(str(error)))
        asked = models_asked(self.current.model, log)
        return failed_error(self.run_id, error, max_attempts=self.settings.retry.max_attempts, models=asked)

    # -- the loop ------------------------------------------------------------------------

    def _loop(self, log: EventLog) -> tuple[str, str | None, RunOutcome, str]:
        messages: list[dict[str, Any]] = [{"role": "user", "content": self.settings.task}]
        fixed = fixed_request(self.current)
        # The request hash is chained (each turn hashes the previous hash and what was added
        # since), so pinning every request costs O(its new content), not O(conversation).
        chain, hashed = request_hash(fixed), 0
        turn, since_user = 0, 0
        stopped: Stopped | None = None
        cut = 0  # the messages answered by a model the run has since moved away from
        again, settings_at, users_at = False, 0, 0  # again: the point once more, past a compaction an earlier session saw fail
        while True:
            # -- the point before model call `turn`: its recorded changes and follow-ups in the
            # order recorded, then this session's (points.py).
            if not again:
                settings_at = users_at = 0
            while True:
                settings_step = self.points.settings(log, turn, settings_at, stopped)
                if settings_step is not None:
                    settings_at += 1
                    changes = settings_step.get("changes") or {}
                    if changes:
                        if "model" in changes:
                            cut = len(messages)
                        self.current = self.current.but(**changes)
                        fixed = fixed_request(self.current)
                        chain = request_hash([chain, {"settings": changes}])
                    # Only a decision about the stopped turn (continue, reask) takes the run past it.
                    if stopped is not None and settings_step.get("action") in ("continue", "reask"):
                        if stopped.outcome == "bad_tool_input":
                            self.tool_seam.invalid.clear()
                        if settings_step.get("action") == "continue":
                            kept = complete_blocks(stopped.message.get("content") or [])
                            if kept:
                                messages.append({"role": "assistant", "content": kept})
                            with_user_text(messages, CONTINUE_TEXT)
                        stopped = None
                    continue
                follow_up = self.points.user(log, turn, users_at)
                if follow_up is None:
                    break
                users_at += 1
                if stopped is not None:
                    kept = complete_blocks(stopped.message.get("content") or [])
                    if kept:
                        messages.append({"role": "assistant", "content": kept})
                    stopped = None
                with_user_text(messages, follow_up)
                since_user = 0
            self.model_seam.fallbacks = self.current.fallback_models
            self.model_seam.fallback_after = self.current.fallback_after
            if not again and self.compaction.due(log, turn, messages, stopped, partial(sendable, fixed, messages, "off", cut, self.strict)):
                again = self.compaction.recorded_done(log, turn)
                if not log.replaying or resumed_live(log):
                    # A summarising call is paid like any other: the budget must cover it first.
                    refusal = model_call.refusal(self, log, self.compaction.request(fixed, messages))
                    if refusal:
                        return "", None, "budget_exhausted", refusal
                chain, hashed = request_hash([chain, messages[hashed:]]), len(messages)
                result = self.compaction.run(log, turn, fixed, messages, chain)
                fixed, chain, cut = self._switched(log, fixed, chain, cut, len(messages))
                if result is not None:  # the summary replaces the prefix; the turn is asked (again) on it
                    messages = compacted(self.settings.task, messages, result)
                    cut = max(0, cut - int(result["replaced"]) + 1)
                    summary = {"compacted": result["replaced"], "summary": message_text(result["message"])}
                    chain, hashed, stopped = request_hash([chain, summary]), len(messages), None
                elif again and stopped is not None:
                    continue  # so a resume may ask the turn again (with another model) past it
            again = False
            if stopped is not None:
                return self._ended(stopped)
            live = not log.replaying
            if live and since_user >= self.current.max_turns:
                limit = self.current.max_turns
                return "", None, "interrupted", f"reached the limit of {limit} turns; resume with a higher max_turns to go on"
            chain, hashed = request_hash([chain, messages[hashed:]]), len(messages)
            request = sendable(fixed, messages, self.current.caching(), cut, self.strict)
            if live or resumed_live(log):
                refusal = model_call.refusal(self, log, request)
                if refusal:
                    return "", None, "budget_exhausted", refusal
            if live:
                self.hooks.check_stop()
            reply = self.model_seam.call(log, turn, request, chain)
            fixed, chain, cut = self._switched(log, fixed, chain, cut, len(messages))
            turn += 1  # the step ids of recorded runs count every model step, a refused one too
            message = reply["message"]
            answered = not refused_as_too_long(message)  # no reply, so no turn: it spends none of max_turns
            since_user += answered
            self.turns += answered
            content = [strip_none(block) for block in message.get("content") or []]
            stop = message.get("stop_reason")
            ending = ending_outcome(stop, unknown=bool(reply.get(UNKNOWN_STOP)))
            tool_uses = [b for b in content if b.get("type") == "tool_use"]
            # A reply stopped short (cut at max_tokens or by a full context window, refused) may
            # end in a tool call whose input never finished, or that the model was stopped from
            # making: it must not run. The stop's own outcome decides (compact, fall back, end),
            # unless the log records that its calls ran (an earlier version ran them): replay that.
            runs_tools = ending == "completed" or (stop != "max_tokens" and tools_recorded(log, turn - 1))
            if stop == "tool_use" or (tool_uses and runs_tools):
                messages.append({"role": "assistant", "content": content})
                messages.append({"role": "user", "content": self.tool_seam.answer(log, turn - 1, tool_uses)})
                over = self.tool_seam.invalid.over(self.current.max_invalid_tool_calls)
                if over is not None:
                    # Held like a stopped reply (with nothing to send back): a resume's point goes on past it.
                    held: dict[str, Any] = {"content": [], "stop_reason": None, "tool": over[0], "invalid": over[1]}
                    stopped = Stopped("bad_tool_input", held, self.last_step_live)
                continue
            if stop == "max_tokens" and tool_uses:
                # A tool call cut off mid-input cannot run; say so, and let the model retry smaller.
                messages.append({"role": "assistant", "content": content})
                messages.append({"role": "user", "content": [cut_off(b, self.current.max_tokens) for b in tool_uses]})
                continue
            if stop == "pause_turn":
                messages.append({"role": "assistant", "content": content})
                continue  # the API paused a long turn: sending the conversation back resumes it
            stopped = Stopped(ending, {**message, "content": content}, self.last_step_live)

    def _switched(self, log: EventLog, fixed: dict[str, Any], chain: str, cut: int, upto: int) -> tuple[dict[str, Any], str, int]:
        """After a model step: moved to a fallback model, the run stays there, live and on replay alike."""
        moved = switched_to(log.record_at(log.cursor - 1, result=False).decisions)
        if moved is None:
            return fixed, chain, cut
        self.current = self.current.but(model=moved)
        return fixed_request(self.current), request_hash([chain, {"settings": {"model": moved}}]), upto

    def _ended(self, stopped: Stopped) -> tuple[str, str | None, RunOutcome, str]:
        message = stopped.message
        detail = explain(stopped.outcome, message, max_tokens=self.current.max_tokens)
        if stopped.outcome == "context_full" and self.compaction.failed:
            detail = f"{detail} Compacting the conversation failed: {self.compaction.failed}"
        return message_text(message), message.get("stop_reason"), stopped.outcome, detail
