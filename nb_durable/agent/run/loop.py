"""Running an agent durably: start a run, resume it, or continue it with a follow-up.

Every model call and every tool call is a step of one run (the loop is in ``session``). The
run's settings travel as one value: ``AgentSettings`` (recorded when the run starts, so
``resume_agent`` needs only the run id), ``SessionOptions`` (how this session goes, never
recorded) and, for a resume or a follow-up, a ``Change``. Any setting of the table may also
be named as a keyword (``max_turns=5``), over those values: the entry points take no list
of their own. What a resume changes (another model, a higher limit, a larger budget) and
what a follow-up says (``continue_agent``) are recorded as steps too, so the whole run
still replays.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...core.holders import locked_message
from ...core.runs import read_summary
from ...core.status import Status
from ...core.stores import StoreSpec, opened
from ...core.writing.interrupts import interrupts_watched
from ...errors import NotAnAgentRunError, RunError, RunLockedError, RunNotFinishedError, SettingError
from ..delegation.spawn import ChildRuns
from ..delegation.tool import with_delegate
from ..fleet.shared_limits import SharedLimits
from ..models.base import Model, endpoint_of
from ..money.budget import input_tokens
from ..settings import AgentSettings, Change, InDoubtChoice, SessionOptions
from ..settings.rows import sort_values
from ..tools import ToolRegistry, builtin_tools
from .hooks import RunHooks
from .identity import recorded_workspace
from .outcomes import AgentResult
from .points import SessionAsks
from .prepare import PreparedRun, run_id_for
from .session import RunSession

__all__ = [
    "AgentResult",
    "RecordedModel",
    "continue_agent",
    "recorded_settings",
    "recorded_workspace",
    "resume_agent",
    "run_agent",
    "run_prepared",
]


def run_agent(
    task: str,
    *,
    client: Model,
    settings: AgentSettings | None = None,
    options: SessionOptions | None = None,
    tools: ToolRegistry | None = None,
    store: StoreSpec = None,
    hooks: RunHooks | None = None,
    run_id: str | None = None,
    in_doubt: InDoubtChoice | None = None,
    **values: Any,
) -> AgentResult:
    """Run an agent on ``task`` as durable run ``run_id``; replay what it already recorded.

    A run id that already exists with the same settings is replayed and continued; with
    other settings it is a ``SettingsMismatchError`` (choose a new id). ``client`` answers
    model requests (``AnthropicModel``, ``DemoModel``, ``ScriptedModel``). ``tools``
    defaults to the built-ins, confined to the settings' ``workspace``. ``settings`` are what
    the run records (its task is ``task``), ``options`` how this session goes (``in_doubt``,
    the limits shared through the store); any setting of either may be given by name instead
    (``model=``, ``max_turns=``, ``max_usd=``, ``workspace=``, ``tokens_per_minute=``, ...),
    each checked as the settings table says; ``in_doubt`` (the policy for a step a crash cut
    off) is the one spelled out. ``hooks`` carry the
    caller's deciders (ask, approve), its display (observer) and its prices.
    """
    interrupts_watched()  # from here a Ctrl-C that Python swallows (opening the store) is sent again
    recorded, session = sort_values("run_agent", {**values, "in_doubt": in_doubt}, AgentSettings, SessionOptions)
    settings = (settings or AgentSettings(task=task)).but(task=task, **recorded)
    options = (options or SessionOptions()).but(**session)
    registry = tools if tools is not None else ToolRegistry(builtin_tools(approve_bash=settings.approve_bash))
    registry = with_delegate(registry, settings)
    session_ = RunSession(
        run_id or run_id_for(task), recorded_settings(settings, client, registry), options, client, registry, hooks or RunHooks()
    )
    session_.child_runs = CHILD_RUNS
    with opened(store) as opened_store:
        session_.model_seam.limits = SharedLimits.of(options, opened_store, client, session_.hooks.sleep)
        return session_.go(opened_store, check_identity=True)


def run_prepared(
    prepared: PreparedRun, *, tools: ToolRegistry | None = None, store: StoreSpec = None, hooks: RunHooks | None = None
) -> AgentResult:
    """Run what a front end prepared (``prepare_run``): its id, model, settings and options."""
    return run_agent(
        prepared.settings.task,
        run_id=prepared.run_id,
        client=prepared.client,
        settings=prepared.settings,
        options=prepared.options,
        tools=tools,
        store=store,
        hooks=hooks,
    )


def recorded_settings(settings: AgentSettings, client: Model, registry: ToolRegistry) -> AgentSettings:
    """What a run records for ``settings``: with the backend, tools and endpoint it runs with."""
    return settings.but(
        model_kind=getattr(client, "name", "custom"),
        workspace=recorded_workspace(settings.workspace),
        tools=tuple(registry.schemas()),
        endpoint=endpoint_of(client),
        sources=registry.sources(),
    )


def resume_agent(
    run_id: str,
    *,
    client: Model | None = None,
    change: Change | None = None,
    options: SessionOptions | None = None,
    tools: ToolRegistry | None = None,
    store: StoreSpec = None,
    hooks: RunHooks | None = None,
    resumed_by: str | None = None,
    in_doubt: InDoubtChoice | None = None,
    recorded: Mapping[str, Any] | None = None,
    **values: Any,
) -> AgentResult:
    """Resume run ``run_id`` with every setting taken from its log.

    The model backend is rebuilt from the log too (the API, or the demo model) unless
    ``client`` is given; a run that used custom tools needs them passed again as ``tools``.
    ``change`` (or its settings by name: ``model=``, ``max_tokens=``, ``thinking=``,
    ``max_usd=``, ``max_run_tokens=``) changes the run from here on, each change recorded as
    a decision; ``max_turns=`` and ``cache_ttl=`` hold for this session only. A setting a resume
    may not change (``workspace=``) may be given again with the value the run recorded; another
    value is a ``SettingError`` naming the recorded one. A truncated,
    refused, full or over-budget run goes on from the turn that stopped it. ``options`` (or
    ``in_doubt=``, ``max_concurrent_calls=``, ``tokens_per_minute=``) are as for
    ``run_agent``. ``resumed_by`` (a worker's ``host:pid``) is recorded as a decision at the
    run's next point, so readers see who took it. ``recorded`` is the settings the run started
    with (``RunSummary.settings``) when the caller has just read them, as a worker has: its log
    is then not read again for them before the run's lease is taken.
    """
    change, options = _change_and_options("resume_agent", change, options, {**values, "in_doubt": in_doubt})
    return _go_on(run_id, client, tools, store, options, hooks, SessionAsks(change, None, True, resumed_by), recorded)


def continue_agent(
    run_id: str,
    message: str,
    *,
    client: Model | None = None,
    change: Change | None = None,
    options: SessionOptions | None = None,
    tools: ToolRegistry | None = None,
    store: StoreSpec = None,
    hooks: RunHooks | None = None,
    in_doubt: InDoubtChoice | None = None,
    **values: Any,
) -> AgentResult:
    """Give finished run ``run_id`` a follow-up ``message`` (recorded as a step) and go on.

    The run must have ended (completed, or stopped short: truncated, refused, ...); one that
    failed or was interrupted is resumed first. ``change`` and ``options`` (or their settings
    by name) are as for ``resume_agent``; ``max_turns`` counts turns from the follow-up.
    """
    if not message.strip():
        raise SettingError(setting="message", value=message, reason="must say what the agent should do next (it is empty)")
    change, options = _change_and_options("continue_agent", change, options, {**values, "in_doubt": in_doubt})
    interrupts_watched()
    with opened(store) as opened_store:
        summary = read_summary(run_id, opened_store)
        if not Status(summary.status).finished:
            if summary.holder is not None:  # resuming it first would be refused for the same writer
                raise RunLockedError(locked_message(run_id, summary.holder), run_id=run_id, holder=summary.holder)
            raise RunNotFinishedError(run_id=run_id, status=summary.status)
        asks = SessionAsks(change, message, False)
        return _go_on(run_id, client, tools, opened_store, options, hooks, asks, summary.settings)


def _change_and_options(
    call: str, change: Change | None, options: SessionOptions | None, values: Mapping[str, Any]
) -> tuple[Change, SessionOptions]:
    """A change and options from the values given and the settings named (``Change`` refuses
    a setting that cannot change when a run goes on)."""
    changed, session = sort_values(call, values, AgentSettings, SessionOptions)
    return Change({**(change.values if change else {}), **changed}), (options or SessionOptions()).but(**session)


def _go_on(
    run_id: str,
    client: Model | None,
    tools: ToolRegistry | None,
    store: StoreSpec,
    options: SessionOptions,
    hooks: RunHooks | None,
    asks: SessionAsks,
    recorded: Mapping[str, Any] | None = None,
) -> AgentResult:
    interrupts_watched()
    with opened(store) as opened_store:
        try:
            # The settings a run started with never change once written: read already (a
            # worker's look, a follow-up's check), they need no second read of the whole log.
            if recorded is None:
                recorded = read_summary(run_id, opened_store).settings
            settings = AgentSettings.from_json(recorded)
        except ValueError as e:
            raise NotAnAgentRunError(run_id=run_id, why=str(e)) from None
        registry = (
            tools if tools is not None else ToolRegistry(builtin_tools(approve_bash=settings.approve_bash))
        )
        registry = with_delegate(registry, settings)
        missing = sorted({t["name"] for t in settings.tools} - {t["name"] for t in registry.schemas()})
        if missing:
            raise RunError(
                f"run {run_id!r} used tools this process does not have: {', '.join(missing)}. "
                "Pass the same tools= it was started with.",
                run_id=run_id,
            )
        model = client if client is not None else RecordedModel(settings.model_kind, run_id)
        session = RunSession(run_id, settings, options, model, registry, hooks or RunHooks(), asks)
        session.child_runs = CHILD_RUNS
        session.model_seam.limits = SharedLimits.of(options, opened_store, model, session.hooks.sleep)
        return session.go(opened_store, check_identity=client is not None or tools is not None)


CHILD_RUNS = ChildRuns(recorded_settings, _go_on)
"""How a session's delegate calls make and run their child runs (``agent.delegation``)."""


def _default_client(model_kind: str, run_id: str) -> Model:
    # Only the backend the run recorded is imported, and only when a live call needs it.
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
        self._backend: Model | None = None

    @property
    def backend(self) -> Model:
        """The backend itself, built on first use."""
        if self._backend is None:
            self._backend = _default_client(self.name, self._run_id)
        return self._backend

    def create(
        self, request: Mapping[str, Any], on_text: Any = None, on_thinking: Any = None
    ) -> dict[str, Any]:
        return self.backend.create(request, on_text=on_text, on_thinking=on_thinking)

    def message_batches(self) -> Any:
        """The backend's Message Batches (batch mode), if it has them."""
        factory = getattr(self.backend, "message_batches", None)
        if factory is None:
            raise RunError(
                f"run {self._run_id!r} is in batch mode (batch_api), which needs the Message Batches API; "
                f"the {self.name} model has none: run it with the real API, or without batch_api",
                run_id=self._run_id,
            )
        return factory()

    def count_tokens(self, request: Mapping[str, Any]) -> int:
        """The backend's count of a request's input tokens (an estimate if it cannot count)."""
        return input_tokens(self.backend, request)

    def endpoint(self) -> dict[str, str]:
        return endpoint_of(self.backend)
