"""A TCP relay in front of the private PostgreSQL server that fails as a network does.

``cut_after_reply(marker)``: the connection whose client sends bytes holding ``marker`` is cut
right after the server answers them, the answer dropped. The server has then done the
statement (an autocommit one has committed) while the client only sees its connection end:
the outcome is unknown to it; with ``keep_server=True`` the server's side is left open, so its
session (and any lock it took) lives on. ``sever()``: every client's side is cut at once and the server's
sides are left open, so the server notices nothing and its sessions (and their locks) live on.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading

__all__ = ["Proxy"]


class Proxy:
    """Relays 127.0.0.1:``port`` to the server's port, one thread per connection."""

    def __init__(self, server_port: int) -> None:
        self._target = server_port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._lock = threading.Lock()
        self._marker: bytes | None = None
        self._keep_server = False
        self._clients: list[socket.socket] = []
        self._kept: list[socket.socket] = []  # server sides left open by sever()
        self.cuts = 0
        """How many answers were dropped by ``cut_after_reply``."""
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, url: str) -> str:
        """``url`` (of the private server) through this relay."""
        return url.replace(f":{self._target}/", f":{self.port}/", 1)

    def cut_after_reply(self, marker: bytes, *, keep_server: bool = False) -> None:
        with self._lock:
            self._marker, self._keep_server = marker, keep_server

    def sever(self) -> None:
        with self._lock:
            clients, self._clients = self._clients, []
        for client in clients:
            with contextlib.suppress(OSError):
                client.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._listener.close()
        self.sever()
        for kept in self._kept:
            kept.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self._target))
            with self._lock:
                self._clients.append(client)
            threading.Thread(target=self._relay, args=(client, upstream), daemon=True).start()

    def _relay(self, client: socket.socket, upstream: socket.socket) -> None:
        doomed = keep = False
        with selectors.DefaultSelector() as sel:
            sel.register(client, selectors.EVENT_READ)
            sel.register(upstream, selectors.EVENT_READ)
            while True:
                for key, _ in sel.select():
                    try:
                        data = key.fileobj.recv(65536)  # type: ignore[union-attr]
                    except OSError:
                        data = b""
                    if key.fileobj is client:
                        if not data:  # the client went (or was severed): the server side stays as it is
                            with self._lock:
                                severed = client not in self._clients
                                if client in self._clients:
                                    self._clients.remove(client)
                            client.close()
                            if severed:
                                self._kept.append(upstream)
                            else:
                                upstream.close()
                            return
                        with self._lock:
                            if self._marker is not None and self._marker in data:
                                self._marker, doomed, keep = None, True, self._keep_server
                        upstream.sendall(data)
                    else:
                        if not data or doomed:
                            self.cuts += doomed
                            client.close()
                            if keep and data:
                                self._kept.append(upstream)
                            else:
                                upstream.close()
                            with self._lock:
                                if client in self._clients:
                                    self._clients.remove(client)
                            return
                        with contextlib.suppress(OSError):
                            client.sendall(data)
