"""Fixtures the agent tests share: a workspace with a file in it, loopback API servers, and an
OpenTelemetry provider whose finished spans are kept in memory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.fakes import MessagesAPIServer, ScriptedScenario


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A workspace folder holding notes.txt."""
    folder = tmp_path / "work"
    folder.mkdir()
    (folder / "notes.txt").write_text("remember the milk\n")
    return folder


@pytest.fixture
def serve() -> Iterator[Any]:
    """``serve(*turns) -> server``: loopback Messages API servers, closed at teardown."""
    servers: list[MessagesAPIServer] = []

    def start(*turns: Any) -> MessagesAPIServer:
        server = MessagesAPIServer(ScriptedScenario(list(turns)))
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


@pytest.fixture
def no_ambient_anthropic(monkeypatch: pytest.MonkeyPatch) -> None:
    """No key, token or base URL from the developer's environment: the test names its own endpoint."""
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def spans() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    """A tracer provider and the in-memory exporter its finished spans go to."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()
