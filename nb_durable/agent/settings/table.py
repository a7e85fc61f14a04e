"""THE settings table: every setting of a run, once, with its type, default, help and reach.

Each field below is one row (``rows.setting``). Three sections, three values that travel
whole from a front end to the loop:

* ``AgentSettings``: what a run records when it starts, all a resume needs to rebuild it;
* ``SessionOptions``: how one session goes (its in-doubt policy, the limits it shares with
  every process using the store), never recorded;
* ``FrontEndOptions``: what a front end chooses before a run (the store, the demo model, the
  notebook's tools), which never reaches the loop.

From these rows are derived the values' checks and JSON (``rows``), the change a resume may
ask for (``change``), the CLI's flags and the magics' arguments (``flags``), the
``%config AgentMagics`` traits (``nb_durable.jupyter.flags``), and the table of
settings. Adding a setting is adding a row here, plus the code that uses it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ...core.index.rows import PRIORITIES
from ...core.stores import DEFAULT_STORE_SAID
from ..models.retry import RetryPolicy
from .rows import Setting, SettingsValue, rows_of, setting

__all__ = [
    "BATCH_CACHE_TTL",
    "CACHE_TTLS",
    "DEFAULT_CACHE_TTL",
    "DEFAULT_IN_DOUBT",
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_MAX_TURNS",
    "DEFAULT_MODEL",
    "DEFAULT_SYSTEM",
    "DEFAULT_THINKING",
    "EFFORTS",
    "GROUPS",
    "IN_DOUBT_CHOICES",
    "TABLE",
    "TERMINAL_IN_DOUBT",
    "THINKING_MODES",
    "WORDING",
    "AgentSettings",
    "CacheTTL",
    "Compaction",
    "Effort",
    "FrontEndOptions",
    "InDoubtChoice",
    "SessionOptions",
    "ThinkingMode",
]

DEFAULT_MODEL = "claude-sonnet-5-5"
DEFAULT_MAX_TURNS = 20
DEFAULT_MAX_TOKENS = 16_000
"""Room for adaptive thinking and the answer: thinking tokens count against ``max_tokens``.
16,000 keeps a non-streaming request under the SDK's ten-minute limit; models whose output
limit is lower (some 3.x models allow 8,192) need ``max_tokens`` set explicitly."""
DEFAULT_SYSTEM = (
    "You are a careful software agent. You work in a workspace folder through the tools you "
    "are given; paths are relative to the workspace. Look before you change anything, check "
    "your work, and end with a short report of what you found and what you changed."
)

InDoubtChoice = Literal["ask", "rerun", "skip", "fail"]
IN_DOUBT_CHOICES: tuple[InDoubtChoice, ...] = ("ask", "rerun", "skip", "fail")
"""What to do with a tool cut off by a crash (the ``in_doubt`` row says what each does)."""
DEFAULT_IN_DOUBT: InDoubtChoice = "skip"
TERMINAL_IN_DOUBT: tuple[InDoubtChoice, ...] = ("rerun", "skip", "fail")
"""The choices where nobody is there to ask (a terminal, a worker): all but ``ask``."""

ThinkingMode = Literal["adaptive", "off"]
THINKING_MODES: tuple[ThinkingMode, ...] = ("adaptive", "off")
"""adaptive: the model decides when and how much to think, and its thinking (the text between
tool calls on current models) comes back summarized, to be shown. off: no thinking
parameter is sent, for models without thinking."""
DEFAULT_THINKING: ThinkingMode = "adaptive"

Effort = Literal["low", "medium", "high", "xhigh", "max"]
EFFORTS: tuple[Effort, ...] = ("low", "medium", "high", "xhigh", "max")
"""``output_config.effort``: how much effort the model puts in; unset leaves the model's default."""

Compaction = Literal["auto", "off"]
"""Whether a full context window is compacted (a summarising call, a recorded step) or ends the run."""

