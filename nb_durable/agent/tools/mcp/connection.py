"""Live connections to MCP servers: opened on the first call that needs one, held on an event
loop in a thread of their own, closed with the run.

The agent loop is synchronous and the MCP SDK is async, so each ``McpConnections`` owns one
asyncio loop in a daemon thread; a call from the loop's thread is a coroutine handed to it
and waited for with a deadline, so no cell ever hangs on a server. Each server's ``Client``
lives inside one task (its ``async with`` must open and close in the same task) that holds
the connection until it is stopped. Nothing here starts at construction: a finished run
replays without any server running.

Invariants:

* One process (or session) per server: calls made at once wait for one start, and share its
  failure; a start a stop cancels ends its process before another call may start one.
* Server processes end with the run. A stdio server runs under ``_keeper.py``, which kills
  its whole process tree when this process dies (even by SIGKILL) or the connection closes.
* No answer reaches this process whole: a stdio server's stdout comes through its keeper, an
  HTTP server's body through ``capped_http``, each JSON string cut at 1 MiB as it is read.
* Failures are ``McpServerError`` naming the server, with ``transient`` (trying again may
  help) and ``ran`` (the call may have reached the server, so an effect may have happened).
  A connection that died, or a call that timed out, is stopped, so the next call starts the
  server afresh instead of talking to a wedged one.
* What a server prints outside JSON-RPC (``output``): its stderr goes to a pipe, never to a
  file; its last lines (an HTTP server's last error status), redacted, explain a failed start
  or a death; a line on a stdio server's stdout that is not JSON-RPC is one warning naming it.
* A call in flight when the run is stopped (its ``stop`` signal) is cancelled, as the MCP
  specification provides: the SDK sends ``notifications/cancelled`` as the call's task is
  cancelled, and the caller gets ``RunStopped`` at once. Whether the server had begun the
  effect is unknown (a server may ignore a cancellation), so an external call's step is in
  doubt, as a ``run_bash`` command cut off by a stop is.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ....errors import McpNotInstalledError, McpServerError
from ...secrets.redaction import Redactor, hold
from .config import McpConfig, McpServerConfig
from .output import Speaker, Words, install_noise_filter, last_words
from .transport import transport_for

__all__ = ["IDEMPOTENCY_META_KEY", "McpConnections", "require_mcp"]

IDEMPOTENCY_META_KEY = "nb_durable/idempotency_key"
"""The ``_meta`` entry of every tools/call carrying the step's key, so a server can deduplicate."""

_CANCEL_WAIT = 5.0  # seconds a cancelled call may take to send its notifications/cancelled


class Stop(Protocol):
    """A run's stop signal, as a call watches it (``agent.run.stopping.StopSignal``)."""

    @property
    def requested(self) -> bool: ...

    def check(self) -> None: ...


def require_mcp() -> None:
    """Raise McpNotInstalledError (naming the ``nb-durable[mcp]`` extra) unless ``mcp`` imports."""
    try:
        import mcp  # noqa: F401
    except ImportError:
        raise McpNotInstalledError() from None


@dataclass
class _Live:
    """One open connection: the client, and the event that ends the task holding it."""

    server: McpServerConfig
    closing: asyncio.Event = field(default_factory=asyncio.Event)
    client: Any = None
    task: asyncio.Task[None] | None = None
    said: Words | None = None
    ended: BaseException | None = None


def _describe(error: BaseException) -> str:
    """The innermost causes of an exception (task groups wrap the one that matters)."""
    inner = getattr(error, "exceptions", None)  # an ExceptionGroup (no such name before 3.11)
    if isinstance(inner, tuple) and inner:
        return "; ".join(dict.fromkeys(_describe(e) for e in inner))
    text = str(error) or type(error).__name__
    return f"{type(error).__name__}: {text}" if type(error).__name__ not in text else text


