"""A front end's choices before a run, made the same way by the CLI and the notebook.

``prepare_run`` picks the model (the offline demo when no credentials are set), the run id
(derived from the task; ``new`` gives a fresh one) and the workspace (the demo project for
the demo model). ``run_id_for`` is how a task's text names its run.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...core.runs import read_summary
from ...core.stores import StoreSpec, opened
from ...core.stores.base import RUN_ID_MAX, check_run_id
from ...core.writing.interrupts import interrupts_watched
from ...errors import InvalidRunIdError, RunNotFoundError, SettingError
from ..models.anthropic import credentials_in_environment
from ..models.base import Model, model_choices_refused
from ..settings import DEFAULT_MODEL, AgentSettings, FrontEndOptions, SessionOptions
from ..settings.rows import rows_of, sort_values

__all__ = ["DEMO_WORKSPACE", "PreparedRun", "prepare_run", "readable_id", "run_id_for", "task_words"]

DEMO_WORKSPACE = "demo-workspace"
"""Where a front end puts the demo project when the demo model runs and no workspace is named."""


def run_id_for(task: str) -> str:
    """A readable run id derived from a task's text: its first words and a hash."""
    words = task_words(task)
    digest = hashlib.sha256(task.strip().encode()).hexdigest()[:8]
    return readable_id(words, digest) if words else f"run-{digest}"


def task_words(task: str) -> list[str]:
    """The words of a task that begin the run id derived from it."""
    return re.findall(r"[a-z0-9]+", task.lower())[:5]


def readable_id(words: Sequence[str], tail: str) -> str:
    """``words`` then ``tail``, joined by dashes, the words cut short where the whole would be
    longer than a run id may be (long words: a hash, an identifier). An id that fits is never
    cut, so a task run again still finds the run it named."""
    head = "-".join(words)[: RUN_ID_MAX - len(tail) - 1].rstrip("-")
    return f"{head}-{tail}" if head else tail


@dataclass(frozen=True)
class PreparedRun:
    """A front end's choices for one run, made the same way by the CLI and the notebook."""

    run_id: str
    client: Model
    settings: AgentSettings
    """What the run records: the settings given, with the model and workspace chosen."""
    options: SessionOptions
    front: FrontEndOptions
    note: str = ""
    """Something to tell the person before the run (why the demo model runs), or ''."""


def prepare_run(
    task: str,
    *,
    run_id: str | None = None,
    new: bool = False,
    values: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> PreparedRun:
    """Choose the model, the run id and the workspace of a run about to start.

    ``values`` are the settings a person gave, by name (from flags, ``%config``, a batch
    file): the run's, its session's and the front end's. Without credentials in the
    environment (or with ``demo``) the offline demo model runs, on a copy of the demo project
    unless a ``workspace`` is named. ``new`` starts afresh: with no ``run_id``, the id derived
    from the task gets a timestamp, so a cell or command that ran before starts a new run; a
    ``run_id`` given is used as given, and ``new`` with an id that the ``store`` already holds
    is an ``InvalidRunIdError`` (an id is never silently changed, and a recorded run is never
    overwritten).
    """
    # A front end prepares before it runs (a store opened for ``new``, a backend imported, a
    # project copied): a Ctrl-C that Python swallows there is sent again too, not lost.
    interrupts_watched()
    recorded, session, chosen = sort_values("prepare_run", values or {}, AgentSettings, SessionOptions, FrontEndOptions)
    front = FrontEndOptions(**chosen)
    options = SessionOptions(**session)
    workspace = recorded.pop("workspace", None)
    model = recorded.pop("model", None)
    settings = AgentSettings(task=task, **recorded)  # checked before anything is opened or copied
    if run_id is not None:
        # Given, an id is used as given: an empty one ("--run $UNSET") is refused, not taken
        # for no id (which would replay or continue the run its task's text names).
        check_run_id(run_id)
    if new and run_id is not None:
        _refuse_taken(run_id, front.store)
    note = ""
    # Only the backend chosen is imported (the demo's scenario and project, or the API's client).
    if runs_the_demo(demo=front.demo, environ=environ):
        from ..models.demo import DemoModel, prepare_demo_workspace

        if settings.batch_api:  # refused now: queued or started, the run could only fail later
            raise demo_refuses_batch_mode(asked=front.demo)

        client: Model = DemoModel()
        # The demo answers as itself and records its model as demo: a model asked for would
        # be dropped without a word (and a rerun asking another would replay as if equal).
        chosen = {"model": (model,) if model not in (None, DEFAULT_MODEL) else (), "fallback_models": settings.fallback_models}
        refused = model_choices_refused(client.name, [name for name, models in chosen.items() if models])
        if refused and front.demo:
            raise SettingError(
                setting=refused[0], value=" ".join(chosen[refused[0]]), spelled=_flag(refused[0]),
                reason="must be left out with --demo: the offline demo model has no model choice (it records its model as demo)",
            )  # fmt: skip
        settings = settings.but(fallback_models=()) if "fallback_models" in refused else settings
        if not front.demo:
            asked = [m for name in refused for m in chosen[name]]
            many = len(asked) > 1
            unused = (
                f" The model{'s' if many else ''} {', '.join(asked)} {'are' if many else 'is'} not used: "
                "the demo model has no model choice."
            ) if asked else ""
            note = (
                "no ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN or ANTHROPIC_BASE_URL is set, so this run "
                "uses the offline demo model (a scripted agent driving the real tools: on a demo project, "
                f"or with the search, tag and send tools of the MCP servers it is given).{unused}"
            )
        model = "demo"  # the model that answers is the demo, whatever was asked for
        if workspace is None:
            try:
                workspace = str(prepare_demo_workspace(os.path.abspath(DEMO_WORKSPACE)))
            except FileExistsError as e:  # a mistake in where the run is asked to work: no run starts
                raise ValueError(f"{e} Or name the folder to work in with --workspace.") from None
    else:
        from ..models.anthropic import AnthropicModel

        client = AnthropicModel()
    name = run_id if run_id is not None else run_id_for(task)
    if new and run_id is None:
        name = f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"
    settings = settings.but(model=model or DEFAULT_MODEL, workspace=workspace if workspace is not None else ".")
    return PreparedRun(name, client, settings, options, front, note)


def _flag(setting: str) -> str:
    """How a front end's flag spells ``setting`` (``--fallback-model``): the notebook's are the CLI's."""
    return next(row.flag or setting for row in rows_of(AgentSettings) if row.name == setting)


def runs_the_demo(*, demo: bool, environ: Mapping[str, str] | None = None) -> bool:
    """Whether a run started now uses the offline demo model: asked for, or no credentials set."""
    return demo or not credentials_in_environment(environ)


def demo_refuses_batch_mode(*, asked: bool) -> SettingError:
    """The error for batch mode (``batch_api``) on the demo model: ``asked`` for, or run for want of a key."""
    why = "" if asked else " (no ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN or ANTHROPIC_BASE_URL is set: set one to use it)"
    return SettingError(setting="batch_api", value=True, reason=f"must be off for the offline demo model, which has no Message Batches API{why}")


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
