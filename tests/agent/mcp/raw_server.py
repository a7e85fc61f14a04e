"""A raw MCP server over stdio, JSON-RPC by hand (standard library only), for the edge tests.

``python raw_server.py DIR [NOISE]`` answers ``initialize``, ``ping``, ``tools/list`` and ``tools/call``
one line per message, as the MCP stdio transport says, and misbehaves on request, as real
servers do (every tool has ``destructiveHint``):

* ``echo(text)``: answers the text; given NOISE, it first prints NOISE as a line of its own
  on stdout (a library's debug print, not JSON-RPC).
* ``big(size)``: answers a text of ``size`` characters, written to stdout in pieces, so the
  server never holds more than a piece of the line it sends.
* ``shout(size)``: writes a line of ``size`` characters to stderr, then exits (a server's
  dying words, which the client shows).
* ``latin()``: answers ``café`` encoded in Latin-1: a line that is not UTF-8.
* ``attach()``: answers with no text block, only what a file server sends: a text resource
  (``text/plain``), a JSON one (``application/json``), a ``text/plain`` blob that is not
  UTF-8, a PNG image and a resource link.
* ``env_names()``: answers the names of the variables in its environment, one a line.
* ``$RAW_NOTE``, when set, ends ``echo``'s description and its ``text`` property's: a server
  that describes itself with what it was given (a database url, a secret).
* ``$RAW_EXTRA_PROPERTY``, when set, is one more property of ``echo``'s input schema: a server
  that changed a tool (its name may hold anything a server sends, escape sequences too).
* ``slow(seconds)``: waits ``seconds``, then appends its request's idempotency key to
  ``DIR/done.txt`` (its effect) and answers. A ``notifications/cancelled`` for it ends the wait
  at once: ``DIR/cancelled.txt`` gets the request id and the reason, there is no effect and no
  answer, as the MCP specification asks of a cancelled request. ``DIR/slow.started`` appears
  when it begins.
"""

from __future__ import annotations

import base64
import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

KEY = "nb_durable/idempotency_key"
PIECE = 1 << 16

_out = threading.Lock()
_cancels: dict[Any, threading.Event] = {}


def _tool(name: str, description: str, **properties: str) -> dict[str, Any]:
    schema = {"type": "object", "properties": {k: {"type": v} for k, v in properties.items()}, "required": list(properties)}
    return {"name": name, "description": description, "inputSchema": schema, "annotations": {"destructiveHint": True}}


NOTE = f" ({os.environ['RAW_NOTE']})" if os.environ.get("RAW_NOTE") else ""
TOOLS = [
    _tool("echo", f"Say the text back{NOTE}.", text="string", **({os.environ["RAW_EXTRA_PROPERTY"]: "string"} if os.environ.get("RAW_EXTRA_PROPERTY") else {})),
    _tool("big", "Answer with a text of the given size.", size="integer"),
    _tool("shout", "Write a long line to stderr.", size="integer"),
    _tool("slow", "Wait, then record the call.", seconds="number"),
    _tool("latin", "Answer with text encoded in Latin-1, not UTF-8."),
    _tool("attach", "Answer with resources, an image and a link."),
    _tool("env_names", "Answer the names of the variables in its environment."),
]
TOOLS[0]["inputSchema"]["properties"]["text"]["description"] = f"What to say{NOTE}"

ATTACHED = [
    {"type": "resource", "resource": {"uri": "file:///notes/plan.txt", "mimeType": "text/plain", "text": "the plan: ship on Friday"}},
    {"type": "resource", "resource": {"uri": "file:///notes/plan.json", "mimeType": "application/json", "text": '{"ship": "Friday"}'}},
    {"type": "resource", "resource": {"uri": "file:///notes/old.txt", "mimeType": "text/plain",
                                      "blob": base64.b64encode("caf\u00e9 old".encode("latin-1")).decode()}},
    {"type": "image", "mimeType": "image/png", "data": base64.b64encode(b"\x89PNG\r\n").decode()},
    {"type": "resource_link", "uri": "file:///notes/big.csv", "name": "big.csv"},
]


