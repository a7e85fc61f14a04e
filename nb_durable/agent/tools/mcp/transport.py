"""How a connection to one MCP server is made: a stdio server's process, or an HTTP session.

A stdio server runs under ``_keeper.py``, which kills its whole process tree when this process
dies (even by SIGKILL) or the connection closes, and its stderr goes to a pipe (``output``);
an HTTP server's answers come through ``capped_http``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

from .capped_http import IDENTITY, HttpRefusal, capped_transport
from .config import McpServerConfig
from .output import StderrTail, Words

__all__ = ["transport_for"]

_KEEPER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_keeper.py")


def transport_for(server: McpServerConfig, environ: Mapping[str, str]) -> tuple[Any, Any, Words]:
    """The HTTP client to close after (None for stdio), the SDK's transport, and what explains
    the server's failures: a stdio server's stderr, an HTTP server's last error status."""
    if server.transport == "http":
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        refusal = HttpRefusal()
        http = httpx2.AsyncClient(
            headers={**IDENTITY, **server.resolved_headers(environ)},
            timeout=httpx2.Timeout(server.startup_timeout, read=300.0),
            transport=capped_transport(refusal),
        )
        return http, streamable_http_client(server.expand(server.url, environ), http_client=http), refusal
    from mcp.client.stdio import StdioServerParameters, stdio_client

    command = server.expand(server.command, environ)
    args = [server.expand(a, environ) for a in server.args]
    if os.name == "posix":
        command, args = sys.executable, ["-I", "-S", _KEEPER, str(os.getpid()), command, *args]
    cwd = server.expand(server.cwd, environ) if server.cwd else None
    if cwd is not None and not os.path.isdir(cwd):
        # Said by the SDK, it named the path and not which setting held it.
        raise NotADirectoryError(f"its cwd {cwd} is not a directory (a relative cwd is taken from the config file's folder)")
    params = StdioServerParameters(
        command=command, args=args, env=server.resolved_env(environ), cwd=cwd, encoding_error_handler="replace"
    )
    stderr = StderrTail()
    return None, stdio_client(params, errlog=stderr.writer), stderr