CacheTTL = Literal["5m", "1h", "off"]
CACHE_TTLS: tuple[CacheTTL, ...] = ("5m", "1h", "off")
"""How long the API keeps the conversation's prefix cached between turns ("off": no caching).
Caching changes what a turn costs, never what it answers, so it is not part of a run's identity."""
DEFAULT_CACHE_TTL: CacheTTL = "5m"
BATCH_CACHE_TTL: CacheTTL = "1h"
"""The default in batch mode (``batch_api``): a batch's turnaround often passes five minutes, so
a 5m write would expire before the next turn could read it, paid at 1.25x and never read."""

WORDING = 2
"""The version of what a run tells the model in words of its own making (a tool call cut off:
1, every one "died"; 2, a stop says who stopped it). A run keeps the version it recorded, so
replay sends what its log's sessions sent; a log from before the setting means 1."""

GROUPS: dict[str, str] = {
    "first": "the flags most used",
    "command": "this command's own (not settings)",
    "model": "the model",
    "limits": "limits of the run",
    "shared limits": "limits shared by every process using the store, per endpoint (not recorded)",
    "tools": "tools",
    "recovery": "after a crash",
    "where": "where runs live, their labels and their place in the queue",
}
"""The groups flags are shown in, in this order (a row's ``group`` is a key)."""


