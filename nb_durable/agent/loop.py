"""The durable agent loop: every model call and every tool call is a step of one run.

The loop of the seed design, barely changed: each turn asks the model (the model seam) and
answers its tool calls (the tool seam), both through ``run_step`` (see ``seams``). The
conversation is never stored: it is rebuilt, turn by turn, from the recorded replies and
tool results, so each event grows with its own step's result and replay of a finished run
sends no request at all (docs/design.md, "Replay").

Around that core: the run's settings are recorded when it starts, so ``resume_agent``
needs only the run id; transient model failures are retried inside the model step with
every attempt recorded; an external tool cut off by a crash is settled by the in-doubt
policy (skip by default: the model is told the outcome is unknown and can check), and every
tool_use is answered before the next model call, as the API requires.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.codec import request_hash
from ..core.events import RunOutcome
from ..core.log import EventLog
from ..core.runs import read_summary
from ..core.stores import StoreSpec, opened
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
from .cost import Cost, price_for
from .hooks import RunHooks
from .models.base import Model
from .retry import RetryPolicy
from .seams import ModelSeam, ToolSeam
from .settings import (
    DEFAULT_IN_DOUBT,
    DEFAULT_MAX_TOKENS,
    DEFAULT_MAX_TURNS,
    DEFAULT_MODEL,
    DEFAULT_SYSTEM,
    IN_DOUBT_CHOICES,
    AgentSettings,
    InDoubtChoice,
    run_id_for,
)
from .tools import ToolRegistry, builtin_tools
from .views import RunView, StepView, message_text

__all__ = ["AgentResult", "RecordedModel", "resume_agent", "run_agent"]


@dataclass(frozen=True, slots=True)
class AgentResult:
    """How a run ended, and what this session paid and replay saved."""

    run_id: str
    status: RunOutcome
    text: str
    stop_reason: str | None
    turns: int
    replayed_steps: int
    live_steps: int
    cost: Cost
    location: str
    elapsed: float
    """Seconds this session took."""


def run_agent(
    task: str,
    *,
    run_id: str | None = None,
    client: Model,
    model: str = DEFAULT_MODEL,
    tools: ToolRegistry | None = None,
    store: StoreSpec = None,
    workspace: str | os.PathLike[str] = ".",
    system: str = DEFAULT_SYSTEM,
    max_turns: int = DEFAULT_MAX_TURNS,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    approve_bash: str | None = None,
    retry: RetryPolicy | None = None,
    in_doubt: InDoubtChoice = DEFAULT_IN_DOUBT,
    hooks: RunHooks | None = None,
) -> AgentResult:
    """Run an agent on ``task`` as durable run ``run_id``; replay what it already recorded.

    A run id that already exists with the same settings is replayed and continued; with
    other settings it is a ``SettingsMismatchError`` (choose a new id). ``client`` answers
    model requests (``AnthropicModel``, ``DemoModel``, ``ScriptedModel``). ``tools``
    defaults to the built-ins, confined to ``workspace``. ``hooks`` carry the caller's
    deciders (ask, approve), its display (observer) and its prices.
    """
    registry = tools if tools is not None else ToolRegistry(builtin_tools(approve_bash=approve_bash))
    settings = AgentSettings(
        task=task,
        model=model,
        model_kind=getattr(client, "name", "custom"),
        system=system,
        max_turns=max_turns,
        max_tokens=max_tokens,
        workspace=str(Path(workspace).resolve()),
        tools=tuple(registry.schemas()),
        approve_bash=approve_bash,
        retry=retry or RetryPolicy(),
        sources=registry.sources(),
    )
    session = _Run(run_id or run_id_for(task), settings, client, registry, in_doubt, hooks or RunHooks())
    with opened(store) as opened_store:
        return session.go(opened_store, check_identity=True)


def resume_agent(
    run_id: str,
    *,
    client: Model | None = None,
    tools: ToolRegistry | None = None,
    store: StoreSpec = None,
    max_turns: int | None = None,
    in_doubt: InDoubtChoice = DEFAULT_IN_DOUBT,
    hooks: RunHooks | None = None,
) -> AgentResult:
    """Resume run ``run_id`` with every setting taken from its log.

    The model backend is rebuilt from the log too (the API, or the demo model) unless
    ``client`` is given; a run that used custom tools needs them passed again as ``tools``.
    """
    with opened(store) as opened_store:
        try:
            settings = AgentSettings.from_json(read_summary(run_id, opened_store).settings)
        except ValueError as e:
            raise RunError(
                f"run {run_id!r} is not an agent run ({e}); inspect it with read_run()", run_id=run_id
            ) from None
        if max_turns is not None:
            settings = settings.but(max_turns=max_turns)
        registry = tools if tools is not None else ToolRegistry(builtin_tools(approve_bash=settings.approve_bash))
        missing = sorted({t["name"] for t in settings.tools} - {t["name"] for t in registry.schemas()})
        if missing:
            raise RunError(
                f"run {run_id!r} used tools this process does not have: {', '.join(missing)}. "
                "Pass the same tools= it was started with.",
                run_id=run_id,
            )
        model = client if client is not None else RecordedModel(settings.model_kind, run_id)
        session = _Run(run_id, settings, model, registry, in_doubt, hooks or RunHooks())
        return session.go(opened_store, check_identity=client is not None or tools is not None)


def _default_client(model_kind: str, run_id: str) -> Model:
    if model_kind == "anthropic":
        from .models.anthropic import AnthropicModel

        return AnthropicModel()
    if model_kind == "demo":
        from .models.demo import DemoModel

        return DemoModel()
    raise RunError(
        f"run {run_id!r} was run with a {model_kind!r} model, which cannot be rebuilt from the "
        "log: pass the same model as client=",
        run_id=run_id,
    )


class RecordedModel:
    """The backend a recorded run used, built only when a live call needs it: replaying a
    finished run needs no model at all, whatever kind it was."""

    def __init__(self, model_kind: str, run_id: str) -> None:
        self.name = model_kind
        self._run_id = run_id
        self._model: Model | None = None

    def create(self, request: Mapping[str, Any], on_text: Any = None) -> dict[str, Any]:
        if self._model is None:
            self._model = _default_client(self.name, self._run_id)
        return self._model.create(request, on_text)


class _Run:
    """One session of one run: the loop, and the bookkeeping its displays need."""

    def __init__(
        self,
        run_id: str,
        settings: AgentSettings,
        client: Model,
        registry: ToolRegistry,
        in_doubt: InDoubtChoice,
        hooks: RunHooks,
    ) -> None:
        if in_doubt not in IN_DOUBT_CHOICES:
            raise ValueError(f"in_doubt must be 'ask', 'rerun', 'skip' or 'fail', not {in_doubt!r}")
        self.run_id = run_id
        self.settings = settings
        self.hooks = hooks
        self.price = price_for(settings.model, hooks.prices)
        self.cost = Cost()
        self.replayed = 0
        self.live = 0
        self.turns = 0
        self.started = time.monotonic()
        self.view = RunView(run_id, "running", task=settings.task, model=settings.model, model_kind=settings.model_kind)
        self.model = ModelSeam(self, client, settings.retry)
        self.tools = ToolSeam(self, registry, Path(settings.workspace), in_doubt, settings.retry)

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
        if ran:
            self.live += 1
        else:
            self.replayed += 1
        if view.usage is not None:
            self.cost = self.cost.add(view.usage, self.price, replayed=not ran)
        self.hooks.show_step(view)
        self._run_changed()

    # -- the run -------------------------------------------------------------------------

    def go(self, store: Any, *, check_identity: bool) -> AgentResult:
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
            self._run_changed(location=log.location)
            try:
                text, stop_reason, status, error = self._loop(log)
            except KeyboardInterrupt:
                log.finish_run("interrupted", error="interrupted by the user")
                # Interrupted inside an external tool, the run is in doubt, not just interrupted.
                self._run_changed(status=log.status, error="interrupted by the user")
                raise
            except InDoubtError as e:
                # No run_finished: readers see the run as in doubt until someone decides.
                self._run_changed(status="in_doubt", error=str(e))
                raise
            except (ModelError, DecisionNeededError) as e:
                raise self._failure(log, e) from e
            if self.live or log.status != status:
                # A session that only replayed a finished run writes nothing.
                output = {"text": text, "stop_reason": stop_reason, "turns": self.turns, "cost": self.cost.to_json()}
                log.finish_run(status, output=output, error=error)
            self._run_changed(status=status, text=text, stop_reason=stop_reason, error=error or "")
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

    def _loop(self, log: EventLog) -> tuple[str, str | None, RunOutcome, str | None]:
        settings = self.settings
        messages: list[dict[str, Any]] = [{"role": "user", "content": settings.task}]
        tool_schemas = [dict(t) for t in settings.tools]
        static: dict[str, Any] = {"model": settings.model, "max_tokens": settings.max_tokens, "system": settings.system}
        if tool_schemas:
            static["tools"] = tool_schemas
        # The request hash is chained (each turn hashes the previous hash and the messages
        # added since), so pinning every request costs O(its new content), not O(conversation).
        chain, hashed = request_hash(static), 0
        for turn in range(settings.max_turns):
            request: dict[str, Any] = {**static, "messages": list(messages)}
            chain, hashed = request_hash([chain, messages[hashed:]]), len(messages)
            reply = self.model.call(log, turn, request, chain)
            self.turns = turn + 1
            message = reply["message"]
            content = [_strip_none(block) for block in message.get("content") or []]
            messages.append({"role": "assistant", "content": content})
            stop = message.get("stop_reason")
            tool_uses = [b for b in content if b.get("type") == "tool_use"]
            if stop == "tool_use" or (tool_uses and stop != "max_tokens"):
                messages.append({"role": "user", "content": self.tools.answer(log, turn, tool_uses)})
                continue
            if stop == "max_tokens" and tool_uses:
                # A tool call cut off mid-input cannot run; say so, and let the model retry smaller.
                messages.append({"role": "user", "content": [_cut_off(b, settings.max_tokens) for b in tool_uses]})
                continue
            if stop == "pause_turn":
                continue  # the API paused a long turn: sending the conversation back resumes it
            return self._final(message, stop), stop, "completed", None
        return (
            "",
            None,
            "interrupted",
            f"reached the limit of {settings.max_turns} turns; resume with a higher max_turns to go on",
        )

    def _final(self, message: dict[str, Any], stop: str | None) -> str:
        text = message_text(message)
        notes = {
            "max_tokens": f"[the answer was cut off at max_tokens={self.settings.max_tokens}]",
            "refusal": "[the model declined to continue this task]",
            "model_context_window_exceeded": "[the conversation filled the model's context window; "
            "fork the run at an earlier step or start a narrower one]",
        }
        note = notes.get(stop or "")
        return f"{text}\n\n{note}".strip() if note else text


def _strip_none(block: dict[str, Any]) -> dict[str, Any]:
    """A content block as the next request sends it: the SDK's ``exclude_none`` dump."""
    return {k: (_strip_none(v) if isinstance(v, dict) and k != "input" else v) for k, v in block.items() if v is not None}


def _cut_off(block: dict[str, Any], max_tokens: int) -> dict[str, Any]:
    return {
        "type": "tool_result",
        "tool_use_id": block["id"],
        "content": f"This {block.get('name')} call was cut off at max_tokens={max_tokens} before its input "
        "was complete, so it did not run. Call it again with a smaller input.",
        "is_error": True,
    }
