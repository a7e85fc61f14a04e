"""Strict where the real API is strict: the request rules an agent loop can break.

* 401 without credentials; 400 without ``model`` or ``max_tokens`` (``count_tokens`` takes
  none; ``0`` pre-warms the cache), for an empty conversation, a first message not from the
  user, roles that do not alternate, empty content, a ``tool_use`` not answered by a
  ``tool_result`` in the next message, a ``tool_result`` answering no ``tool_use``; then the
  rules of :mod:`~tests.fakes.messages_api.thinking_rules` (thinking config, sampling, forced tool
  choice, signatures of the thinking blocks sent back), of
  :mod:`~tests.fakes.messages_api.caching` (breakpoints) and of
  :mod:`~tests.fakes.messages_api.strict` (strict tools' schemas). Refused requests are recorded
  (``outcome == "rejected"``) and never reach the scenario.

Each check returns None for a good request, else the message the real API sends.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tests.fakes.messages_api.caching import breakpoints
from tests.fakes.messages_api.content import text
from tests.fakes.messages_api.strict import check_strict_tools
from tests.fakes.messages_api.thinking_rules import Signer, check_history, check_kept, check_thinking


def check_credentials(headers: dict[str, str], api_key: str | None = None) -> str | None:
    """None if the request carries credentials (``x-api-key`` or a Bearer token), else a message."""
    auth = headers.get("authorization", "")
    bearer = auth[7:].strip() if auth.lower().startswith("bearer ") else ""
    given = headers.get("x-api-key", "").strip() or bearer
    if not given:
        return "x-api-key header is required"
    if api_key is not None and given != api_key:
        return "invalid x-api-key"
    return None


def validate_body(
    body: Any,
    *,
    endpoint: str = "messages",
    signer: Signer | None = None,
    refuse_sampling: Sequence[str] = (),
    thinking_types: Mapping[str, Sequence[str]] | None = None,
    sent: Callable[[str], list[dict[str, Any]] | None] | None = None,
    default_thinking: str = "disabled",
) -> str | None:
    """None if the body is a valid request for ``endpoint`` ("messages", "count_tokens"), else the 400 message.

    ``signer`` checks the thinking blocks sent back (None: not checked); ``refuse_sampling``
    names model prefixes that refuse temperature/top_k/top_p; ``thinking_types`` maps a model
    to the thinking types it accepts (absent: all); ``sent`` finds the reply that carried a
    tool call, so dropped thinking blocks are caught (None: not checked).
    """
    if not isinstance(body, dict):
        return "body: Input should be a valid dictionary"
    if "model" not in body:
        return "model: Field required"
    if endpoint == "messages":
        if "max_tokens" not in body:
            return "max_tokens: Field required"
        max_tokens = body["max_tokens"]
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 0:
            return "max_tokens: Input should be an integer greater than or equal to 0"
    elif body.get("stream"):
        return "stream: Extra inputs are not permitted"
    messages = body.get("messages")
    if messages is None:
        return "messages: Field required"
    if not isinstance(messages, list):
        return "messages: Input should be a valid list"
    if not messages:
        return "messages: at least one message is required"
    model = str(body["model"])
    problem = _validate_messages(messages) or check_strict_tools(body)
    problem = problem or _check_thinking_type(body, model, thinking_types or {})
    problem = problem or check_thinking(
        body, refuse_sampling=any(model.startswith(p) for p in refuse_sampling), endpoint=endpoint
    )
    problem = problem or breakpoints(body)[1]
    if problem is None and signer is not None:
        problem = check_history(messages, model, signer)
    if problem is None and sent is not None:
        problem = check_kept(body, sent, default_thinking)
    return problem


def _check_thinking_type(body: dict[str, Any], model: str, accepted: Mapping[str, Sequence[str]]) -> str | None:
    config = body.get("thinking")
    kind = config.get("type") if isinstance(config, dict) else None
    if kind is None or model not in accepted or kind in accepted[model]:
        return None
    allowed = ", ".join(f"'{k}'" for k in accepted[model])
    return f"thinking.type: '{kind}' is not supported on {model}; this model accepts {allowed}"


def _validate_messages(messages: list[Any]) -> str | None:
    tool_use_ids: list[list[str]] = []  # per message
    tool_result_ids: list[list[str]] = []
    seen_tool_use: set[str] = set()
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ("user", "assistant"):
            return f"messages.{i}.role: Input should be 'user' or 'assistant'"
        content = m.get("content")
        if isinstance(content, str):
            blocks: list[Any] = [text(content)] if content else []
        elif isinstance(content, list):
            blocks = content
        else:
            return f"messages.{i}.content: Input should be a valid string or list"
        if not blocks and not (i == len(messages) - 1 and m["role"] == "assistant"):
            return f"messages.{i}: all messages must have non-empty content except for the optional final assistant message"
        uses: list[str] = []
        results: list[str] = []
        for j, b in enumerate(blocks):
            if not isinstance(b, dict) or not isinstance(b.get("type"), str):
                return f"messages.{i}.content.{j}: Input should be a valid content block with a `type`"
            kind = b["type"]
            if kind == "text" and not (isinstance(b.get("text"), str) and b["text"]):
                return "messages: text content blocks must be non-empty"
            if kind == "tool_use":
                if m["role"] != "assistant":
                    return f"messages.{i}.content.{j}: `tool_use` blocks can only be in `assistant` messages"
                if b.get("id") in seen_tool_use:
                    return f"messages.{i}.content.{j}: `tool_use` ids must be unique: {b.get('id')}"
                seen_tool_use.add(str(b.get("id")))
                uses.append(str(b.get("id")))
            if kind == "tool_result":
                if m["role"] != "user":
                    return f"messages.{i}.content.{j}: `tool_result` blocks can only be in `user` messages"
                if len(results) != j:
                    return f"messages.{i}.content.{j}: `tool_result` blocks must come first in the content, before any other block"
                results.append(str(b.get("tool_use_id")))
        tool_use_ids.append(uses)
        tool_result_ids.append(results)
    if messages[0]["role"] != "user":
        return 'messages: first message must use the "user" role'
    for i in range(1, len(messages)):
        if messages[i]["role"] == messages[i - 1]["role"]:
            role = messages[i]["role"]
            return f'messages: roles must alternate between "user" and "assistant", but found multiple "{role}" roles in a row'
    for i in range(len(messages)):
        previous = set(tool_use_ids[i - 1]) if i > 0 else set()
        for j, rid in enumerate(tool_result_ids[i]):
            if rid not in previous:
                return (
                    f"messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: {rid}. "
                    "Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
                )
        following = set(tool_result_ids[i + 1]) if i + 1 < len(messages) else set()
        missing = [u for u in tool_use_ids[i] if u not in following]
        if missing:
            return (
                f"messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: "
                f"{', '.join(missing)}. Each `tool_use` block must have a corresponding `tool_result` block "
                "in the next message."
            )
    return None
