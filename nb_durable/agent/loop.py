"""The durable agent loop: every model call and every tool call is a step of one run.

This is the reference design's loop, barely changed: the model call is step ``model:{turn}``
and each tool call ``tool:{turn}:{i}:{tool_use_id}``, both through ``run_step``. The
conversation is never stored: it is rebuilt, turn by turn, from the recorded replies and
tool results, so each event grows with its own step's result and replay of a finished run
sends no request at all. The loop never asks whether it is replaying; durability wraps the
two seams (the model call and the tool call) exactly as ``run_step`` wraps ``fn``.

Around that core: the run's settings are recorded when it starts, so ``resume_agent``
needs only the run id; transient model failures are retried inside the model step with
every attempt recorded; an external tool cut off by a crash is settled by the in-doubt
policy (skip by default: the model is told the outcome is unknown and can check), and every
tool_use is answered before the next model call, as the API requires.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..core.events import RunOutcome
from ..core.history import StepRecord
from ..core.log import EventLog, OutcomeUnknown, current_step, request_hash, run_step
from ..core.runs import read_summary
from ..core.stores import Store
from ..errors import (
    DecisionNeededError,
    DivergenceError,
    InDoubtError,
    ModelCallError,
    ModelError,
    RetriesExhaustedError,
    RunError,
    RunFailedError,
    TransientModelError,
)
from .cost import Cost, Price, Usage, price_for
from .models import Model
from .observe import Observer, RunView, StepView, message_text
from .retry import RetryPolicy, call_with_retries
from .tools import ToolContext, ToolRegistry, builtin_tools

__all__ = [
    "DEFAULT_MODEL",
    "DEFAULT_SYSTEM",
    "AgentResult",
    "AgentSettings",
    "Approval",
    "Approver",
    "InDoubtAsker",
    "resume_agent",
    "run_agent",
    "run_id_for",
]

DEFAULT_MODEL = "claude-sonnet-5-5"
DEFAULT_SYSTEM = (
    "You are a careful software agent. You work in a workspace folder through the tools you "
    "are given; paths are relative to the workspace. Look before you change anything, check "
    "your work, and end with a short report of what you found and what you changed."
)

InDoubtChoice = Literal["ask", "rerun", "skip", "fail"]


@dataclass(frozen=True, slots=True)
class Approval:
    """A person's answer to "may this tool call run?"."""

    approved: bool
    by: str = "person"
    note: str = ""


Approver = Callable[[str, Any, str], Approval]
"""(tool name, tool input, why approval is needed) -> Approval."""

InDoubtAsker = Callable[[StepRecord, Any], Literal["rerun", "skip", "fail"]]
"""(the in-doubt step, the tool input) -> what to do."""


