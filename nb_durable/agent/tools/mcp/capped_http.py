"""The streamable HTTP transport's answers, cut as they are read, as a stdio server's stdout is.

``capped_transport()`` is the httpx2 transport of an HTTP server's client: every response whose
body is JSON or an event stream (the two forms of an MCP answer) passes through
``_capped.JsonLineCapper`` a chunk at a time, so each JSON string in it keeps its first
``STRING_LIMIT`` bytes and the SDK never holds a huge answer whole. The client asks for an
uncompressed body (``Accept-Encoding: identity``); a body compressed all the same, or of any
other type, passes unchanged. ``httpx2`` is imported only when an HTTP server is used.
``HttpRefusal`` keeps the last error status a message got, which explains a failure as a
stdio server's stderr does.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, ClassVar

from ...secrets import Redactor
from ._capped import JsonLineCapper

__all__ = ["IDENTITY", "HttpRefusal", "capped_transport"]

IDENTITY = {"Accept-Encoding": "identity"}
"""The header that asks for a body the capper can read as it comes."""

_CAPPED_TYPES = ("application/json", "text/event-stream")


class HttpRefusal:
    """The last error status an HTTP server answered (the SDK says only "Server returned an error
    response", so a refused token read like any failure)."""

    heading: ClassVar[str] = "its last HTTP error"

    def __init__(self) -> None:
        self.said = ""

    def text(self, redactor: Redactor) -> str:
        return redactor.redact(self.said)

    def close(self) -> None:
        pass


def capped_transport(refusal: HttpRefusal | None = None) -> Any:
    """An ``httpx2.AsyncBaseTransport`` over the default one, cutting long strings of MCP answers."""
    import httpx2

    class CappedStream(httpx2.AsyncByteStream):
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        async def __aiter__(self) -> AsyncIterator[bytes]:
            capper = JsonLineCapper()
            async for chunk in self.inner:
                yield capper.feed(chunk)

        async def aclose(self) -> None:
            await self.inner.aclose()

    class CappedTransport(httpx2.AsyncBaseTransport):
        def __init__(self) -> None:
            self.inner = httpx2.AsyncHTTPTransport()

        async def handle_async_request(self, request: Any) -> Any:
            response = await self.inner.handle_async_request(request)
            # POST carries every MCP message; a GET or DELETE refused (405: no event stream) is the norm.
            if response.status_code >= 400 and request.method == "POST" and refusal is not None:
                phrase = httpx2.codes.get_reason_phrase(response.status_code)
                refusal.said = f"{response.status_code} {phrase} (to {request.method} {request.url})"
            kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
            if kind not in _CAPPED_TYPES or response.headers.get("content-encoding", "identity").lower() != "identity":
                return response
            headers = [(k, v) for k, v in response.headers.raw if k.lower() != b"content-length"]  # the body changes
            return httpx2.Response(response.status_code, headers=headers, stream=CappedStream(response.stream),
                                   extensions=response.extensions)  # fmt: skip

        async def aclose(self) -> None:
            await self.inner.aclose()

    return CappedTransport()
