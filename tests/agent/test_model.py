"""AnthropicModel through the real SDK against the loopback Messages API: replies, streaming,
and how every failure is classified (retry it, or fix something first)."""

from __future__ import annotations

from typing import Any

import pytest

from nb_durable.agent.models.anthropic import AnthropicModel, credentials_in_environment, retry_after
from nb_durable.agent.models.failures import is_transient
from nb_durable.agent.models.messages import api_error
from nb_durable.errors import ModelError, TransientModelError
from tests.fakes import Drop, Error, MessagesAPIServer, StreamError, reply, tool_use

REQUEST: dict[str, Any] = {
    "model": "claude-test-1",
    "max_tokens": 256,
    "messages": [{"role": "user", "content": "hi"}],
}


def model_for(server: MessagesAPIServer, *, stream: bool = True) -> AnthropicModel:
    return AnthropicModel(api_key="test-key", base_url=server.url, stream=stream, timeout=10)


@pytest.mark.parametrize("stream", [True, False])
def test_a_reply_comes_back_as_message_json_with_its_request_id(serve: Any, stream: bool) -> None:
    server = serve(reply("Let me look.", tool_use("read_file", {"path": "a.py"})))
    pieces: list[str] = []
    out = model_for(server, stream=stream).create(REQUEST, on_text=pieces.append)
    message = out["message"]
    assert message["stop_reason"] == "tool_use"
    assert [b["type"] for b in message["content"]] == ["text", "tool_use"]
    assert message["content"][1]["input"] == {"path": "a.py"}
    assert message["usage"]["input_tokens"] > 0
    assert out["request_id"] == server.requests[0].request_id
    if stream:
        assert "".join(pieces) == "Let me look." and len(pieces) > 1
    assert server.requests[0].headers["authorization"] == "Bearer test-key"


@pytest.mark.parametrize(
    ("fault", "status", "error_type", "wait"),
    [
        (Error(529, retry_after_ms=50), 529, "overloaded_error", 0.05),
        (Error(429, retry_after="2"), 429, "rate_limit_error", 2.0),
        (Error(500), 500, "api_error", None),
        (StreamError(error_type="overloaded_error", partial_text="Hel"), 200, "overloaded_error", None),
    ],
)
def test_transient_failures_say_so_with_the_servers_wait(
    serve: Any, fault: Any, status: int, error_type: str, wait: float | None
) -> None:
    server = serve(fault)
    with pytest.raises(TransientModelError) as info:
        model_for(server).create(REQUEST)
    assert (info.value.status, info.value.error_type) == (status, error_type)
    assert info.value.retry_after == wait


def test_a_connection_dropped_mid_stream_is_transient(serve: Any) -> None:
    for drop in (Drop(), Drop(mid_stream=True)):
        server = serve(drop)
        with pytest.raises(TransientModelError, match="connection|reach"):
            model_for(server).create(REQUEST)


@pytest.mark.parametrize(
    ("status", "advice"),
    [(401, "check ANTHROPIC_API_KEY"), (403, "permissions"), (404, "check the model name"), (400, "malformed")],
)
def test_permanent_failures_say_what_to_fix(serve: Any, status: int, advice: str) -> None:
    server = serve(Error(status))
    with pytest.raises(ModelError) as info:
        model_for(server).create(REQUEST)
    assert not isinstance(info.value, TransientModelError)
    assert info.value.status == status
    assert advice in str(info.value)
    assert "test-key" not in str(info.value)


# (status, error type, transient?); status 200 is an error event in a stream that began well.
TRANSIENCE = [
    (200, "rate_limit_error", True),
    (200, "overloaded_error", True),
    (200, "api_error", True),
    (200, "invalid_request_error", False),
    (529, "overloaded_error", True),
    (503, "api_error", True),
    (500, "api_error", True),
    (429, "rate_limit_error", True),
    (408, "timeout_error", True),
    (409, "invalid_request_error", True),
    (400, "invalid_request_error", False),
    (401, "authentication_error", False),
    (403, "permission_error", False),
    (404, "not_found_error", False),
    (413, "request_too_large", False),
]


@pytest.mark.parametrize(("status", "error_type", "transient"), TRANSIENCE)
def test_the_real_model_and_a_scripted_failure_agree_on_what_is_worth_retrying(
    serve: Any, status: int, error_type: str, transient: bool
) -> None:
    # A test scripts api_error(...) to stand for what the API would do; if the two disagreed,
    # a test could pass with a retry that the real run would never make, or the reverse.
    fault = StreamError(error_type=error_type) if status == 200 else Error(status, error_type=error_type)
    with pytest.raises(ModelError) as real:
        model_for(serve(fault)).create(REQUEST)
    scripted = api_error(status, error_type=error_type)
    assert (real.value.status, real.value.error_type) == (scripted.status, scripted.error_type) == (status, error_type)
    assert isinstance(real.value, TransientModelError) is transient
    assert isinstance(scripted, TransientModelError) is transient
    assert is_transient(status, error_type) is transient


def test_no_credentials_is_a_clear_model_error(monkeypatch: pytest.MonkeyPatch, serve: Any) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    assert not credentials_in_environment()
    server = serve(reply("never"))
    with pytest.raises(ModelError, match="ANTHROPIC_API_KEY"):
        AnthropicModel(base_url=server.url).create(REQUEST)


def test_the_repr_never_shows_the_key() -> None:
    assert "sekrit" not in repr(AnthropicModel(api_key="sk-ant-sekrit-123456"))


class _Headers(dict[str, str]):
    pass


class _Response:
    def __init__(self, **headers: str) -> None:
        self.headers = _Headers(headers)


def test_retry_after_prefers_milliseconds_then_seconds_then_dates() -> None:
    assert retry_after(_Response(**{"retry-after-ms": "250", "retry-after": "9"})) == 0.25
    assert retry_after(_Response(**{"retry-after": "3"})) == 3.0
    assert retry_after(_Response(**{"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"})) == 0.0
    assert retry_after(_Response(**{"retry-after": "soon"})) is None
    assert retry_after(_Response()) is None


def test_an_error_event_mid_stream_says_the_answer_failed_not_that_the_api_answered_200(serve: Any) -> None:
    for error_type, kind in (("overloaded_error", TransientModelError), ("invalid_request_error", ModelError)):
        server = serve(StreamError(error_type=error_type, partial_text="Hel"))
        with pytest.raises(kind) as info:
            model_for(server).create(REQUEST)
        assert str(info.value).startswith("the Messages API failed mid-answer ("), str(info.value)
        assert "200" not in str(info.value)
