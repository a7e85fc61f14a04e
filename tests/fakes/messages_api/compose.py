"""What a reply says: a scripted :class:`Reply` turned into the message the API would send.

In order: thinking blocks are dropped when the request has thinking off; the content is cut at
the output budget (the request's ``max_tokens`` or the reply's ``max_output_tokens``, the
lower; hidden thinking counts), which turns the stop reason into ``max_tokens``, or at the room
left in the model's context window (if the server sets one), which turns it into
``model_context_window_exceeded``; thinking is
then emitted as the request's ``display`` says, and signed. The usage is the cache accounting
of the request (:mod:`~tests.fakes.messages_api.caching`) plus the output estimate
(:mod:`~tests.fakes.messages_api.tokens`), unless the reply scripts its own; the cache is
written either way, since the prompt was processed. ``model`` is the answering model.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tests.fakes.messages_api.caching import PromptCache
from tests.fakes.messages_api.content import new_id
from tests.fakes.messages_api.scenario import Reply
from tests.fakes.messages_api.thinking_rules import Signer, render_thinking, thinking_type
from tests.fakes.messages_api.tokens import output_tokens, prompt_tokens, thinking_tokens, truncate


@dataclass
class ReplyContext:
    """The server state a reply depends on."""

    signer: Signer = field(default_factory=Signer)
    cache: PromptCache = field(default_factory=PromptCache)
    # None: the requested model; a string: always that; a mapping: requested -> answering.
    answering_model: str | Mapping[str, str] | None = None
    default_thinking: str = "disabled"  # what a request without `thinking` gets
    # The model's context window in tokens (None: unlimited; a mapping: per model).
    context_window: int | Mapping[str, int] | None = None

    def model_for(self, requested: str) -> str:
        """The model that answers a request for ``requested``."""
        if isinstance(self.answering_model, str):
            return self.answering_model
        if isinstance(self.answering_model, Mapping):
            return self.answering_model.get(requested, requested)
        return requested

    def window_for(self, requested: str) -> int | None:
        """The context window of ``requested`` (None: unlimited)."""
        if isinstance(self.context_window, Mapping):
            return self.context_window.get(requested)
        return self.context_window


def compose_message(spec: Reply, body: dict[str, Any], ctx: ReplyContext) -> dict[str, Any]:
    """The message JSON for ``spec`` answering ``body`` (writes the request's cache prefixes)."""
    requested = str(body.get("model") or "claude-fake")
    content = copy.deepcopy(spec.content)
    if thinking_type(body, ctx.default_thinking) == "disabled":
        content = [b for b in content if b.get("type") not in ("thinking", "redacted_thinking")]
    limits = [n for n in (body.get("max_tokens"), spec.max_output_tokens) if isinstance(n, int)]
    window = ctx.window_for(requested)
    room = None if window is None else max(0, window - prompt_tokens(body))
    by_window = room is not None and (not limits or room < min(limits))
    limit = room if by_window else min(limits) if limits else None
    cut = False
    if limit is not None:
        content, cut = truncate(content, limit)
    stop_reason = spec.stop_reason
    if cut:
        stop_reason = "model_context_window_exceeded" if by_window else "max_tokens"
    spent = output_tokens(content)
    if limit is not None:
        spent = limit if cut else min(spent, limit)
    thought = thinking_tokens(content)
    content = render_thinking(content, body, requested, ctx.signer, ctx.default_thinking)
    account = ctx.cache.account(body)
    if spec.usage is not None:
        used = copy.deepcopy(spec.usage)
    else:
        used = account.usage(spent)
        if thought:
            used["output_tokens_details"] = {"thinking_tokens": min(thought, spent)}
    return {
        "id": spec.id or new_id("msg"),
        "type": "message",
        "role": "assistant",
        "model": spec.model or ctx.model_for(requested),
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None if cut else spec.stop_sequence,
        "stop_details": None if cut else copy.deepcopy(spec.stop_details),
        "usage": used,
    }
