"""The model seam: one Messages API request in, one JSON reply out.

A *model* takes a Messages API request (plain JSON: model, max_tokens, system, messages,
tools) and returns a *reply*, ``{"message": <the Message as JSON>, "request_id": ...}``.
The agent loop records replies as step results and rebuilds the conversation from them, so
it never touches SDK objects and the log holds only JSON. Every model (the real API, a
script, the demo) speaks this one protocol, so the loop cannot tell them apart.

The seam's per-call stall limit (``stall_limit``) reaches a streaming backend through a
context variable rather than an argument, so the one protocol every model implements (a
script, the demo, a user's own) stays as it is; a model that does not stream ignores it.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Protocol

from ..secrets.formats import SECRET_NAME_RULE

__all__ = [
    "MODEL_CHOICES",
    "Model",
    "TextCallback",
    "endpoint_of",
    "model_choices_refused",
    "public_url",
    "stall_limit",
    "stall_timeout",
]

TextCallback = Callable[[str], None]
"""Receives text as a model streams it (a UI shows it live; only the final message is recorded)."""


class Model(Protocol):
    """Anything that answers a Messages API request: the real API, a script, the demo."""

    name: str
    """A short label for displays: 'anthropic', 'demo', 'scripted'."""

    def create(
        self,
        request: Mapping[str, Any],
        on_text: TextCallback | None = None,
        on_thinking: TextCallback | None = None,
    ) -> dict[str, Any]:
        """Send one request; return ``{"message": {...}, "request_id": str | None}``.

        ``on_text`` receives answer text and ``on_thinking`` thinking text as they stream (a
        UI shows them live; only the final message is recorded). Raise
        ``TransientModelError`` for failures worth retrying and ``ModelError`` for the rest.

        A model may also have ``count_tokens(request) -> int`` (the request's input tokens,
        for budgets) and ``endpoint() -> dict`` (where it sends requests and with which kind
        of credential, never the credential itself).
        """
        ...


MODEL_CHOICES = ("model", "fallback_models")
"""The settings that choose which model answers a run."""

_ANSWERS_AS_ITSELF = frozenset({"demo"})
"""The backends (model kinds) that answer as themselves whatever model a request names."""


def model_choices_refused(model_kind: str, asked: Iterable[str]) -> list[str]:
    """The model choices among the settings ``asked`` that a run answered by a ``model_kind``
    backend cannot take, in ``MODEL_CHOICES`` order. The offline demo answers as itself, so any
    model named for it would be recorded as answering when it never did. A new run
    (``prepare_run``) and a resume (``RunSession.go``) both ask this one rule."""
    if model_kind not in _ANSWERS_AS_ITSELF:
        return []
    given = set(asked)
    return [name for name in MODEL_CHOICES if name in given]


_CREDENTIAL_PARAMETER = re.compile(rf"(?:{SECRET_NAME_RULE})|.*(?i:auth|sig|credential).*")
"""Query parameters whose values are credentials: a secret's name (``api_key``, ``token``,
``password``...), and signatures and auth codes (``sig``, ``X-Amz-Signature``, ``auth``)."""


def public_url(url: str, *, kept: Callable[[str], object] | None = None) -> str:
    """``url`` fit to record and show: without its userinfo (``user:password@``), and with the
    value of every credential-looking query parameter masked as ``***``, unless ``kept(value)``
    (a reference to a variable, such as an MCP config's ``${VAR}``, names a secret without holding it)."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return url if "@" not in url else "(a URL that cannot be parsed)"
    netloc = parts.netloc.rpartition("@")[2]
    query = "&".join(
        f"{name}=***"
        if _CREDENTIAL_PARAMETER.fullmatch(urllib.parse.unquote_plus(name)) and not (kept and kept(value))
        else f"{name}{eq}{value}"
        for name, eq, value in (p.partition("=") for p in parts.query.split("&") if p)
    )
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def endpoint_of(model: object) -> dict[str, str]:
    """Where ``model`` sends requests, if it says (``endpoint()``); {} otherwise. This is what
    a run records and what keys the shared limits, so its URL goes through ``public_url``."""
    endpoint = getattr(model, "endpoint", None)
    if endpoint is None:
        return {}
    try:
        out = {str(k): str(v) for k, v in endpoint().items()}
    except Exception:
        return {}
    if "url" in out:
        out["url"] = public_url(out["url"])
    return out


_STALL: ContextVar[float | None] = ContextVar("nb_durable_stall_timeout", default=None)


@contextmanager
def stall_limit(seconds: float | None) -> Iterator[None]:
    """While the block runs, a streamed call with no event for ``seconds`` fails (None: no limit)."""
    token = _STALL.set(seconds)
    try:
        yield
    finally:
        _STALL.reset(token)


def stall_timeout() -> float | None:
    """The stall limit of the model call being made here, if any (``stall_limit``)."""
    return _STALL.get()
