"""The demo agent with tools a run was given (MCP servers' tools): search, tag what it found, send a note.

Offline, the demo model cannot understand a task, but it can show what a run does with the
tools it is offered. A tool is recognised by its name: one with ``search`` in it finds things,
``tag`` labels one, ``send`` sends a note (the bundled notes server's ``search_notes``,
``tag_note`` and ``send_note``, and any server's tools named alike). Offered at least one of
them, the demo searches with a keyword of the task, tags the first thing found with it, sends
a note saying what it did, and reports. Arguments are filled from each tool's input schema,
by the property's name and type; every choice is a pure function of the task, the schemas and
the recorded results, so a replayed conversation gets the same turns (see ``scenario``).
"""

from __future__ import annotations

import re
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .reading import Outcome, inline_code, join_words

__all__ = ["ROLES", "Move", "Plan", "plan_for", "use_offered_tools"]

Move = tuple[str, tuple[tuple[str, dict[str, Any]], ...]]
"""One turn as this module yields it: the text, and the tool calls (name, arguments);
``scenario`` makes each a ``Turn``."""

ROLES = ("search", "tag", "send")
"""What the demo does with an offered tool, in order, each found by the word in its name."""

_STOP = frozenset(
    ["find", "search", "look", "show", "tell", "what", "which", "where", "when", "about", "with", "from", "into", "that", "this", "them", "then", "there", "their", "note", "notes", "send", "tag", "tags", "file", "files", "summary", "please", "make", "give", "list", "every", "each", "some", "your", "ours", "mine", "have", "does", "done", "also", "after", "before", "again"]
)
_NO_HITS = re.compile(r"\bno\b.*\bmatch|\bnothing found\b|\bnot found\b", re.I)


@dataclass(frozen=True)
class Plan:
    """The offered tool (its name and input schema) the demo uses for each role it found."""

    tools: tuple[tuple[str, str, Mapping[str, Any]], ...]
    """(role, tool name, input schema), in the order of ``ROLES``."""

    def tool(self, role: str) -> tuple[str, Mapping[str, Any]] | None:
        return next(((name, schema) for r, name, schema in self.tools if r == role), None)


def plan_for(schemas: Mapping[str, Mapping[str, Any]], builtin: Sequence[str]) -> Plan | None:
    """The tools to use for each role, among those offered beyond ``builtin``; None if none fits."""
    found: list[tuple[str, str, Mapping[str, Any]]] = []
    for role in ROLES:
        # The shortest name first: ``search`` before ``search_archive``; then by name, for a fixed choice.
        names = sorted((n for n in schemas if n not in builtin and role in n.lower()), key=lambda n: (len(n), n))
        if names:
            found.append((role, names[0], schemas[names[0]]))
    return Plan(tuple(found)) if found else None


def keyword_of(task: str) -> str:
    """The first word of the task that says what it is about (empty if none does)."""
    words: list[str] = re.findall(r"[A-Za-z][A-Za-z0-9_-]{3,}", task)
    for word in words:
        if word.lower() not in _STOP:
            return word.lower()
    return ""


def recipient_of(task: str) -> str:
    """Whom the task says to tell ("send ... to the team", "tell Ada"), else "me"."""
    match = re.search(r"\b(?:to|tell|for)\s+(?:the\s+|my\s+|our\s+)?([A-Za-z][\w-]*)", task, re.I)
    word = match.group(1) if match else ""
    return word if word and word.lower() not in _STOP | {"the", "a", "an"} else "me"


def arguments(schema: Mapping[str, Any], values: Mapping[str, str]) -> dict[str, Any]:
    """Arguments for every required property: by its name (``values``' words), else by its type."""
    properties = schema.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    required = schema.get("required")
    names = [str(n) for n in required] if isinstance(required, list) else []
    chosen: dict[str, Any] = {}
    for name in names:
        spec = properties.get(name)
        kind = spec.get("type") if isinstance(spec, Mapping) else None
        if kind in ("integer", "number"):
            chosen[name] = 1
        elif kind == "boolean":
            chosen[name] = False
        elif kind in ("array",):
            chosen[name] = []
        elif kind == "object":
            chosen[name] = {}
        else:
            chosen[name] = next((v for k, v in values.items() if k in name.lower()), values.get("", ""))
    return chosen


def hits_in(outcome: Outcome) -> list[str]:
    """What a search returned, one thing a line (none for an error or a "no match")."""
    if outcome.is_error or _NO_HITS.search(outcome.text):
        return []
    return [line.strip() for line in outcome.text.splitlines() if line.strip()][:20]


def _result(outcome: Outcome) -> str:
    text = " ".join(outcome.text.split())
    return inline_code(text[:117] + "..." if len(text) > 120 else text)


def use_offered_tools(task: str, plan: Plan) -> Generator[Move, list[Outcome], str]:
    """Search, tag, send with the planned tools, following what each returned; the report last."""
    keyword, to = keyword_of(task), recipient_of(task)
    said: list[str] = []
    names = join_words([inline_code(name) for _, name, _ in plan.tools])
    opening = (
        "(I'm nb_durable's offline demo model: no API key is set, so I can't read the task the way "
        f"Claude would. I'll show what the run does with the tools it was given: {names}.)\n\n"
    )
    hits: list[str] = []
    search = plan.tool("search")
    if search is not None:
        name, schema = search
        args = arguments(schema, {"query": keyword, "": keyword})
        looked = f" for {inline_code(keyword)}" if keyword else ""
        [found] = yield (opening + f"I'll search with {inline_code(name)}{looked}.", ((name, args),))
        opening = ""
        if found.is_error:
            return f"The search with {inline_code(name)} failed ({_result(found)}), so I stopped before changing anything."
        hits = hits_in(found)
        said.append(
            f"{inline_code(name)} found {join_words([inline_code(h) for h in hits])}"
            if hits
            else f"{inline_code(name)} found nothing ({_result(found)})"
        )
    tag = plan.tool("tag")
    if tag is not None and hits:
        name, schema = tag
        label = keyword or "demo"
        args = arguments(schema, {"name": hits[0], "id": hits[0], "note": hits[0], "path": hits[0], "tag": label,
                                  "label": label, "": label})  # fmt: skip
        [tagged] = yield (opening + f"I'll tag {inline_code(hits[0])} with {inline_code(label)}.", ((name, args),))
        opening = ""
        if tagged.is_error:
            return f"{'; '.join(said)}. Tagging with {inline_code(name)} failed ({_result(tagged)}), so I sent nothing."
        said.append(f"{inline_code(name)} answered {_result(tagged)}")
    send = plan.tool("send")
    if send is not None:
        name, schema = send
        found_text = f"found {join_words(hits)}" if hits else "found nothing"
        text = f"The offline demo searched for {keyword!r}: {found_text}." if search else f"About: {task.strip()[:200]}"
        args = arguments(schema, {"to": to, "recipient": to, "text": text, "body": text, "message": text,
                                  "content": text, "": text})  # fmt: skip
        [sent] = yield (opening + f"I'll send a note to {inline_code(to)} saying so.", ((name, args),))
        said.append(
            f"sending with {inline_code(name)} failed ({_result(sent)})"
            if sent.is_error
            else f"{inline_code(name)} answered {_result(sent)}"
        )
    return "Done with the tools I was given: " + "; ".join(said) + "."
