"""A run's settings: every default once, and ``prepare_run``, shared by the CLI and the notebook.

``AgentSettings`` is what a run records when it starts (all a resume needs to rebuild it);
the defaults here are the only ones: the magics' traitlets, the CLI's flags and
``run_agent``'s keywords all read them from this module, which imports neither the SDK nor
anything of Jupyter. ``prepare_run`` makes the choices a front end makes before a run: the
model (the offline demo when no credentials are set), the run id (``--new`` gives a fresh
one) and the workspace (the demo project for the demo model).
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ..core.runs import read_summary
from ..core.steps import QUEUED
from ..core.stores import StoreSpec, opened
from ..errors import InvalidRunIdError, RunNotFoundError
from .models.anthropic import credentials_in_environment
from .models.base import Model
from .models.retry import RetryPolicy

__all__ = [
    "CACHE_TTLS",
    "DEFAULT_CACHE_TTL",
    "DEFAULT_IN_DOUBT",
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_MAX_TURNS",
    "DEFAULT_MODEL",
    "DEFAULT_SYSTEM",
    "DEFAULT_THINKING",
    "DEMO_WORKSPACE",
    "EFFORTS",
    "IN_DOUBT_CHOICES",
    "THINKING_MODES",
    "AgentSettings",
    "CacheTTL",
    "Effort",
    "InDoubtChoice",
    "PreparedRun",
    "prepare_run",
    "ThinkingMode",
    "run_id_for",
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
"""What to do with a tool cut off by a crash: ask a person, run it again, tell the model its
outcome is unknown (skip), or stop the run (fail)."""
DEFAULT_IN_DOUBT: InDoubtChoice = "skip"

ThinkingMode = Literal["adaptive", "off"]
THINKING_MODES: tuple[ThinkingMode, ...] = ("adaptive", "off")
"""adaptive: the model decides when and how much to think, and its thinking (the text between
tool calls on current models) comes back summarized, to be shown. off: no thinking
parameter is sent, for models without thinking."""
DEFAULT_THINKING: ThinkingMode = "adaptive"

Effort = Literal["low", "medium", "high", "xhigh", "max"]
EFFORTS: tuple[Effort, ...] = ("low", "medium", "high", "xhigh", "max")
"""``output_config.effort``: how much effort the model puts in; unset leaves the model's default."""

CacheTTL = Literal["5m", "1h", "off"]
CACHE_TTLS: tuple[CacheTTL, ...] = ("5m", "1h", "off")
"""How long the API keeps the conversation's prefix cached between turns ("off": no caching).
Caching changes what a turn costs, never what it answers, so it is not part of a run's identity."""
DEFAULT_CACHE_TTL: CacheTTL = "5m"

DEMO_WORKSPACE = "demo-workspace"
"""Where a front end puts the demo project when the demo model runs and no workspace is named."""