def send(message: dict[str, Any]) -> None:
    with _out:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


def answer(request_id: Any, text: str) -> None:
    send({"jsonrpc": "2.0", "id": request_id, "result": {"content": [{"type": "text", "text": text}], "isError": False}})


def big(request_id: Any, size: int) -> None:
    head = json.dumps({"jsonrpc": "2.0", "id": request_id, "result": {"isError": False, "content": [{"type": "text", "text": ""}]}})
    before, after = head.split('"text": ""', 1)
    with _out:
        sys.stdout.write(before + '"text": "')
        left = size
        while left > 0:
            n = min(PIECE, left)
            sys.stdout.write("abcdefghij" * (n // 10) + "x" * (n % 10))
            left -= n
        sys.stdout.write('"' + after + "\n")
        sys.stdout.flush()


def call(folder: Path, request_id: Any, params: dict[str, Any]) -> None:
    name, args = params.get("name"), params.get("arguments") or {}
    key = str((params.get("_meta") or {}).get(KEY, ""))
    if name == "echo":
        noise = sys.argv[2] if len(sys.argv) > 2 else ""
        if noise:
            with _out:
                sys.stdout.write(noise + "\n")
                sys.stdout.flush()
        answer(request_id, str(args.get("text", "")))
    elif name == "big":
        big(request_id, int(args["size"]))
    elif name == "shout":
        size, piece = int(args["size"]), "!" * PIECE
        for _ in range(size // PIECE):
            sys.stderr.write(piece)
        sys.stderr.write("!" * (size % PIECE) + "\n")
        sys.stderr.flush()
        os._exit(5)
    elif name == "latin":
        line = json.dumps({"jsonrpc": "2.0", "id": request_id, "result": {"content": [{"type": "text", "text": "caf\u00e9"}], "isError": False}})
        with _out:
            sys.stdout.buffer.write(line.replace("\\u00e9", "\u00e9").encode("latin-1") + b"\n")
            sys.stdout.buffer.flush()
    elif name == "env_names":
        answer(request_id, "\n".join(sorted(os.environ)))
    elif name == "attach":
        send({"jsonrpc": "2.0", "id": request_id, "result": {"content": ATTACHED, "isError": False}})
    elif name == "slow":
        cancelled = _cancels.setdefault(request_id, threading.Event())
        (folder / "slow.started").write_text(str(os.getpid()))
        if cancelled.wait(float(args["seconds"])):
            return  # a cancelled request is never answered
        with (folder / "done.txt").open("a") as f:
            f.write(key + "\n")
        answer(request_id, "done")
    else:
        send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32602, "message": f"no tool {name!r}"}})


def main() -> None:
    folder = Path(sys.argv[1])
    folder.mkdir(parents=True, exist_ok=True)
    for line in sys.stdin:
        message = json.loads(line)
        method, request_id, params = message.get("method"), message.get("id"), message.get("params") or {}
        if method == "initialize":
            result: dict[str, Any] = {"protocolVersion": params.get("protocolVersion"), "capabilities": {"tools": {}},
                      "serverInfo": {"name": "raw", "version": "1"}}  # fmt: skip
            send({"jsonrpc": "2.0", "id": request_id, "result": result})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": request_id, "result": {"tools": TOOLS}})
        elif method == "tools/call":
            threading.Thread(target=call, args=(folder, request_id, params), daemon=True).start()
        elif method == "notifications/cancelled":
            rid = params.get("requestId")
            with (folder / "cancelled.txt").open("a") as f:
                f.write(f"{rid}\t{params.get('reason', '')}\n")
            _cancels.setdefault(rid, threading.Event()).set()
        elif method == "ping":
            send({"jsonrpc": "2.0", "id": request_id, "result": {}})
        elif request_id is not None:
            send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": f"no method {method!r}"}})


if __name__ == "__main__":
    main()
