"""Which of an environment's variables are secrets, and the environment tools get without them.

``redaction`` masks the values named here; this module decides what counts as one: a variable
whose name is a secret's (``is_secret_name``), and the password of a URL in any variable
(``secret_variables``). ``tool_environment`` strips the first kind, unless passed through.

Every tool call copies the process's environment and looks for its secrets, which means
decoding each variable of ``os.environ``: ``environment()`` and ``secrets_in()`` do that again
only when the environment changed since they last did (a variable set in the notebook between
two calls is seen by the next one).
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ...core.stores import ENV_STORE, shown_store
from ...core.stores.userinfo import passwords
from .formats import SECRET_NAME_RULE

__all__ = ["PASS_ENV_VARIABLE", "environment", "is_secret_name", "secret_variables", "secrets_in", "tool_environment"]

PASS_ENV_VARIABLE = "NB_DURABLE_PASS_ENV"
"""Names (space or comma separated, or ``*``) of secret variables tools may see all the same."""

_ALWAYS = frozenset({"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"})
_SECRET_NAME = re.compile(SECRET_NAME_RULE)


@functools.lru_cache(maxsize=4096)  # asked for every variable of every tool call's environment
def is_secret_name(name: str) -> bool:
    """Whether an environment variable of this name holds a secret."""
    return name in _ALWAYS or _SECRET_NAME.fullmatch(name) is not None


def secret_variables(environ: Mapping[str, object]) -> list[tuple[str, str]]:
    """(name, value) of each secret ``environ`` holds: its secret variables' values, and the
    password of a URL in any other (``DATABASE_URL``'s, named ``DATABASE_URL:password``): tools
    see that variable, and a command can print its password alone, or encoded."""
    found: list[tuple[str, str]] = []
    for name, value in environ.items():
        if not isinstance(value, str):
            continue
        if is_secret_name(name):
            found.append((name, value))
        elif "://" in value or "password=" in value.lower():
            found.extend((f"{name}:password", p) for p in passwords(value.strip()))
    return found


@dataclass(frozen=True, slots=True)
class _Snapshot:
    raw: object
    """A copy of ``os.environ``'s undecoded variables, as they were when ``values`` was made."""
    values: dict[str, str]
    secrets: tuple[tuple[str, str], ...]
    for_tools: dict[frozenset[str], dict[str, str]] = field(default_factory=dict)
    """``values`` without their secrets (``tool_environment``), by the names passed through."""


_last: dict[str, _Snapshot] = {}
"""The last snapshot made (under ``"now"``): read and replaced whole, so threads need no lock."""


def _now() -> _Snapshot:
    """The process's environment as it is now, decoded again only if it changed."""
    # os.environ keeps its variables undecoded in ``_data`` (CPython, every version since 3.2):
    # comparing that dict takes under a microsecond where decoding it takes ~1 us a variable.
    data = getattr(os.environ, "_data", None)
    last = _last.get("now")
    if last is not None and isinstance(data, dict) and last.raw == data:
        return last
    # The raw copy first: a change between the two copies makes the next look decode again.
    raw = dict(data) if isinstance(data, dict) else None
    values = dict(os.environ)
    snapshot = _Snapshot(raw, values, tuple(secret_variables(values)))
    if raw is not None:
        _last["now"] = snapshot
    return snapshot


def environment() -> dict[str, str]:
    """A copy of ``os.environ`` as it is now (what a tool call's subprocesses start from)."""
    return dict(_now().values)


def secrets_in(environ: Mapping[str, str] | None = None) -> tuple[tuple[str, str], ...]:
    """``secret_variables(environ)`` (``os.environ``'s by default), the process's found again only
    when its environment changed, and reused for a copy of it as it is now."""
    now = _now()
    if environ is None or environ is os.environ or environ == now.values:
        return now.secrets
    return tuple(secret_variables(environ))


def _passed(environ: Mapping[str, str], pass_env: str | Iterable[str]) -> frozenset[str]:
    # One str is read as the variable is ("GITHUB_TOKEN NPM_TOKEN"), not as its letters.
    given = [pass_env] if isinstance(pass_env, str) else list(pass_env)
    names = {name for part in [*given, environ.get(PASS_ENV_VARIABLE, "")] for name in re.split(r"[\s,]+", part.strip())}
    names.discard("")
    return frozenset(names)


def tool_environment(environ: Mapping[str, str], pass_env: str | Iterable[str] = ()) -> dict[str, str]:
    """``environ`` without its secret variables, except those passed through by name.

    ``pass_env`` and ``$NB_DURABLE_PASS_ENV`` name the variables to keep (``*``: keep all;
    a str may name several, as the variable does).
    """
    passed = _passed(environ, pass_env)
    if "*" in passed:
        return dict(environ)
    now = _now()
    if environ is not now.values and environ != now.values:
        return _without_secrets(environ, passed)
    kept = now.for_tools.get(passed)
    if kept is None:
        kept = now.for_tools[passed] = _without_secrets(environ, passed)
    return dict(kept)


def _without_secrets(environ: Mapping[str, str], passed: frozenset[str]) -> dict[str, str]:
    return {k: v for k, v in environ.items() if k in passed or not (is_secret_name(k) or _store_with_password(k, v))}


def _store_with_password(name: str, value: str) -> bool:
    """nb_durable's own store, when its URL carries a password: a tool could read it, or log in
    and write the runs' logs; no tool needs it."""
    return name == ENV_STORE and shown_store(value.strip()) != value.strip()