@dataclass(frozen=True, slots=True)
class AgentSettings:
    """Everything a resume needs to rebuild a run, recorded when it starts."""

    task: str
    model: str = DEFAULT_MODEL
    model_kind: str = "anthropic"
    system: str = DEFAULT_SYSTEM
    max_turns: int = DEFAULT_MAX_TURNS
    max_tokens: int = DEFAULT_MAX_TOKENS
    workspace: str = "."
    tools: tuple[dict[str, Any], ...] = ()
    approve_bash: str | None = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    thinking: ThinkingMode = DEFAULT_THINKING
    effort: Effort | None = None
    cache_ttl: CacheTTL = DEFAULT_CACHE_TTL
    max_usd: float | None = None
    """Stop before a model call that could take the run's cost past this many dollars."""
    max_run_tokens: int | None = None
    """Stop before a model call that could take the run's tokens (all kinds) past this."""
    endpoint: dict[str, str] = field(default_factory=dict)
    """Where the run's model calls go and with which kind of credential (never the key)."""
    sources: Mapping[str, Any] = field(default_factory=dict)
    """Tool name -> where it came from (an MCP server, the kernel), for tools a resume must
    rebuild; names of env variables and headers only, never their values."""
    tags: tuple[str, ...] = ()
    """Labels a person gives a run (``--tag nightly``), for filters such as ``nb-durable worker --tag``."""
    queued: bool = False
    """Submitted for a worker to run (``submit``, ``nb-durable run --batch``) rather than run here."""
    priority: int = 0
    """Among queued runs, workers take the highest priority first, then the oldest."""
    batch: str | None = None
    """The batch a submitted run belongs to (``nb-durable wait --batch``)."""

    def __post_init__(self) -> None:
        if self.thinking not in THINKING_MODES:
            raise ValueError(f"thinking must be 'adaptive' or 'off', not {self.thinking!r}")
        if self.effort is not None and self.effort not in EFFORTS:
            raise ValueError(f"effort must be one of {', '.join(EFFORTS)}, not {self.effort!r}")
        if self.cache_ttl not in CACHE_TTLS:
            raise ValueError(f"cache_ttl must be '5m', '1h' or 'off', not {self.cache_ttl!r}")
        if self.max_usd is not None and not self.max_usd > 0:
            raise ValueError(f"max_usd must be a positive number of dollars, not {self.max_usd!r}")
        if isinstance(self.priority, bool) or not isinstance(self.priority, int):
            raise ValueError(f"priority must be a whole number (higher runs first), not {self.priority!r}")
        if any(not isinstance(t, str) or not t.strip() for t in self.tags):
            raise ValueError(f"tags must be non-empty strings, not {list(self.tags)!r}")
        if self.max_run_tokens is not None and not self.max_run_tokens > 0:
            raise ValueError(
                f"max_run_tokens must be a positive number of tokens, not {self.max_run_tokens!r}"
            )

    def to_json(self) -> dict[str, Any]:
        """The settings as the run's log records them (``sources`` only when there are some,
        so runs without such tools record what they always did)."""
        out: dict[str, Any] = {
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
            "thinking": self.thinking,
            "effort": self.effort,
            "cache_ttl": self.cache_ttl,
            "max_usd": self.max_usd,
            "max_run_tokens": self.max_run_tokens,
            "endpoint": dict(self.endpoint),
            "tags": list(self.tags),
        }
        if self.sources:
            out["sources"] = {name: dict(source) for name, source in self.sources.items()}
        if self.queued:  # only submitted runs record these: other runs record what they always did
            out.update({QUEUED: True, "priority": self.priority, "batch": self.batch})
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AgentSettings:
        """The settings a log recorded; ValueError if the run was not an agent's."""
        if "task" not in data:
            raise ValueError("these settings have no task: the run was not started by run_agent")
        default = cls(task="")
        return cls(
            task=str(data["task"]),
            model=str(data.get("model", default.model)),
            model_kind=str(data.get("model_kind", default.model_kind)),
            system=str(data.get("system", default.system)),
            max_turns=int(data.get("max_turns", default.max_turns)),
            max_tokens=int(data.get("max_tokens", default.max_tokens)),
            workspace=str(data.get("workspace", default.workspace)),
            tools=tuple(data.get("tools") or ()),
            approve_bash=data.get("approve_bash"),
            retry=RetryPolicy.from_json(data.get("retry") or {}),
            # A run recorded before thinking existed sent no thinking parameter.
            thinking=data.get("thinking", "off"),
            effort=data.get("effort"),
            cache_ttl=data.get("cache_ttl", default.cache_ttl),
            max_usd=None if data.get("max_usd") is None else float(data["max_usd"]),
            max_run_tokens=None if data.get("max_run_tokens") is None else int(data["max_run_tokens"]),
            endpoint={str(k): str(v) for k, v in (data.get("endpoint") or {}).items()},
            sources=dict(data.get("sources") or {}),
            tags=tuple(str(t) for t in data.get("tags") or ()),
            queued=bool(data.get(QUEUED, False)),
            priority=int(data.get("priority") or 0),
            batch=None if data.get("batch") is None else str(data["batch"]),
        )

    def identity(self) -> dict[str, Any]:
        """What must match for a run to be replayed with these settings."""
        return {k: v for k, v in self.to_json().items() if k not in _NOT_IDENTITY}

    def but(self, **changes: Any) -> AgentSettings:
        """These settings with some changed."""
        return AgentSettings(**{**{name: getattr(self, name) for name in self.__slots__}, **changes})