@dataclass(frozen=True, slots=True)
class AgentSettings(SettingsValue):
    """Everything a resume needs to rebuild a run, recorded when it starts."""

    SECTION = "recorded"

    task: str = setting(help="what the agent should do", flag=None, minimum=1)
    model: str = setting(DEFAULT_MODEL, "the Claude model", metavar="M", minimum=1, group="first", on_resume="recorded")
    model_kind: str = setting("anthropic", "which backend answered: anthropic, demo, or a custom model's name", flag=None)
    system: str = setting(DEFAULT_SYSTEM, "the system prompt", flag=None)
    max_turns: int = setting(
        DEFAULT_MAX_TURNS, "model turns before the run stops", metavar="N", minimum=1, group="limits",
        identity=False, on_resume="session",
    )  # fmt: skip
    max_tokens: int = setting(
        DEFAULT_MAX_TOKENS, "max_tokens of each model call; thinking counts against it", metavar="N", minimum=1,
        group="model", on_resume="recorded",
    )  # fmt: skip
    workspace: str = setting(
        ".", "the folder the tools work in", metavar="DIR", group="first",
        unset=". or, for the demo model, ./demo-workspace", commands=("run", "resume", "continue"),
    )  # fmt: skip
    tools: tuple[dict[str, Any], ...] = setting((), "the tools' schemas, as the model is sent them", flag=None)
    max_invalid_tool_calls: int = setting(
        5, "calls of one tool with input its schema refuses before the run stops (bad_tool_input); each is "
        "first sent back to the model as an error", metavar="N", minimum=1, group="tools", identity=False,
        on_resume="recorded",
    )  # fmt: skip
    compaction: Compaction = setting(
        "auto", "auto: when the conversation fills the context window, a model call of its own summarises all but "
        "the last exchanges and the run goes on; off: the run stops context_full", group="limits", identity=False,
        on_resume="recorded",
    )  # fmt: skip
    compact_at: int | None = setting(
        None, "also compact before a turn whose input (counted before the call) would pass N tokens", metavar="N",
        minimum=1, group="limits", identity=False, on_resume="recorded",
    )  # fmt: skip
    approve_bash: str | None = setting(
        None, "a regex: run_bash commands matching it need a person's approval", metavar="REGEX", group="tools",
        notebook=False, config=True, regex=True,
    )  # fmt: skip
    retry: RetryPolicy = setting(
        factory=RetryPolicy, help="how long transient model failures are retried", flag=None, identity=False
    )
    thinking: ThinkingMode = setting(
        DEFAULT_THINKING, "adaptive thinking (shown between tools), or off for models without it", group="model",
        on_resume="recorded", before="off",
    )  # fmt: skip
    effort: Effort | None = setting(None, "how much effort the model puts in (unset: the model's own)", group="model")
    fallback_models: tuple[str, ...] = setting(
        (), "a model to switch to when the model keeps failing overloaded or refuses a turn (repeatable: a chain); the switch is "
        "recorded and sticks for the rest of the run", flag="--fallback-model", metavar="M", group="model",
        identity=False, on_resume="recorded", written_if="fallback_models",
    )  # fmt: skip
    fallback_after: int = setting(
        3, "overloaded failures (529, 503, connection, stalled) of one model call before switching to the next "
        "fallback model", metavar="N", minimum=1, group="model", identity=False, on_resume="recorded",
        written_if="fallback_models",
    )  # fmt: skip
    batch_api: bool = setting(
        False, "send each model call through the Message Batches API: half the price of every token class, "
        "answered within 24 hours (often minutes), for work that can wait; a worker gathers its runs' calls "
        "into one batch, and a resume polls the batch it recorded", group="model", identity=False,
        written_if="batch_api",
    )  # fmt: skip
    cache_ttl: CacheTTL | None = setting(
        None, "how long the API caches the conversation between turns, or off", group="model",
        identity=False, on_resume="session", unset=f"{DEFAULT_CACHE_TTL}, or {BATCH_CACHE_TTL} with --batch-api",
    )  # fmt: skip
    max_usd: float | None = setting(
        None, "stop before a model call that could take the run past this many dollars", metavar="X",
        unit="dollars", group="first", identity=False, on_resume="recorded",
    )  # fmt: skip
    max_run_tokens: int | None = setting(
        None, "stop before a model call that could take the run past this many tokens (all kinds)", metavar="N",
        minimum=1, group="limits", identity=False, on_resume="recorded",
    )  # fmt: skip
    endpoint: Mapping[str, str] = setting(
        factory=dict, help="where the run's model calls go and with which kind of credential (never the key)",
        flag=None, identity=False,
    )  # fmt: skip
    tags: tuple[str, ...] = setting(
        (), "a label for the run (repeatable), for filters such as worker --tag", flag="--tag", metavar="TAG",
        group="where", identity=False, config=False,
    )  # fmt: skip
    sources: Mapping[str, Any] = setting(
        factory=dict, flag=None, identity=False, written_if="sources",
        help="tool name -> where it came from (an MCP server, the kernel), for tools a resume must rebuild; "
        "names of environment variables and headers only, never their values",
    )  # fmt: skip
    delegate: bool = setting(
        False, "give the agent a delegate tool: it hands a piece of work to a child run of its own (a durable sub-agent)",
        group="tools", written_if="delegate",
    )  # fmt: skip
    delegate_depth: int = setting(
        1, "how deep child runs may nest (1: children get no delegate tool)", metavar="N", minimum=1,
        group="tools", written_if="delegate",
    )  # fmt: skip
    delegate_fan_out: int = setting(
        4, "at most N child runs of one turn run at once", metavar="N", minimum=1, group="tools",
        identity=False, written_if="delegate",
    )  # fmt: skip
    wording: int = setting(
        WORDING, "the version of what the run tells the model of a tool call cut off (kept for replay)",
        flag=None, identity=False, before=1,
    )  # fmt: skip
    queued: bool = setting(
        False, "submitted for a worker to run rather than run here", flag=None, identity=False, written_if="queued"
    )
    priority: int = setting(
        0, "with run --batch: the priority of the queued runs whose line gives none; workers take the "
        "highest priority first, then the oldest", flag="--priority", metavar="N", commands=("run",), notebook=False, group="where",
        identity=False, written_if="queued", minimum=PRIORITIES.start, maximum=PRIORITIES.stop - 1,
    )  # fmt: skip
    batch: str | None = setting(
        None, "the batch a submitted run belongs to", flag=None, identity=False, written_if="queued"
    )

    def caching(self) -> CacheTTL:
        """How long this run's calls are cached: ``cache_ttl`` as chosen, else its mode's default."""
        if self.cache_ttl is not None:
            return self.cache_ttl
        return BATCH_CACHE_TTL if self.batch_api else DEFAULT_CACHE_TTL

    def to_json(self) -> dict[str, Any]:
        """The settings as a run's log records them: the cache's ttl as it is used, so a resume keeps it."""
        recorded = SettingsValue.to_json(self)
        return {**recorded, "cache_ttl": self.caching()}


