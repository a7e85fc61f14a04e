"""An MCP tool as one of ours: its name, its effect, and its result.

A tool's annotations are hints its server gives, and the MCP specification tells clients to
treat them as untrusted unless the server is: a server that calls a payment tool read-only
would have it re-run after a crash. So by default every tool of a server is ``external``
(in doubt after a crash mid-call; never retried once it may have run). A server whose config
says ``"trusted": true`` has its annotations decide:

=====================================  ==============  ========================================
annotation                             effect          after a crash mid-call
=====================================  ==============  ========================================
``readOnlyHint: true``                 ``pure``        simply runs again
``idempotentHint: true``               ``idempotent``  runs again (same input, same effect)
anything else (``destructiveHint``,    ``external``    in doubt: the in-doubt policy decides
no annotations)
=====================================  ==============  ========================================

A config's ``tools`` entry sets a tool's effect whatever the server says, trusted or not. Names: a tool keeps its server's name
(characters the API refuses become ``_``) unless two servers offer the same name, or a
built-in (or the delegate tool) has it; then it becomes ``server__name``. Results: text blocks
and the contents of text resources are joined; images, audio and binary resources are named,
not inlined (by the anthropic SDK's ``mcp_content`` where it is installed), since a recorded
tool result is text; a resource link gives its name and uri; a text the keeper cut as it read it
(``_capped``) says so at the head of the result.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from ....core.events import Effect
from ...secrets.redaction import Redactor
from ._capped import cut_note
from .config import ToolOverride

__all__ = ["api_names", "described", "effect_from", "result_text"]


def effect_from(annotations: Any, override: ToolOverride | None, trusted: bool = False) -> tuple[Effect, str]:
    """(effect, why): the config's override, else, from a trusted server only, readOnlyHint ->
    pure and idempotentHint -> idempotent; else external."""
    if override is not None and override.effect is not None:
        return override.effect, "set in the config"
    read_only = getattr(annotations, "read_only_hint", None) if annotations is not None else None
    idempotent = getattr(annotations, "idempotent_hint", None) if annotations is not None else None
    hint = "readOnlyHint" if read_only is True else "idempotentHint" if idempotent is True else None
    if hint is not None and not trusted:
        return "external", f'{hint} not trusted (the server\'s config does not say "trusted": true)'
    if hint is not None:
        return ("pure" if hint == "readOnlyHint" else "idempotent"), hint
    destructive = getattr(annotations, "destructive_hint", None) if annotations is not None else None
    return "external", "destructiveHint" if destructive else "no readOnlyHint or idempotentHint"


def described(tool: Any, server: str, redactor: Redactor) -> tuple[str, dict[str, Any]]:
    """A listed tool's description and input schema, the config's env and header values masked:
    a server may describe itself with what it was given (a database url), and both are recorded
    and sent to the model. A resume checks the schema as masked here, as it was recorded."""
    description = tool.description or tool.title or f"The {tool.name} tool of MCP server {server}."
    return redactor.redact(description), _masked(dict(tool.input_schema or {"type": "object", "properties": {}}), redactor)


def _masked(value: Any, redactor: Redactor) -> Any:
    if isinstance(value, str):
        return redactor.redact(value)
    if isinstance(value, Mapping):
        return {k: _masked(v, redactor) for k, v in value.items()}
    if isinstance(value, list):
        return [_masked(v, redactor) for v in value]
    return value


def _clean(name: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_-]", "_", name)[:64] or "tool"


def api_names(offered: Iterable[tuple[str, str]], reserved: Iterable[str] = ()) -> dict[tuple[str, str], str]:
    """(server, tool) -> the name the model sees; ``server__tool`` where a name clashes."""
    pairs = list(offered)
    taken = set(reserved)
    counts: dict[str, int] = {}
    for _server, tool in pairs:
        counts[_clean(tool)] = counts.get(_clean(tool), 0) + 1
    out: dict[tuple[str, str], str] = {}
    for server, tool in pairs:
        plain = _clean(tool)
        name = plain if counts[plain] == 1 and plain not in taken else _clean(f"{server}__{tool}")
        if name in out.values():
            raise ValueError(f"two MCP tools would both be called {name!r}; rename a server in the config")
        out[(server, tool)] = name
    return out


def _resource_text(resource: Any) -> str | None:
    """An embedded resource's contents if they are text: a text resource of any MIME type (a
    JSON file is text to the model), or a ``text/*`` blob (bytes that are not UTF-8 replaced)."""
    text = getattr(resource, "text", None)
    if isinstance(text, str):
        return text
    blob, mime = getattr(resource, "blob", None), getattr(resource, "mime_type", None) or ""
    if not isinstance(blob, str) or not mime.startswith("text/") or cut_note(blob)[1]:
        return None  # a blob cut as it was read is no longer base64
    try:
        return base64.b64decode(blob, validate=True).decode("utf-8", errors="replace")
    except ValueError:
        return None


def _block_text(block: Any) -> str:
    kind = getattr(block, "type", "")
    if kind == "text":
        return str(block.text)
    if kind == "resource_link":
        return f"[resource link {getattr(block, 'name', '')}: {getattr(block, 'uri', '')}]"
    text = _resource_text(getattr(block, "resource", None)) if kind == "resource" else None
    if text is not None:
        return text
    try:
        from anthropic.lib.tools.mcp import UnsupportedMCPValueError, mcp_content
    except ImportError:
        return f"[{kind or 'content'} block not shown: a recorded tool result holds text]"
    try:
        converted: Mapping[str, Any] = mcp_content(block)
    except (UnsupportedMCPValueError, ValueError) as e:  # ValueError: a blob that is not base64
        return f"[{kind or 'content'} block not shown: {e}]"
    source = converted.get("source") or {}
    media = source.get("media_type") if isinstance(source, Mapping) else None
    return f"[{converted.get('type')} block{f' ({media})' if media else ''} not shown: a recorded tool result holds text]"


def result_text(result: Any) -> tuple[str, bool]:
    """A CallToolResult as (text, is_error); a text cut as it was read says so at the head."""
    parts = [cut_note(_block_text(b)) for b in getattr(result, "content", None) or []]
    structured = getattr(result, "structured_content", None)
    if not parts and structured is not None:
        parts.append(cut_note(json.dumps(structured, ensure_ascii=False)))
    text = "\n".join(kept for kept, _ in parts)
    cut = sum(n for _, n in parts)
    if cut:
        text = f"[this answer was cut as it was read from the MCP server: {cut:,} bytes of its text left out]\n{text}"
    return text, bool(getattr(result, "is_error", False))