@dataclass(frozen=True, slots=True)
class AgentSettings:
    """Everything a resume needs to rebuild a run, recorded when it starts."""

    task: str
    model: str = DEFAULT_MODEL
    model_kind: str = "anthropic"
    system: str = DEFAULT_SYSTEM
    max_turns: int = 20
    max_tokens: int = 4096
    workspace: str = "."
    tools: tuple[dict[str, Any], ...] = ()
    approve_bash: str | None = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)

    def to_json(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "model": self.model,
            "model_kind": self.model_kind,
            "system": self.system,
            "max_turns": self.max_turns,
            "max_tokens": self.max_tokens,
            "workspace": self.workspace,
            "tools": list(self.tools),
            "approve_bash": self.approve_bash,
            "retry": self.retry.to_json(),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AgentSettings:
        if "task" not in data:
            raise ValueError("these settings have no task: the run was not started by run_agent")
        return cls(
            task=str(data["task"]),
            model=str(data.get("model", DEFAULT_MODEL)),
            model_kind=str(data.get("model_kind", "anthropic")),
            system=str(data.get("system", DEFAULT_SYSTEM)),
            max_turns=int(data.get("max_turns", 20)),
            max_tokens=int(data.get("max_tokens", 4096)),
            workspace=str(data.get("workspace", ".")),
            tools=tuple(data.get("tools") or ()),
            approve_bash=data.get("approve_bash"),
            retry=RetryPolicy.from_json(data.get("retry") or {}),
        )

    def identity(self) -> dict[str, Any]:
        """What must match for a run to be replayed with these settings."""
        return {k: v for k, v in self.to_json().items() if k not in ("max_turns", "retry")}


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


def run_id_for(task: str) -> str:
    """A readable run id derived from a task's text: its first words and a hash."""
    words = re.findall(r"[a-z0-9]+", task.lower())[:5]
    digest = hashlib.sha256(task.strip().encode()).hexdigest()[:8]
    return "-".join([*words, digest]) if words else f"run-{digest}"


def run_agent(
    task: str,
    *,
    run_id: str | None = None,
    client: Model,
    model: str = DEFAULT_MODEL,
    tools: ToolRegistry | None = None,
    store: str | os.PathLike[str] | Store | None = None,
    workspace: str | os.PathLike[str] = ".",
    system: str = DEFAULT_SYSTEM,
    max_turns: int = 20,
    max_tokens: int = 4096,
    approve_bash: str | None = None,
    retry: RetryPolicy | None = None,
    in_doubt: InDoubtChoice = "skip",
    ask: InDoubtAsker | None = None,
    approve: Approver | None = None,
    observer: Observer | None = None,
    prices: Mapping[str, Price] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> AgentResult:
    """Run an agent on ``task`` as durable run ``run_id``; replay what it already recorded.

    A run id that already exists with the same settings is replayed and continued; with
    other settings it is a ``DivergenceError`` (choose a new id). ``client`` answers model
    requests (``AnthropicModel``, ``DemoModel``, ``ScriptedModel``). ``tools`` defaults to
    the built-ins, confined to ``workspace``.
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
    )
    return _Run(
        run_id or run_id_for(task), settings, client, registry, store, in_doubt, ask, approve, observer, prices, sleep
    ).go(check_identity=True)


def resume_agent(
    run_id: str,
    *,
    client: Model | None = None,
    tools: ToolRegistry | None = None,
    store: str | os.PathLike[str] | Store | None = None,
    max_turns: int | None = None,
    in_doubt: InDoubtChoice = "skip",
    ask: InDoubtAsker | None = None,
    approve: Approver | None = None,
    observer: Observer | None = None,
    prices: Mapping[str, Price] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> AgentResult:
    """Resume run ``run_id`` with every setting taken from its log.

    The model backend is rebuilt from the log too (the API, or the demo model) unless
    ``client`` is given; a run that used custom tools needs them passed again as ``tools``.
    """
    try:
        settings = AgentSettings.from_json(read_summary(run_id, store).settings)
    except ValueError as e:
        raise RunError(f"run {run_id!r} is not an agent run ({e}); inspect it with read_run()", run_id=run_id) from None
    if max_turns is not None:
        settings = AgentSettings(**{**_fields(settings), "max_turns": max_turns})
    registry = tools if tools is not None else ToolRegistry(builtin_tools(approve_bash=settings.approve_bash))
    missing = sorted({t["name"] for t in settings.tools} - {t["name"] for t in registry.schemas()})
    if missing:
        raise RunError(
            f"run {run_id!r} used tools this process does not have: {', '.join(missing)}. "
            "Pass the same tools= it was started with.",
            run_id=run_id,
        )
    model = client if client is not None else _RecordedModel(settings.model_kind, run_id)
    return _Run(run_id, settings, model, registry, store, in_doubt, ask, approve, observer, prices, sleep).go(
        check_identity=client is not None or tools is not None
    )


def default_client(model_kind: str, run_id: str) -> Model:
    """The model backend a recorded run used: the Messages API or the demo model."""
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


class _RecordedModel:
    """The backend a recorded run used, built only when a live call needs it: replaying a
    finished run needs no model at all, whatever kind it was."""

    def __init__(self, model_kind: str, run_id: str) -> None:
        self.name = model_kind
        self._run_id = run_id
        self._model: Model | None = None

    def create(self, request: Mapping[str, Any], on_text: Any = None) -> dict[str, Any]:
        if self._model is None:
            self._model = default_client(self.name, self._run_id)
        return self._model.create(request, on_text)


def _fields(settings: AgentSettings) -> dict[str, Any]:
    return {name: getattr(settings, name) for name in settings.__slots__}


class _Run:
    """One session of one run: the loop, and the bookkeeping its displays need."""

    def __init__(
        self,
        run_id: str,
        settings: AgentSettings,
        client: Model,
        registry: ToolRegistry,
        store: str | os.PathLike[str] | Store | None,
        in_doubt: InDoubtChoice,
        ask: InDoubtAsker | None,
        approve: Approver | None,
        observer: Observer | None,
        prices: Mapping[str, Price] | None,
        sleep: Callable[[float], None],
    ) -> None:
        if in_doubt not in ("ask", "rerun", "skip", "fail"):
            raise ValueError(f"in_doubt must be 'ask', 'rerun', 'skip' or 'fail', not {in_doubt!r}")
        self.run_id = run_id
        self.settings = settings
        self.client = client
        self.registry = registry
        self.store = store
        self.in_doubt = in_doubt
        self.ask = ask
        self.approve = approve
        self.observer = observer or Observer()
        self.price = price_for(settings.model, prices)
        self.sleep = sleep
        self.cost = Cost()
        self.replayed = 0
        self.live = 0
        self.turns = 0
        self.started = time.monotonic()
        self.view = RunView(run_id, "running", task=settings.task, model=settings.model, model_kind=settings.model_kind)

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
        self.observer.run_changed(self.view)

    def _step_done(self, view: StepView, ran: bool) -> None:
        if ran:
            self.live += 1
        else:
            self.replayed += 1
        if view.usage is not None:
            self.cost = self.cost.add(view.usage, self.price, replayed=not ran)
        self.observer.step_changed(view.but(state="live" if ran else "replayed"))
        self._run_changed()

    # -- the run -------------------------------------------------------------------------

    def go(self, *, check_identity: bool) -> AgentResult:
        workspace = Path(self.settings.workspace)
        if not workspace.is_dir():
            raise RunError(
                f"the workspace of run {self.run_id!r}, {workspace}, is not a folder: create it "
                "or pass another workspace",
                run_id=self.run_id,
            )
        with EventLog(self.run_id, self.store, in_doubt="fail") as log:
            recorded = log.start_run(self.settings.to_json())
            if check_identity:
                self._check_identity(recorded)
            self._run_changed(location=log.location)
            try:
                text, stop_reason, status, error = self._loop(log, workspace)
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
            raise DivergenceError(
                f"run {self.run_id!r} already exists with other settings ({', '.join(changed)} "
                "differ). Use a new run id to start afresh, or resume it as recorded.",
                run_id=self.run_id,
                position=0,
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

    def _loop(self, log: EventLog, workspace: Path) -> tuple[str, str | None, RunOutcome, str | None]:
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
            reply = self._model_step(log, turn, request, chain)
            self.turns = turn + 1
            message = reply["message"]
            content = [_strip_none(block) for block in message.get("content") or []]
            messages.append({"role": "assistant", "content": content})
            stop = message.get("stop_reason")
            tool_uses = [b for b in content if b.get("type") == "tool_use"]
            if stop == "tool_use" or (tool_uses and stop != "max_tokens"):
                messages.append({"role": "user", "content": self._tool_steps(log, turn, tool_uses, workspace)})
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

    # -- the model seam ------------------------------------------------------------------

    def _model_step(self, log: EventLog, turn: int, request: dict[str, Any], digest: str) -> dict[str, Any]:
        step_id = f"model:{turn}"
        view = StepView(step_id, "model", turn, "in_flight", f"model turn {turn}")
        ran = False

        def call() -> dict[str, Any]:
            nonlocal ran, view
            ran = True
            context = current_step()
            assert context is not None
            self.observer.step_changed(view)
            streamed: list[str] = []

            def on_text(text: str) -> None:
                nonlocal view
                streamed.append(text)
                view = view.but(output="".join(streamed))
                self.observer.step_changed(view)

            def on_failure(attempt: int, error: TransientModelError, delay: float | None) -> None:
                nonlocal view
                streamed.clear()
                context.record_attempt_failed(
                    attempt, type(error).__name__, message=str(error), status=error.status, delay=delay
                )
                view = view.but(
                    state="retrying" if delay is not None else "failed",
                    attempt=attempt,
                    max_attempts=self.settings.retry.max_attempts,
                    error=str(error),
                    output="",
                )
                self.observer.step_changed(view)

            def attempt() -> dict[str, Any]:
                nonlocal view
                if view.state == "retrying":
                    view = view.but(state="in_flight")
                    self.observer.step_changed(view)
                return self.client.create(request, on_text=on_text)

            try:
                return call_with_retries(attempt, self.settings.retry, on_failure=on_failure, sleep=self.sleep)
            except TransientModelError:
                raise  # on_failure recorded it, with its status
            except ModelError as e:
                # Record the refusal with its status (the core would record only its type).
                context.record_attempt_failed(
                    context.attempts + 1, type(e).__name__, message=str(e), status=e.status, delay=None
                )
                raise

        try:
            reply: dict[str, Any] = run_step(log, step_id, call, effect="idempotent", request_hash=digest)
        except ModelError as e:
            self.observer.step_changed(view.but(state="failed", error=str(e)))
            raise
        except KeyboardInterrupt:
            self.observer.step_changed(view.but(state="failed", error="interrupted; the call is asked again on resume"))
            raise
        message = reply["message"]
        attempts = log.failed_attempts(log.cursor - 1)
        self._step_done(
            view.but(
                output=message_text(message),
                usage=Usage.of(message),
                stop_reason=message.get("stop_reason"),
                attempt=attempts + 1 if attempts else 0,
                max_attempts=self.settings.retry.max_attempts if attempts else 0,
            ),
            ran,
        )
        return reply

    # -- the tool seam -------------------------------------------------------------------

    def _tool_steps(
        self, log: EventLog, turn: int, tool_uses: list[dict[str, Any]], workspace: Path
    ) -> list[dict[str, Any]]:
        results = []
        for index, block in enumerate(tool_uses):
            name, tool_input, tool_use_id = block.get("name", ""), block.get("input"), block["id"]
            denied = self._approval_step(log, turn, index, name, tool_input, tool_use_id)
            if denied is not None:
                results.append({"type": "tool_result", "tool_use_id": tool_use_id, "content": denied, "is_error": True})
                continue
            result = self._tool_step(log, turn, index, name, tool_input, tool_use_id, workspace)
            results.append({"type": "tool_result", "tool_use_id": tool_use_id, **result})
        return results

    def _tool_step(
        self, log: EventLog, turn: int, index: int, name: str, tool_input: Any, tool_use_id: str, workspace: Path
    ) -> dict[str, Any]:
        step_id = f"tool:{turn}:{index}:{tool_use_id}"
        view = StepView(step_id, "tool", turn, "in_flight", name, input=tool_input)
        tool = self.registry.get(name)
        ran = False

        def context() -> ToolContext:
            step = current_step()
            key = step.key if step is not None else log.idempotency_key(step_id)
            return ToolContext(workspace, self.run_id, step_id, key, dict(os.environ))

        def call() -> dict[str, Any]:
            nonlocal ran
            ran = True
            self.observer.step_changed(view)
            return self.registry.run(name, tool_input, context()).to_json()

        check = None
        if tool is not None and tool.check is not None:

            def check() -> dict[str, Any] | None:
                found = self.registry.check(name, tool_input, context())
                return None if found is None else found.to_json()

        effect = self.registry.effect_of(name)
        try:
            outcome = run_step(
                log,
                step_id,
                call,
                effect=effect,
                request={"name": name, "input": tool_input},
                in_doubt=self._in_doubt_policy(name, tool_input),
                check=check,
            )
        except KeyboardInterrupt:
            if effect == "external":
                self.observer.step_changed(view.but(state="in_doubt", error="interrupted while running: outcome unknown"))
            else:
                self.observer.step_changed(view.but(state="failed", error="interrupted; it runs again on resume"))
            raise
        except (InDoubtError, DecisionNeededError) as e:
            self.observer.step_changed(view.but(state="in_doubt", error=str(e)))
            raise
        if isinstance(outcome, OutcomeUnknown):
            result = {
                "content": (
                    f"The process running this {name} call died before its result was recorded, so "
                    "whether it took effect is unknown. Check the workspace before doing it again."
                ),
                "is_error": True,
            }
            self.observer.step_changed(view.but(state="skipped", output=result["content"], is_error=True))
            return result
        result = {"content": outcome["content"], "is_error": bool(outcome.get("is_error"))}
        self._step_done(view.but(output=result["content"], is_error=result["is_error"]), ran)
        return result

    def _in_doubt_policy(self, name: str, tool_input: Any) -> Any:
        if self.in_doubt != "ask":
            return self.in_doubt
        asker = self.ask

        def decide(record: StepRecord) -> tuple[str, str]:
            if asker is None:
                raise DecisionNeededError(
                    f"step {record.step_id!r} of run {self.run_id!r} is in doubt: its process died "
                    "while the tool ran. Nobody can be asked here; resume with in_doubt='skip' "
                    "(the model is told the outcome is unknown), 'rerun' or 'fail'.",
                    run_id=self.run_id,
                )
            self.observer.step_changed(
                StepView(record.step_id, "tool", int(record.step_id.split(":")[1]), "in_doubt", name, input=tool_input)
            )
            return asker(record, tool_input), "person"

        return decide

    def _approval_step(
        self, log: EventLog, turn: int, index: int, name: str, tool_input: Any, tool_use_id: str
    ) -> str | None:
        """Ask a person before a tool call that needs approval; the answer is a recorded step."""
        reason = self.registry.needs_approval(name, tool_input)
        if not reason:
            return None
        step_id = f"approval:{turn}:{index}:{tool_use_id}"
        view = StepView(step_id, "approval", turn, "in_flight", f"approval for {name}", input=tool_input)
        ran = False

        def decide() -> dict[str, Any]:
            nonlocal ran
            ran = True
            if self.approve is None:
                raise DecisionNeededError(
                    f"run {self.run_id!r} wants to call {name} with {tool_input!r}, which needs a "
                    f"person's approval ({reason}), and nobody can be asked here. Run it where someone "
                    "can answer (a notebook), or turn that approval rule off (approve_bash).",
                    run_id=self.run_id,
                )
            self.observer.step_changed(view)
            answer = self.approve(name, tool_input, reason)
            log.record_decision(step_id, "approved" if answer.approved else "denied", by=answer.by, note=answer.note)
            return {"approved": answer.approved, "by": answer.by, "note": answer.note}

        verdict = run_step(log, step_id, decide, request={"name": name, "input": tool_input})
        approved = bool(verdict.get("approved"))
        shown = f"{'approved' if approved else 'denied'} by {verdict.get('by')}"
        self._step_done(view.but(output=shown, is_error=not approved), ran)
        if approved:
            return None
        note = f": {verdict['note']}" if verdict.get("note") else ""
        return f"The person reviewing this session denied this {name} call ({reason}){note}. Do not retry it."


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