class McpConnections:
    """The live connections to the servers of one config; ``close()`` stops them all."""

    def __init__(self, config: McpConfig, *, environ: Mapping[str, str] | None = None) -> None:
        self.config = config
        self._environ = environ
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._live: dict[str, _Live] = {}
        # On the loop's thread only: the start of each server under way, and why its last failed.
        self._opening: dict[str, asyncio.Lock] = {}
        self._failed: dict[str, str] = {}
        # Starts given up, still ending their processes: the loop outlives ``close`` until they end.
        self._ending: set[asyncio.Task[None]] = set()
        self.starts: dict[str, int] = {}
        """How many times each server was started (a restart after a crash counts)."""
        # Masked in every tool's result, not only the servers': run_bash could read them first (config, /proc).
        for server in config.servers:
            for label, value in server.secret_values(self.environ):
                hold(label, value)

    @property
    def environ(self) -> Mapping[str, str]:
        return os.environ if self._environ is None else self._environ

    def check_variables(self) -> None:
        """``McpConfigError`` naming a variable a server's config needs and nobody set, before
        any server starts: a person's to set (exit 2), not a server that failed."""
        for server in self.config.servers:
            server.check_variables(self.environ)

    def redactor(self) -> Redactor:
        """Masks every env and header value of the config (and the environment's secrets)."""
        return self.config.secrets(self.environ)

    def running(self) -> list[str]:
        """The servers connected now."""
        return sorted(name for name, live in self._live.items() if live.ended is None)

    # -- the loop thread ---------------------------------------------------------------------

    def _run(self, coro: Any, deadline: float, stop: Stop | None = None) -> Any:
        with self._lock:
            if self._loop is None:
                require_mcp()
                install_noise_filter()
                loop = asyncio.new_event_loop()
                self._thread = threading.Thread(target=_serve, args=(loop,), name="nb-durable-mcp", daemon=True)
                self._thread.start()
                self._loop = loop
        settled = threading.Event()

        async def tracked() -> Any:
            try:
                return await coro
            finally:
                settled.set()

        future = asyncio.run_coroutine_threadsafe(tracked(), self._loop)
        end = time.monotonic() + deadline
        try:
            while True:
                left = end - time.monotonic()
                try:
                    return future.result(max(0.0, min(left, 0.1) if stop is not None else left))
                except concurrent.futures.TimeoutError:
                    if stop is not None and stop.requested:
                        future.cancel()  # the SDK sends notifications/cancelled as the task unwinds
                        settled.wait(_CANCEL_WAIT)
                        stop.check()
                    if time.monotonic() >= end:
                        raise
        except BaseException:
            future.cancel()
            raise

    # -- opening -----------------------------------------------------------------------------

    async def _hold(self, live: _Live, ready: asyncio.Future[None]) -> None:
        from mcp import Client

        server = live.server
        Speaker(server.name, self.redactor()).enter()  # seen by the SDK's tasks started below
        http = None
        try:
            http, transport, live.said = transport_for(server, self.environ)
            async with Client(transport, read_timeout_seconds=server.timeout) as client:
                live.client = client
                ready.set_result(None)
                await live.closing.wait()
        except BaseException as e:
            live.ended = e
            if not ready.done():
                ready.set_exception(e)
        finally:
            if live.ended is None:
                live.ended = ConnectionError("closed")
            if http is not None:
                await http.aclose()
            if live.said is not None:
                live.said.close()

    async def _open(self, name: str) -> _Live:
        # Calls made at once (the children of one turn) wait for one start, not a server each.
        opening = self._opening.setdefault(name, asyncio.Lock())
        waited = opening.locked()
        async with opening:
            failed = self._failed.get(name)
            if failed is not None and waited:
                # The start this call waited for failed: one more would fail as slowly, in turn.
                raise McpServerError(failed, server=name, transient=True)
            try:
                live = await self._open_held(name)
            except McpServerError as e:
                self._failed[name] = str(e)
                raise
            self._failed.pop(name, None)
            return live

    async def _open_held(self, name: str) -> _Live:
        live = self._live.get(name)
        if live is not None and live.ended is None and live.client is not None:
            return live
        server = self.config.server(name)
        live = _Live(server)
        self._live[name] = live
        self.starts[name] = self.starts.get(name, 0) + 1
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        live.task = asyncio.create_task(self._hold(live, ready))
        try:
            await asyncio.wait_for(asyncio.shield(ready), server.startup_timeout)
        except asyncio.TimeoutError:
            ready.cancel()  # nobody waits for it now: what the start ends with is not an error to log
            await self._stop(live)
            raise McpServerError(
                f"MCP server {name!r} did not start within {server.startup_timeout:g}s. "
                f"Check its command (or url), or raise its startupTimeout in the config.{await self._said(live)}",
                server=name,
                transient=True,
            ) from None
        except McpServerError:
            raise
        except asyncio.CancelledError:  # a stop: its server ends before another call may start one
            ready.cancel()
            await self._stop(live, wait=_CANCEL_WAIT)
            raise
        except Exception as e:
            await self._stop(live)
            raise McpServerError(
                f"MCP server {name!r} did not start ({self.redactor().redact(_describe(e))}). Check its "
                f"{'url and headers' if server.transport == 'http' else 'command, args, env and cwd'} in the config.{await self._said(live)}",
                server=name,
                transient=True,
            ) from None
        return live

    async def _said(self, live: _Live) -> str:
        return await asyncio.to_thread(last_words, live.said, self.redactor())  # off the loop: it waits for them

    async def _stop(self, live: _Live, wait: float = 0.0) -> None:
        """Close ``live``; a start given up ends its process within ``wait`` seconds, if given."""
        live.closing.set()
        if live.task is not None:
            try:
                # A connection never made has no session to close: its start is given up at once
                # (its task waits on the server, not on ``closing``).
                await asyncio.wait_for(asyncio.shield(live.task), 10 if live.client is not None else 0)
            except (asyncio.TimeoutError, Exception):
                live.task.cancel()
                if wait > 0:
                    await asyncio.wait({live.task}, timeout=wait)
                if not live.task.done():
                    self._ending.add(live.task)
                    live.task.add_done_callback(self._ending.discard)
        if self._live.get(live.server.name) is live:
            del self._live[live.server.name]

    # -- the calls ---------------------------------------------------------------------------

    def list_tools(self, name: str) -> list[Any]:
        """Every tool the server offers (``mcp`` Tool objects), starting it if need be."""
        server = self.config.server(name)

        async def go() -> list[Any]:
            live = await self._open(name)
            tools: list[Any] = []
            cursor = None
            for _ in range(100):
                try:
                    page = await live.client.list_tools(cursor=cursor)
                except Exception as e:
                    await self._stop(live)
                    raise McpServerError(
                        f"MCP server {name!r} could not list its tools ({self.redactor().redact(_describe(e))}){await self._said(live)}",
                        server=name,
                        transient=True,
                    ) from None
                tools.extend(page.tools)
                cursor = page.next_cursor
                if cursor is None:
                    break
            return tools

        tools: list[Any] = self._deadline(name, go(), server.startup_timeout + server.timeout)
        return tools

    def call(
        self, name: str, tool: str, arguments: Mapping[str, Any], *, key: str, timeout: float | None = None, stop: Stop | None = None
    ) -> Any:
        """Call ``tool`` on server ``name`` with the step's idempotency ``key`` in ``_meta``; a
        ``stop`` asked for meanwhile cancels the call and raises ``RunStopped``."""
        server = self.config.server(name)
        limit = timeout or server.timeout

        async def go() -> Any:
            from mcp.shared.exceptions import MCPError
            from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

            live = await self._open(name)
            try:
                return await live.client.call_tool(
                    tool, dict(arguments), read_timeout_seconds=limit, meta={IDEMPOTENCY_META_KEY: key}
                )
            except MCPError as e:
                if e.code == REQUEST_TIMEOUT:
                    await self._stop(live)
                    raise McpServerError(
                        f"MCP server {name!r} did not answer {tool} within {limit:g}s; the connection was closed "
                        "(a stdio server was stopped). Raise its timeout in the config if the call is slow.",
                        server=name,
                        transient=True,
                        ran=True,
                    ) from None
                if e.code == CONNECTION_CLOSED or live.ended is not None:
                    await self._stop(live)
                    raise McpServerError(
                        f"MCP server {name!r} closed the connection during {tool} (it crashed or exited){await self._said(live)}",
                        server=name,
                        transient=True,
                        ran=True,
                    ) from None
                raise McpServerError(
                    f"MCP server {name!r} answered {tool} with error {e.code}: {self.redactor().redact(e.message)}",
                    server=name,
                ) from None
            except Exception as e:
                await self._stop(live)
                raise McpServerError(
                    f"MCP server {name!r} failed during {tool} ({self.redactor().redact(_describe(e))}){await self._said(live)}",
                    server=name,
                    transient=True,
                    ran=True,
                ) from None

        return self._deadline(name, go(), server.startup_timeout + limit + 5, stop)

    def _deadline(self, name: str, coro: Any, seconds: float, stop: Stop | None = None) -> Any:
        try:
            return self._run(coro, seconds, stop)
        except concurrent.futures.TimeoutError:
            self.stop(name)
            raise McpServerError(
                f"MCP server {name!r} did not answer within {seconds:g}s; it was stopped", server=name, transient=True, ran=True
            ) from None

    def stop(self, name: str) -> None:
        """Close the connection to one server (its process ends); the next call starts it again."""
        live = self._live.get(name)
        if live is not None and self._loop is not None:
            asyncio.run_coroutine_threadsafe(self._stop(live), self._loop).result(15)

    def close(self) -> None:
        """Stop every server and the loop's thread; safe to call twice."""
        with self._lock:
            loop, self._loop = self._loop, None
        if loop is None:
            return

        async def stop_all() -> set[asyncio.Task[None]]:
            await asyncio.gather(*(self._stop(live) for live in list(self._live.values())), return_exceptions=True)
            return set(self._ending)

        ending: set[asyncio.Task[None]] = set()
        with contextlib.suppress(Exception):
            ending = asyncio.run_coroutine_threadsafe(stop_all(), loop).result(20)

        async def finish() -> None:
            # A start given up ends its process in the SDK's time (a grace, then a signal): not the caller's.
            if ending:
                await asyncio.wait(ending, timeout=10)
            loop.stop()

        asyncio.run_coroutine_threadsafe(finish(), loop)
        if self._thread is not None and not ending:
            self._thread.join(5)


def _serve(loop: asyncio.AbstractEventLoop) -> None:
    """Run the loop, then close it here: closed sooner, a given-up server's exit is logged against it."""
    try:
        loop.run_forever()
    finally:
        loop.close()
