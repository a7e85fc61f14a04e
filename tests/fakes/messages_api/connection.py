"""One HTTP connection of the fake: keep-alive HTTP/1.1, JSON answers, chunked SSE, drops.

The handler only reads and writes; what to answer is decided by the
:class:`~tests.fakes.messages_api.server.MessagesAPIServer` it belongs to. A client that
vanishes mid-answer (killed, or timed out) surfaces as :class:`ClientGone`.
"""

from __future__ import annotations

import contextlib
import json
import socket
import sys
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from tests.fakes.messages_api.wire import sse_bytes

if TYPE_CHECKING:
    from tests.fakes.messages_api.server import MessagesAPIServer


class ClientGone(Exception):
    """The client closed the connection while we were answering."""


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the SDK's connection pool expects
    server_version = "FakeMessagesAPI/1.0"
    timeout = 120  # an idle keep-alive connection must not pin a thread forever
    server: FakeHTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests read ``server.requests`` instead."""

    def setup(self) -> None:
        """Track the socket so close() can end idle keep-alive connections."""
        super().setup()
        # Headers and body go out in separate writes: without NODELAY, Nagle's algorithm and
        # the client's delayed ACK add ~40 ms to every response.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.fake._track(self.connection, add=True)

    def finish(self) -> None:
        """Untrack the socket."""
        try:
            super().finish()
        finally:
            self.server.fake._track(self.connection, add=False)

    def do_POST(self) -> None:
        """Every method goes through one path: record, validate, act."""
        self.server.fake._handle(self)

    do_GET = do_PUT = do_DELETE = do_PATCH = do_POST

    # -- writing -------------------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        """Write, turning a vanished client into ClientGone."""
        try:
            self.wfile.write(data)
            self.wfile.flush()
        except OSError as e:  # BrokenPipe, ConnectionReset
            self.close_connection = True
            raise ClientGone from e

    def send_json(self, status: int, payload: Any, request_id: str, headers: dict[str, str] | None = None) -> None:
        """A complete JSON response."""
        self.send_raw(status, json.dumps(payload).encode(), request_id, headers)

    def send_raw(
        self, status: int, data: bytes, request_id: str, headers: dict[str, str] | None = None, content_type: str = "application/json"
    ) -> None:
        """A response with exactly these bytes (possibly none, or not JSON at all), JSON-typed unless told."""
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        self.send_header("request-id", request_id)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        try:
            self.end_headers()
        except OSError as e:
            self.close_connection = True
            raise ClientGone from e
        self.write(data)

    def start_stream(self, request_id: str) -> None:
        """Status line and headers of an SSE response (chunked, as the real API sends it)."""
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.send_header("request-id", request_id)
        try:
            self.end_headers()
        except OSError as e:
            self.close_connection = True
            raise ClientGone from e

    def send_event(self, name: str, data: dict[str, Any]) -> None:
        """One SSE event as one chunk."""
        payload = sse_bytes(name, data)
        self.write(b"%X\r\n%s\r\n" % (len(payload), payload))

    def send_events(self, events: Sequence[tuple[str, dict[str, Any]]]) -> None:
        """Every event, each as one chunk, in one write (nothing paces them)."""
        self.write(b"".join(b"%X\r\n%s\r\n" % (len(p), p) for p in (sse_bytes(name, data) for name, data in events)))

    def end_stream(self) -> None:
        """The last chunk."""
        self.write(b"0\r\n\r\n")

    def drop(self) -> None:
        """Close the connection now, whatever was (not) sent."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)


class FakeHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    # socketserver listens with a backlog of 5: a hundred clients connecting at once (a benchmark's
    # crash phase) overflowed it, and a dropped SYN is sent again only after 1, 2, 4... seconds.
    request_queue_size = 128
    fake: MessagesAPIServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Connection resets are part of the game (kills, drops); print anything else."""
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)
