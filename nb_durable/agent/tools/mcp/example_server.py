"""A small MCP server for the tutorial (notebook 07): notes in a folder, three kinds of effect.

``python -m nb_durable.agent.tools.mcp.example_server FOLDER [--changed]`` serves over stdio,
with the official ``mcp`` SDK (never imported by nb_durable itself):

* ``search_notes(query)``, read-only (``readOnlyHint``): the notes whose text contains the query.
* ``tag_note(name, tag)``, idempotent (``idempotentHint``): adds a tag once, however often called.
* ``send_note(to, text)``, destructive (``destructiveHint``): appends to ``outbox.txt``; a call
  whose idempotency key (the request's ``_meta``, ``nb_durable/idempotency_key``) was already
  sent is answered as before and not sent twice, as a payment API does with a retried request.

``--changed`` serves ``send_note`` with another input (an extra ``cc``), to show what a resume
does when a tool changed. ``$NOTES_TOKEN`` stands for a credential the server needs: the
``whoami`` answer contains it, and nb_durable masks it.
"""

# No ``from __future__ import annotations``: the SDK reads the tools' annotations at runtime,
# and ``Context`` is imported inside ``build``.
import argparse
import json
import os
from pathlib import Path
from typing import Any

KEY = "nb_durable/idempotency_key"


def build(folder: Path, changed: bool = False) -> Any:
    """The server over ``folder`` (notes are ``*.md`` files there)."""
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.types import ToolAnnotations

    app = MCPServer("notes")
    outbox = folder / "outbox.txt"

    def key_of(ctx: Context) -> str:
        return str((ctx.request_context.meta or {}).get(KEY, ""))

    @app.tool(annotations=ToolAnnotations(read_only_hint=True))
    def search_notes(query: str) -> str:
        """Find the notes whose text contains the query (case-insensitive)."""
        hits = [p.name for p in sorted(folder.glob("*.md")) if query.lower() in p.read_text().lower()]
        return "\n".join(hits) or "no note matches"

    @app.tool(annotations=ToolAnnotations(read_only_hint=True))
    def whoami() -> str:
        """Say which account the server works as."""
        return f"notes server, token {os.environ.get('NOTES_TOKEN', '(none)')}"

    @app.tool(annotations=ToolAnnotations(idempotent_hint=True, destructive_hint=False))
    def tag_note(name: str, tag: str) -> str:
        """Tag a note (tagging it again with the same tag changes nothing)."""
        tags_file = folder / "tags.json"
        tags: dict[str, list[str]] = json.loads(tags_file.read_text()) if tags_file.exists() else {}
        if tag not in tags.setdefault(name, []):
            tags[name].append(tag)
        tags_file.write_text(json.dumps(tags, sort_keys=True))
        return f"{name}: {', '.join(tags[name])}"

    def send(to: str, text: str, ctx: Context) -> str:
        key = key_of(ctx)
        sent = [line.split("\t", 1)[0] for line in outbox.read_text().splitlines()] if outbox.exists() else []
        if key and key in sent:
            return f"already sent to {to} (key {key})"
        with outbox.open("a") as f:
            f.write(f"{key}\t{to}: {text}\n")
        return f"sent to {to}"

    if changed:

        @app.tool(annotations=ToolAnnotations(destructive_hint=True))
        def send_note(to: str, text: str, cc: str, ctx: Context) -> str:
            """Send a note to someone, with a copy to cc."""
            return send(to, f"{text} (cc {cc})", ctx)

    else:

        @app.tool(annotations=ToolAnnotations(destructive_hint=True))
        def send_note(to: str, text: str, ctx: Context) -> str:  # type: ignore[misc]
            """Send a note to someone (appends to the outbox)."""
            return send(to, text, ctx)

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description="The tutorial's notes MCP server (stdio).")
    parser.add_argument("folder")
    parser.add_argument("--changed", action="store_true")
    args = parser.parse_args()
    folder = Path(args.folder)
    folder.mkdir(parents=True, exist_ok=True)
    build(folder, args.changed).run()


if __name__ == "__main__":
    main()
