"""Running an agent durably: start a run, resume it, or continue it with a follow-up.

Every model call and every tool call is a step of one run (the loop is in ``session``). The
run's settings are recorded when it starts, so ``resume_agent`` needs only the run id;
what a resume changes (another model, a higher limit, a larger budget) and what a follow-up
says (``continue_agent``) are recorded as steps too, so the whole run still replays.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...core.events import STOPPED_OUTCOMES
from ...core.runs import read_summary
from ...core.stores import StoreSpec, opened
from ...errors import RunError
from ..fleet.shared_limits import CallLimits, SharedLimits
from ..models.base import Model, endpoint_of
from ..models.retry import RetryPolicy
from ..settings import (
    DEFAULT_CACHE_TTL,
    DEFAULT_IN_DOUBT,
    DEFAULT_MAX_TOKENS,
    DEFAULT_MAX_TURNS,
    DEFAULT_MODEL,
    DEFAULT_SYSTEM,
    DEFAULT_THINKING,
    AgentSettings,
    CacheTTL,
    Effort,
    InDoubtChoice,
    ThinkingMode,
    run_id_for,
)
from ..tools import ToolRegistry, builtin_tools
from .changes import Changes
from .hooks import RunHooks
from .outcomes import AgentResult
from .session import RunSession

__all__ = ["AgentResult", "RecordedModel", "continue_agent", "resume_agent", "run_agent", "settings_for"]


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
    thinking: ThinkingMode = DEFAULT_THINKING,
    effort: Effort | None = None,
    cache_ttl: CacheTTL = DEFAULT_CACHE_TTL,
    max_usd: float | None = None,
    max_run_tokens: int | None = None,
    approve_bash: str | None = None,
    retry: RetryPolicy | None = None,
    in_doubt: InDoubtChoice = DEFAULT_IN_DOUBT,
    hooks: RunHooks | None = None,
    tags: tuple[str, ...] | list[str] = (),
    max_concurrent_calls: int | None = None,
    tokens_per_minute: int | None = None,
) -> AgentResult:
    """Run an agent on ``task`` as durable run ``run_id``; replay what it already recorded.

    A run id that already exists with the same settings is replayed and continued; with
    other settings it is a ``SettingsMismatchError`` (choose a new id). ``client`` answers
    model requests (``AnthropicModel``, ``DemoModel``, ``ScriptedModel``). ``tools``
    defaults to the built-ins, confined to ``workspace``. ``thinking`` and ``effort`` shape
    what the model does; ``cache_ttl`` what a turn costs; ``max_usd`` and ``max_run_tokens``
    stop the run before a call that could cross them. ``hooks`` carry the caller's deciders
    (ask, approve), its display (observer) and its prices. ``tags`` label the run (not part
    of its identity), for filters such as ``nb-durable worker --tag``. ``max_concurrent_calls``
    and ``tokens_per_minute`` are limits per endpoint shared by every process using the store
    (``agent.fleet.shared_limits``; not recorded, defaults from ``NB_DURABLE_MAX_CONCURRENT_CALLS`` and
    ``NB_DURABLE_TOKENS_PER_MINUTE``).
    """
    limits = CallLimits.resolve(max_concurrent_calls, tokens_per_minute)
    registry = tools if tools is not None else ToolRegistry(builtin_tools(approve_bash=approve_bash))
    settings = settings_for(
        task,
        client=client,
        registry=registry,
        model=model,
        workspace=workspace,
        system=system,
        max_turns=max_turns,
        max_tokens=max_tokens,
        thinking=thinking,
        effort=effort,
        cache_ttl=cache_ttl,
        max_usd=max_usd,
        max_run_tokens=max_run_tokens,
        approve_bash=approve_bash,
        retry=retry,
        tags=tags,
    )
    session = RunSession(
        run_id or run_id_for(task), settings, client, registry, in_doubt, hooks or RunHooks()
    )
    with opened(store) as opened_store:
        session.model.limits = SharedLimits.of(limits, opened_store, client, session.hooks.sleep)
        return session.go(opened_store, check_identity=True)


def settings_for(
    task: str,
    *,
    client: Model,
    registry: ToolRegistry,
    model: str = DEFAULT_MODEL,
    workspace: str | os.PathLike[str] = ".",
    system: str = DEFAULT_SYSTEM,
    max_turns: int = DEFAULT_MAX_TURNS,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    thinking: ThinkingMode = DEFAULT_THINKING,
    effort: Effort | None = None,
    cache_ttl: CacheTTL = DEFAULT_CACHE_TTL,
    max_usd: float | None = None,
    max_run_tokens: int | None = None,
    approve_bash: str | None = None,
    retry: RetryPolicy | None = None,
    tags: tuple[str, ...] | list[str] = (),
) -> AgentSettings:
    """The settings ``run_agent`` records for these arguments (``submit`` records the same)."""
    return AgentSettings(
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
        thinking=thinking,
        effort=effort,
        cache_ttl=cache_ttl,
        max_usd=max_usd,
        max_run_tokens=max_run_tokens,
        endpoint=endpoint_of(client),
        sources=registry.sources(),
        tags=tuple(tags),
    )


def resume_agent(
    run_id: str,
    *,
    client: Model | None = None,
    tools: ToolRegistry | None = None,
    store: StoreSpec = None,
    max_turns: int | None = None,
    model: str | None = None,
    max_tokens: int | None = None,
    thinking: ThinkingMode | None = None,
    cache_ttl: CacheTTL | None = None,
    max_usd: float | None = None,
    max_run_tokens: int | None = None,
    in_doubt: InDoubtChoice = DEFAULT_IN_DOUBT,
    hooks: RunHooks | None = None,
    resumed_by: str | None = None,
    max_concurrent_calls: int | None = None,
    tokens_per_minute: int | None = None,
) -> AgentResult:
    """Resume run ``run_id`` with every setting taken from its log.

    The model backend is rebuilt from the log too (the API, or the demo model) unless
    ``client`` is given; a run that used custom tools needs them passed again as ``tools``.
    ``model``, ``max_tokens``, ``thinking``, ``max_usd`` and ``max_run_tokens`` change the
    run from here on, each change recorded as a decision; a truncated, refused, full or
    over-budget run goes on from the turn that stopped it. ``resumed_by`` (a worker's
    ``host:pid``) is recorded as a decision at the run's next point, so readers see who took it.
    ``max_concurrent_calls`` and ``tokens_per_minute`` are as for ``run_agent`` (never recorded).
    """
    changes = {
        "model": model,
        "max_tokens": max_tokens,
        "thinking": thinking,
        "cache_ttl": cache_ttl,
        "max_usd": max_usd,
        "max_run_tokens": max_run_tokens,
    }
    limits = CallLimits.resolve(max_concurrent_calls, tokens_per_minute)
    return _go_on(
        run_id, client, tools, store, max_turns, in_doubt, hooks, Changes(changes, None, True, resumed_by), limits
    )


def continue_agent(
    run_id: str,
    message: str,
    *,
    client: Model | None = None,
    tools: ToolRegistry | None = None,
    store: StoreSpec = None,
    max_turns: int | None = None,
    model: str | None = None,
    cache_ttl: CacheTTL | None = None,
    max_usd: float | None = None,
    in_doubt: InDoubtChoice = DEFAULT_IN_DOUBT,
    hooks: RunHooks | None = None,
    max_concurrent_calls: int | None = None,
    tokens_per_minute: int | None = None,
) -> AgentResult:
    """Give finished run ``run_id`` a follow-up ``message`` (recorded as a step) and go on.

    The run must have ended (completed, or stopped short: truncated, refused, ...); one that
    failed or was interrupted is resumed first. ``max_turns`` counts turns from the follow-up.
    """
    if not message.strip():
        raise ValueError("the follow-up message is empty: say what the agent should do next")
    with opened(store) as opened_store:
        status = read_summary(run_id, opened_store).status
        if status != "completed" and status not in STOPPED_OUTCOMES:
            raise RunError(
                f"run {run_id!r} is {status}, not finished: resume it first (nb-durable resume "
                f"{run_id}, or %agent_resume {run_id}), then continue it",
                run_id=run_id,
            )
        changes = {"model": model, "cache_ttl": cache_ttl, "max_usd": max_usd}
        limits = CallLimits.resolve(max_concurrent_calls, tokens_per_minute)
        return _go_on(
            run_id, client, tools, opened_store, max_turns, in_doubt, hooks, Changes(changes, message, False), limits
        )


def _go_on(
    run_id: str,
    client: Model | None,
    tools: ToolRegistry | None,
    store: StoreSpec,
    max_turns: int | None,
    in_doubt: InDoubtChoice,
    hooks: RunHooks | None,
    changes: Changes,
    limits: CallLimits,
) -> AgentResult:
    with opened(store) as opened_store:
        try:
            settings = AgentSettings.from_json(read_summary(run_id, opened_store).settings)
        except ValueError as e:
            raise RunError(
                f"run {run_id!r} is not an agent run ({e}); inspect it with read_run()", run_id=run_id
            ) from None
        if max_turns is not None:
            settings = settings.but(max_turns=max_turns)
        registry = (
            tools if tools is not None else ToolRegistry(builtin_tools(approve_bash=settings.approve_bash))
        )
        missing = sorted({t["name"] for t in settings.tools} - {t["name"] for t in registry.schemas()})
        if missing:
            raise RunError(
                f"run {run_id!r} used tools this process does not have: {', '.join(missing)}. "
                "Pass the same tools= it was started with.",
                run_id=run_id,
            )
        model = client if client is not None else RecordedModel(settings.model_kind, run_id)
        session = RunSession(run_id, settings, model, registry, in_doubt, hooks or RunHooks(), changes)
        session.model.limits = SharedLimits.of(limits, opened_store, model, session.hooks.sleep)
        return session.go(opened_store, check_identity=client is not None or tools is not None)


def _default_client(model_kind: str, run_id: str) -> Model:
    if model_kind == "anthropic":
        from ..models.anthropic import AnthropicModel

        return AnthropicModel()
    if model_kind == "demo":
        from ..models.demo import DemoModel

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

    @property
    def model(self) -> Model:
        """The backend itself, built on first use."""
        if self._model is None:
            self._model = _default_client(self.name, self._run_id)
        return self._model

    def create(
        self, request: Mapping[str, Any], on_text: Any = None, on_thinking: Any = None
    ) -> dict[str, Any]:
        return self.model.create(request, on_text=on_text, on_thinking=on_thinking)

    def count_tokens(self, request: Mapping[str, Any]) -> int:
        """The backend's count of a request's input tokens (an estimate if it cannot count)."""
        from ..money.budget import input_tokens

        return input_tokens(self.model, request)

    def endpoint(self) -> dict[str, str]:
        return endpoint_of(self.model)
