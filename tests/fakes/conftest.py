"""Fixtures of the fake's tests: one SDK client per module, servers closed at teardown."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import pytest

from tests.fakes import MessagesAPIServer


@pytest.fixture(autouse=True)
def _no_ambient_anthropic(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def base_client() -> Iterator[anthropic.Anthropic]:
    """One SDK client for the module: building one costs ~50 ms (its SSL context)."""
    with anthropic.Anthropic(api_key="test-key", base_url="http://127.0.0.1:9", max_retries=0) as client:
        yield client


@pytest.fixture
def serve(base_client: anthropic.Anthropic) -> Iterator[Any]:
    """``serve(turns, **options) -> (server, client)``; the servers are closed at teardown."""
    opened: list[MessagesAPIServer] = []

    def start(turns: Any, **options: Any) -> tuple[MessagesAPIServer, anthropic.Anthropic]:
        server = MessagesAPIServer(turns, **options)
        opened.append(server)
        # with_options shares the module client's connection pool; closing it is the module's job.
        return server, base_client.with_options(base_url=server.url)

    yield start
    for server in opened:
        server.close()