_NOT_IDENTITY = frozenset(
    {
        "max_turns", "retry", "cache_ttl", "max_usd", "max_run_tokens", "endpoint", "sources", "tags",
        "queued", "priority", "batch",
    }
)
"""Settings that change what a run may spend, how it is sent or how it is filed, never what it
answers (or, for a submitted run, when a worker takes it). Where a tool comes from may move too (another server command, a new timeout): its
schema, in ``tools``, is what the recorded requests pinned."""


def run_id_for(task: str) -> str:
    """A readable run id derived from a task's text: its first words and a hash."""
    words = re.findall(r"[a-z0-9]+", task.lower())[:5]
    digest = hashlib.sha256(task.strip().encode()).hexdigest()[:8]
    return "-".join([*words, digest]) if words else f"run-{digest}"


@dataclass(frozen=True)
class PreparedRun:
    """A front end's choices for one run, made the same way by the CLI and the notebook."""

    run_id: str
    client: Model
    model: str
    workspace: str
    note: str = ""
    """Something to tell the person before the run (why the demo model runs), or ''."""


def prepare_run(
    task: str,
    *,
    run_id: str | None = None,
    new: bool = False,
    model: str | None = None,
    demo: bool = False,
    workspace: str | None = None,
    environ: Mapping[str, str] | None = None,
    store: StoreSpec = None,
) -> PreparedRun:
    """Choose the model, the run id and the workspace of a run about to start.

    Without credentials in the environment (or with ``demo``) the offline demo model runs,
    on a copy of the demo project unless ``workspace`` names one. ``new`` starts afresh:
    with no ``run_id``, the id derived from the task gets a timestamp, so a cell or command
    that ran before starts a new run; a ``run_id`` given is used as given, and ``new`` with
    an id that ``store`` already holds is an ``InvalidRunIdError`` (an id is never silently
    changed, and a recorded run is never overwritten).
    """
    if new and run_id is not None:
        _refuse_taken(run_id, store)
    note = ""
    if demo or not credentials_in_environment(environ):
        from .models.demo import DemoModel, prepare_demo_workspace

        client: Model = DemoModel()
        if not demo:
            note = (
                "no ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN or ANTHROPIC_BASE_URL is set, so this run "
                "uses the offline demo model (a scripted agent driving the real tools on a demo project)."
            )
        chosen_model = "demo"  # the model that answers is the demo, whatever was asked for
        if workspace is None:
            workspace = str(prepare_demo_workspace(os.path.abspath(DEMO_WORKSPACE)))
    else:
        from .models.anthropic import AnthropicModel

        client = AnthropicModel()
        chosen_model = model or DEFAULT_MODEL
    name = run_id or run_id_for(task)
    if new and run_id is None:
        name = f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"
    return PreparedRun(name, client, chosen_model, workspace if workspace is not None else ".", note)


def _refuse_taken(run_id: str, store: StoreSpec) -> None:
    """``new`` with an id already recorded: refuse, saying what the run is and what to do."""
    with opened(store) as runs:
        try:
            summary = read_summary(run_id, runs)
        except RunNotFoundError:
            return
    raise InvalidRunIdError(
        f"run {run_id!r} already exists in {summary.location} ({summary.status}, {summary.steps} steps), "
        "so --new cannot start it afresh: choose another --run, leave out --run for a fresh id "
        "derived from the task, or leave out --new to replay and continue this run",
        run_id=run_id,
    )
