"""What a session checks of the run it goes on with, before it replays a step.

First, before the log opens (``check_can_go``): its workspace is a folder, a change it is
asked for is one its model can take, and a setting a resume may not change, given again, is
the value the run recorded (compared as it was recorded: a workspace by its absolute path). Then:

The settings that make a run's identity (``AgentSettings.identity``: the task, the model's
tools, what shapes every request) must be the recorded ones, or replay would serve answers
to other questions: a difference is ``SettingsMismatchError``. The endpoint may differ (a
key rotated, a proxy added): replayed steps stay what they were, live calls go elsewhere,
and the person is told so with ``EndpointChangedWarning``.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping
from typing import Any

from ...errors import SettingError, SettingsMismatchError
from ..models.base import Model, endpoint_of, model_choices_refused, public_url
from ..settings import CHANGEABLE, AgentSettings, Change
from ..workspace.names import folder_of_shown, shown_name

__all__ = [
    "EndpointChangedWarning",
    "asked_again",
    "check_can_go",
    "check_endpoint",
    "check_identity",
    "recorded_workspace",
]


class EndpointChangedWarning(UserWarning):
    """A run resumed against another endpoint or kind of credential than it was recorded with."""


_CREDENTIALS = {"api_key": "an API key", "auth_token": "an auth token", "none": "no credentials"}


def recorded_workspace(workspace: str) -> str:
    """The workspace as a run records it: its absolute path, so a resume from elsewhere works there
    (a name that is not UTF-8 as ``workspace.names`` shows it)."""
    return shown_name(folder_of_shown(workspace).resolve())


def check_can_go(run_id: str, settings: AgentSettings, change: Change) -> None:
    """Refuse, before anything is recorded, a session that could not go on: a usage error, not the run's."""
    _check_kept(run_id, settings, change.kept())
    workspace = folder_of_shown(settings.workspace)
    if not workspace.is_dir():
        raise SettingError(
            setting="workspace", value=str(workspace),
            reason=f"of run {run_id!r} must be a folder that exists: create it (a run keeps the workspace "
            "it started in; a new run can be given another)",
        )  # fmt: skip
    asked = model_choices_refused(settings.model_kind, change.values)
    if asked:
        raise SettingError(
            setting=asked[0], value=change.values[asked[0]],
            reason=f"of run {run_id!r} cannot change: it runs on the offline demo model, which has no "
            "model choice (leave it out, or start a new run with a key to use a model)",
        )  # fmt: skip


def _check_kept(run_id: str, settings: AgentSettings, kept: Mapping[str, Any]) -> None:
    """Refuse a setting a resume may not change given another value than the run recorded."""
    if not kept:
        return
    # Compared as the log would write them: a value it leaves out is no change (as for a rerun).
    asked = {name: recorded_workspace(v) if name == "workspace" else v for name, v in kept.items()}
    written = AgentSettings.from_json(settings.but(**asked).to_json())
    for name, value in kept.items():
        if getattr(written, name) != getattr(settings, name):
            raise SettingError(
                setting=name, value=value,
                reason=f"of run {run_id!r} cannot change when a run goes on (it is part of what the run is, and a "
                f"fork keeps it too): the run recorded {_in_full(getattr(settings, name))}; leave it out to go "
                "on, or start a new run to use another",
            )  # fmt: skip


def _in_full(value: Any) -> str:
    """A recorded value whole, as a person would type it: a path cut short could not be given again."""
    return "unset" if value is None else repr(value) if isinstance(value, str) else json.dumps(value)


def check_identity(run_id: str, settings: AgentSettings, recorded: dict[str, Any]) -> None:
    """Raise ``SettingsMismatchError`` if ``settings`` would change what the recorded run is."""
    try:
        before = AgentSettings.from_json(recorded).identity()
    except ValueError:
        before = {}
    now = settings.identity()
    changed = sorted(k for k in now if before.get(k) != now[k])
    if changed:
        raise SettingsMismatchError(
            run_id=run_id,
            changed=changed,
            recorded=", ".join(f"{k}={_as_typed(before.get(k))}" for k in changed),
            requested=", ".join(f"{k}={_as_typed(now[k])}" for k in changed),
            changeable=[k for k in changed if k in CHANGEABLE],
        )


def _as_typed(value: Any) -> str:
    """A setting's value as a person would type it: 16000, 'claude-x', unset; a long one cut short."""
    if value is None:
        return "unset"
    said = repr(value[:60] + "…" if len(value) > 60 else value) if isinstance(value, str) else json.dumps(value)
    return said if len(said) <= 80 else said[:79] + "…"


def asked_again(settings: AgentSettings, recorded: dict[str, Any]) -> tuple[AgentSettings, Change]:
    """A rerun's settings as its log recorded them, and the change it asks of the rest.

    A rerun (``run_agent`` on a run that exists) may ask other values of the settings a
    resume may change from a point on (a budget, the fallback models): they become the
    change a resume would bring, recorded at the run's next point, so every later session
    and replay has them; until then the run goes on as recorded. It keeps the recorded mode (``batch_api``).
    """
    try:
        before = AgentSettings.from_json(recorded)
    except ValueError:
        return settings, Change()
    # The mode the run recorded holds (``session.go``), and with it the mode's default cache ttl.
    settings = settings.but(batch_api=before.batch_api)
    # Compared as the log would write them: one it leaves out (fallback_after with no fallback
    # models) is no change, or a new run would record its own settings as a resume's.
    written = AgentSettings.from_json(settings.to_json())
    asked = {
        name: getattr(settings, name)
        for name, row in CHANGEABLE.items()
        if row.on_resume == "recorded" and getattr(written, name) != getattr(before, name)
    }
    if not asked:
        return settings, Change()
    return settings.but(**{name: getattr(before, name) for name in asked}), Change(asked)


def check_endpoint(run_id: str, client: Model, recorded: dict[str, Any]) -> None:
    """Warn if live calls now go to another endpoint, or with another kind of credential."""
    before = dict(recorded.get("endpoint") or {})
    if "url" in before:  # a run recorded before URLs were made public kept its userinfo
        before["url"] = public_url(str(before["url"]))
    now = endpoint_of(client)
    if before and now and dict(before) != now:
        warnings.warn(
            f"run {run_id!r} was recorded against {_said(before)} and now goes to {_said(now)}; "
            "its replayed steps are unchanged, but live calls now go elsewhere.",
            EndpointChangedWarning,
            stacklevel=5,
        )


def _said(endpoint: Mapping[str, Any]) -> str:
    credential = str(endpoint.get("credential", "none"))
    return f"{endpoint.get('url', '?')} with {_CREDENTIALS.get(credential, f'a credential of kind {credential!r}')}"
