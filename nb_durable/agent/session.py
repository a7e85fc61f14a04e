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
Budgets are checked before each live model call (``budget``).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..core.codec import request_hash
from ..core.events import RunOutcome
from ..core.log import EventLog
from ..errors import (
    DecisionNeededError,
    InDoubtError,
    ModelCallError,
    ModelError,
    RetriesExhaustedError,
    RunError,
    RunFailedError,
    SettingsMismatchError,
    TransientModelError,
)
from .budget import Budget, input_tokens
from .changes import CONTINUE_TEXT, Changes, Stopped
from .cost import Cost
from .hooks import RunHooks
from .models.base import Model, endpoint_of, public_url
from .outcomes import AgentResult, ending_outcome, explain
from .points import Points
from .prices import price_for, price_of_reply
from .request import complete_blocks, fixed_request, sendable, with_user_text
from .seams import ModelSeam, ToolSeam
from .settings import IN_DOUBT_CHOICES, AgentSettings, InDoubtChoice
from .tools import ToolRegistry
from .views import RunView, StepView, message_text

__all__ = ["EndpointChangedWarning", "RunSession"]



class EndpointChangedWarning(UserWarning):
    """A run resumed against another endpoint or kind of credential than it was recorded with."""


class RunSession:
    """One session of one run: the loop, and the bookkeeping its displays need."""

    def __init__(
        self,
        run_id: str,
        settings: AgentSettings,
        client: Model,
        registry: ToolRegistry,
        in_doubt: InDoubtChoice,
        hooks: RunHooks,
        changes: Changes | None = None,
    ) -> None:
        if in_doubt not in IN_DOUBT_CHOICES:
            raise ValueError(f"in_doubt must be 'ask', 'rerun', 'skip' or 'fail', not {in_doubt!r}")
        self.run_id = run_id
        self.settings = settings
        self.current = settings
        self.client = client
        self.hooks = hooks
        self.changes = changes or Changes()
        self.cost = Cost()
        self.replayed = 0
        self.live = 0
        self.turns = 0
        self.last_step_live = False
        self.started = time.monotonic()
        self.view = RunView(
            run_id, "running", task=settings.task, model=settings.model, model_kind=settings.model_kind
        )
        self.model = ModelSeam(self, client, settings.retry)
        self.tools = ToolSeam(self, registry, Path(settings.workspace), in_doubt, settings.retry)
        self.points = Points(self)

    # -- displays ------------------------------------------------------------------------

    def _run_changed(self, **changes: Any) -> None:
        self.view = self.view.but(
            steps=self.replayed + self.live,
            replayed=self.replayed,
            live=self.live,
            turns=self.turns,
            elapsed=time.monotonic() - self.started,
            cost=self.cost,
            **changes,
        )
        self.hooks.show_run(self.view)

    def step_done(self, view: StepView, ran: bool) -> None:
        """A step ended, live (``ran``) or replayed: count it, price it, show it."""
        self.last_step_live = ran
        if ran:
            self.live += 1
        else:
            self.replayed += 1
        if view.usage is not None:
            # By the model that answered, as the log's readers price it (views.views_of).
            price = price_of_reply({"model": view.model}, self.current.model, self.hooks.prices)
            self.cost = self.cost.add(view.usage, price, replayed=not ran)
        self.hooks.show_step(view)
        self._run_changed()

    # -- the run -------------------------------------------------------------------------

    def go(self, store: Any, *, check_identity: bool) -> AgentResult:
        """Replay what the run recorded, go on live, and record how this session ended."""
        workspace = Path(self.settings.workspace)
        if not workspace.is_dir():
            raise RunError(
                f"the workspace of run {self.run_id!r}, {workspace}, is not a folder: create it "
                "or pass another workspace",
                run_id=self.run_id,
            )
        with EventLog(self.run_id, store, in_doubt="fail") as log:
            recorded = log.start_run(self.settings.to_json())
            if check_identity:
                self._check_identity(recorded)
            self._check_endpoint(recorded)
            self._run_changed(location=log.location)
            try:
                text, stop_reason, status, detail = self._loop(log)
            except KeyboardInterrupt as e:
                why = str(e) or "interrupted by the user"  # a worker's stop says who stopped it
                log.finish_run("interrupted", error=why)
                # Interrupted inside an external tool, the run is in doubt, not just interrupted.
                self._run_changed(status=log.status, error=why)
                raise
            except InDoubtError as e:
                # No run_finished: readers see the run as in doubt until someone decides.
                self._run_changed(status="in_doubt", error=str(e))
                raise
            except (ModelError, DecisionNeededError) as e:
                raise self._failure(log, e) from e
            if self.live or log.status != status:
                # A session that only replayed a finished run writes nothing, whatever its limits.
                output = {
                    "text": text,
                    "stop_reason": stop_reason,
                    "turns": self.turns,
                    "cost": self.cost.to_json(),
                }
                log.finish_run(status, output=output, error=detail or None)
            self._run_changed(status=status, text=text, stop_reason=stop_reason, error=detail, detail=detail)
            return AgentResult(
                self.run_id,
                status,
                text,
                stop_reason,
                self.turns,
                self.replayed,
                self.live,
                self.cost,
                log.location,
                time.monotonic() - self.started,
                detail,
            )

    def _check_identity(self, recorded: dict[str, Any]) -> None:
        try:
            before = AgentSettings.from_json(recorded).identity()
        except ValueError:
            before = {}
        now = self.settings.identity()
        changed = sorted(k for k in now if before.get(k) != now[k])
        if changed:
            raise SettingsMismatchError(
                run_id=self.run_id,
                changed=changed,
                recorded=", ".join(f"{k}={str(before.get(k))[:60]!r}" for k in changed),
                requested=", ".join(f"{k}={str(now[k])[:60]!r}" for k in changed),
            )

    def _check_endpoint(self, recorded: dict[str, Any]) -> None:
        before = dict(recorded.get("endpoint") or {})
        if "url" in before:  # a run recorded before URLs were made public kept its userinfo
            before["url"] = public_url(str(before["url"]))
        now = endpoint_of(self.client)
        if before and now and dict(before) != now:
            warnings.warn(
                f"run {self.run_id!r} was recorded against {_said(before)} and now goes to {_said(now)}; "
                "its replayed steps are unchanged, but live calls now go elsewhere.",
                EndpointChangedWarning,
                stacklevel=4,
            )

    def _failure(self, log: EventLog, error: ModelError | DecisionNeededError) -> RunFailedError:
        """Record the run as failed; the error to raise says what to fix before resuming."""
        log.finish_run("failed", error=str(error))
        self._run_changed(status="failed", error=str(error))
        if isinstance(error, DecisionNeededError):
            return error
        if isinstance(error, TransientModelError):
            return RetriesExhaustedError(
                f"run {self.run_id!r} stopped: the model kept failing after "
                f"{self.settings.retry.max_attempts} attempts ({error}). Nothing recorded is "
                "lost: resume the run when the service recovers.",
                run_id=self.run_id,
            )
        return ModelCallError(
            f"run {self.run_id!r} failed: {str(error).rstrip('. ')}. Then resume the run; completed steps will "
            "not repeat.",
            run_id=self.run_id,
            status=error.status,
        )

    # -- the loop ------------------------------------------------------------------------

    def _fixed(self) -> dict[str, Any]:
        s = self.current
        return fixed_request(
            model=s.model,
            max_tokens=s.max_tokens,
            system=s.system,
            tools=s.tools,
            thinking=s.thinking,
            effort=s.effort,
        )

    def _loop(self, log: EventLog) -> tuple[str, str | None, RunOutcome, str]:
        messages: list[dict[str, Any]] = [{"role": "user", "content": self.settings.task}]
        fixed = self._fixed()
        # The request hash is chained (each turn hashes the previous hash and what was added
        # since), so pinning every request costs O(its new content), not O(conversation).
        chain, hashed = request_hash(fixed), 0
        turn, since_user = 0, 0
        stopped: Stopped | None = None
        while True:
            # -- the point before model call `turn`: recorded changes, or this session's.
            settings_step = self.points.settings(log, turn, stopped)
            if settings_step is not None:
                changes = settings_step.get("changes") or {}
                if changes:
                    self.current = self.current.but(**changes)
                    fixed = self._fixed()
                    chain = request_hash([chain, {"settings": changes}])
                # Only a decision about the stopped turn (continue, reask) takes the run past it.
                if stopped is not None and settings_step.get("action") in ("continue", "reask"):
                    if settings_step.get("action") == "continue":
                        kept = complete_blocks(stopped.message.get("content") or [])
                        if kept:
                            messages.append({"role": "assistant", "content": kept})
                        with_user_text(messages, CONTINUE_TEXT)
                    stopped = None
            follow_up = self.points.user(log, turn, stopped)
            if follow_up is not None:
                if stopped is not None:
                    kept = complete_blocks(stopped.message.get("content") or [])
                    if kept:
                        messages.append({"role": "assistant", "content": kept})
                    stopped = None
                with_user_text(messages, follow_up)
                since_user = 0
            if stopped is not None:
                return self._ended(stopped)
            live = not log.replaying
            if live and since_user >= self.current.max_turns:
                return (
                    "",
                    None,
                    "interrupted",
                    f"reached the limit of {self.current.max_turns} turns; resume with a higher max_turns to go on",
                )
            chain, hashed = request_hash([chain, messages[hashed:]]), len(messages)
            request = sendable(fixed, messages, self._cache_ttl())
            if live:
                refusal = self._over_budget(request)
                if refusal:
                    return "", None, "budget_exhausted", refusal
            if live:
                self.hooks.check_stop()
            reply = self.model.call(log, turn, request, chain)
            turn += 1
            since_user += 1
            self.turns = turn
            message = reply["message"]
            content = [_strip_none(block) for block in message.get("content") or []]
            stop = message.get("stop_reason")
            tool_uses = [b for b in content if b.get("type") == "tool_use"]
            if stop == "tool_use" or (tool_uses and stop != "max_tokens"):
                messages.append({"role": "assistant", "content": content})
                messages.append({"role": "user", "content": self.tools.answer(log, turn - 1, tool_uses)})
                continue
            if stop == "max_tokens" and tool_uses:
                # A tool call cut off mid-input cannot run; say so, and let the model retry smaller.
                messages.append({"role": "assistant", "content": content})
                cut = [_cut_off(b, self.current.max_tokens) for b in tool_uses]
                messages.append({"role": "user", "content": cut})
                continue
            if stop == "pause_turn":
                messages.append({"role": "assistant", "content": content})
                continue  # the API paused a long turn: sending the conversation back resumes it
            stopped = Stopped(ending_outcome(stop), {**message, "content": content}, self.last_step_live)

    def _ended(self, stopped: Stopped) -> tuple[str, str | None, RunOutcome, str]:
        message = stopped.message
        detail = explain(stopped.outcome, message, max_tokens=self.current.max_tokens)
        return message_text(message), message.get("stop_reason"), stopped.outcome, detail

    def _cache_ttl(self) -> Any:
        return self.changes.settings.get("cache_ttl") or self.current.cache_ttl

    def _over_budget(self, request: dict[str, Any]) -> str:
        budget = Budget(self.current.max_usd, self.current.max_run_tokens)
        if not budget.limited:
            return ""
        spent = self.cost.paid + self.cost.saved
        return budget.refusal(
            spent=spent,
            spent_usd=self.cost.paid_dollars + self.cost.saved_dollars,
            counted=input_tokens(self.client, request),
            max_tokens=self.current.max_tokens,
            price=price_for(self.current.model, self.hooks.prices),
            cache_ttl=str(request.get("cache_control", {}).get("ttl", "off")),
        )


def _said(endpoint: Mapping[str, Any]) -> str:
    return f"{endpoint.get('url', '?')} with {endpoint.get('credential', 'no')} credentials"


def _strip_none(block: dict[str, Any]) -> dict[str, Any]:
    """A content block as the next request sends it: the SDK's ``exclude_none`` dump."""
    return {
        k: (_strip_none(v) if isinstance(v, dict) and k != "input" else v)
        for k, v in block.items()
        if v is not None
    }


def _cut_off(block: dict[str, Any], max_tokens: int) -> dict[str, Any]:
    return {
        "type": "tool_result",
        "tool_use_id": block["id"],
        "content": f"This {block.get('name')} call was cut off at max_tokens={max_tokens} before its input "
        "was complete, so it did not run. Call it again with a smaller input.",
        "is_error": True,
    }