@dataclass(frozen=True, slots=True)
class SessionOptions(SettingsValue):
    """How one session of a run goes; never recorded, so each session may choose anew."""

    SECTION = "session"

    in_doubt: InDoubtChoice = setting(
        DEFAULT_IN_DOUBT, "a tool cut off by a crash",
        choice_help=(
            "ask a person (the notebook's buttons, or input() while a cell holds the kernel)", "run it again (rerun)",
            "tell the model its outcome is unknown (skip)", "stop the run (fail)",
        ),
        group="recovery", cli_choices=TERMINAL_IN_DOUBT,
    )  # fmt: skip
    stall_timeout: float | None = setting(
        90.0, "seconds a streamed model call may go without an event before the attempt counts as failed "
        "(transient: recorded and retried), or off (None in Python and in AgentMagics config) to wait as long as the SDK does",
        metavar="S", unit="seconds",
        group="model",
    )  # fmt: skip
    max_concurrent_calls: int | None = setting(
        None, "at most N model calls in flight at once per endpoint, shared through the store", metavar="N", minimum=1, group="shared limits",
        env="NB_DURABLE_MAX_CONCURRENT_CALLS",
    )  # fmt: skip
    breaker_failures: int | None = setting(
        None, "open the endpoint's circuit breaker after N failures (529, 503, connection) within a minute: every "
        "process on the store then waits out the cool-down, then one call probes", metavar="N", minimum=1,
        group="shared limits", env="NB_DURABLE_BREAKER_FAILURES",
    )  # fmt: skip
    breaker_cooldown: float = setting(
        30.0, "seconds an open circuit breaker keeps every process on the store from calling the endpoint",
        metavar="S", unit="seconds", group="shared limits",
    )  # fmt: skip
    tokens_per_minute: int | None = setting(
        None, "at most N input tokens a minute per endpoint (estimated before each call), shared through the store", metavar="N", minimum=1,
        group="shared limits", env="NB_DURABLE_TOKENS_PER_MINUTE",
    )  # fmt: skip


@dataclass(frozen=True, slots=True)
class FrontEndOptions(SettingsValue):
    """What a front end chooses before a run; none of it reaches the loop."""

    SECTION = "front end"

    store: str | None = setting(
        None, "where runs live: a folder (JSONL), sqlite:///runs.db, postgresql://...", metavar="URL",
        commands=("run", "resume", "continue"), group="where", unset=DEFAULT_STORE_SAID,
    )  # fmt: skip
    demo: bool = setting(False, "use the offline demo model (the default without an API key)", group="model")
    mcp_config: str | None = setting(
        None, "an mcpServers JSON file (as Claude Desktop writes it) whose servers' tools the agent gets "
        "(each external unless its server says \"trusted\": true); a resume starts the servers the run recorded unless given", flag="--mcp", metavar="FILE",
        commands=("run", "resume"), group="tools",
    )  # fmt: skip
    kernel_tools: bool = setting(
        False, "tools over this notebook: list_variables, inspect_variable, run_python (needs approval)",
        cli=False, group="tools",
    )  # fmt: skip
    background: bool = setting(
        False, "return at once and run in a thread of the kernel: the notebook stays free and the timeline's "
        "buttons work (--foreground holds the kernel for one cell)", commands=("run", "resume", "continue"),
        group="first", cli=False,
    )  # fmt: skip


TABLE: tuple[Setting, ...] = (*rows_of(AgentSettings), *rows_of(SessionOptions), *rows_of(FrontEndOptions))
"""Every setting, in one order: recorded, then a session's, then a front end's."""
