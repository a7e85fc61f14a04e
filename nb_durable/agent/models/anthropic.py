"""The real Messages API through the ``anthropic`` SDK (2.x), streaming by default.

This module and ``stream`` (which reads a streamed reply's events for it) are the only ones
that import ``anthropic`` or ``httpx2``, and only inside the calls that need them (the SDK
takes over a second to import), so naming ``AnthropicModel`` costs nothing until a request
is made. The SDK's own retries are off: the loop retries, and
records every attempt. SDK errors become ``TransientModelError`` (worth retrying, by the
one rule in ``failures``) or ``ModelError`` (fix something first), each with a message that
says what to do.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ...core.context import current_step
from ...errors import ModelError, TransientModelError
from ..secrets.redaction import redact_known
from .base import TextCallback, public_url, stall_timeout
from .failures import is_transient, retry_after, should_retry
from .stream import broken_usage, read_message, stalled

__all__ = ["CREDENTIAL_VARIABLES", "AnthropicBatches", "AnthropicModel", "credentials_in_environment", "preload", "retry_after", "should_retry"]

_COUNTED_FIELDS = frozenset(
    {"model", "messages", "system", "tools", "tool_choice", "thinking", "output_config", "cache_control"}
)
"""The request fields ``count_tokens`` takes (the SDK's ``MessageCountTokensParams``)."""

CREDENTIAL_VARIABLES = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL")
"""The variables that point the SDK at a Messages API: any one of them set, a run can call it."""


def credentials_in_environment(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the environment points at a real Messages API (a key, a token or a base URL)."""
    env = os.environ if environ is None else environ
    return any(env.get(name) for name in CREDENTIAL_VARIABLES)


def preload() -> None:
    """Import the SDK now (over a second of CPU) and, with credentials set, build the process's
    shared client (~25 ms: an SSL context): a long-lived process such as a worker pays them once
    before it takes a run's lease, not inside the first run it resumes."""
    import anthropic  # noqa: F401

    if credentials_in_environment():
        AnthropicModel().client()  # the options a run rebuilt from its log asks with


class AnthropicModel:
    """The real Messages API through the ``anthropic`` SDK (2.x), streaming by default."""

    name = "anthropic"

    def __new__(cls, *args: Any, **options: Any) -> AnthropicModel:
        """Credentials given here (``api_key=``, ``auth_token=``, a ``client``'s) are masked in every tool result."""
        from ..secrets.redaction import hold_credentials

        hold_credentials(options)
        return super().__new__(cls)

    def __init__(
        self,
        *,
        api_key: str | None = None,
        auth_token: str | None = None,
        base_url: str | None = None,
        stream: bool = True,
        timeout: float = 600.0,
        client: Any = None,
    ) -> None:
        self._options = {"api_key": api_key, "auth_token": auth_token, "base_url": base_url}
        self.stream = stream
        self.timeout = timeout
        self._client = client

    def endpoint(self) -> dict[str, str]:
        """Where requests go and which kind of credential they carry (never the credential)."""
        base = (
            self._options["base_url"] or os.environ.get("ANTHROPIC_BASE_URL") or "https://api.anthropic.com"
        )
        if self._options["api_key"] or (
            not self._options["auth_token"] and os.environ.get("ANTHROPIC_API_KEY")
        ):
            credential = "api_key"
        elif self._options["auth_token"] or os.environ.get("ANTHROPIC_AUTH_TOKEN"):
            credential = "auth_token"
        else:
            credential = "none"
        return {"url": str(base).rstrip("/"), "credential": credential}

    def count_tokens(self, request: Mapping[str, Any]) -> int:
        """The request's input tokens, as the API counts them (``messages.count_tokens``)."""
        fields = {k: v for k, v in request.items() if k in _COUNTED_FIELDS}
        return int(_asked(self, lambda c: c.messages.count_tokens(**fields).input_tokens, "count tokens"))

    def message_batches(self) -> AnthropicBatches:
        """This endpoint's Message Batches (``models.message_batches``), through the same client."""
        return AnthropicBatches(self)

    def __repr__(self) -> str:
        # Never the key: reprs end up in tracebacks and notebook outputs.
        base = self._options["base_url"] or os.environ.get("ANTHROPIC_BASE_URL") or "api.anthropic.com"
        return f"AnthropicModel(base_url={public_url(str(base))!r}, stream={self.stream})"

    def client(self) -> Any:
        """The SDK client, made on first use with the SDK's retries turned off."""
        if self._client is None:
            self._client = _shared_client(self._options, self.timeout)
        return self._client

    def create(
        self,
        request: Mapping[str, Any],
        on_text: TextCallback | None = None,
        on_thinking: TextCallback | None = None,
    ) -> dict[str, Any]:
        """Send one request (streamed unless ``stream=False``); SDK errors become ``ModelError``s,
        carrying the usage a stream reported before it broke (``ModelError.usage``)."""
        reported: dict[str, Any] = {}
        try:
            return self._create(request, on_text, on_thinking, reported)
        except ModelError as e:
            e.usage = broken_usage(reported, str(request.get("model") or ""))
            raise

    def _create(
        self, request: Mapping[str, Any], on_text: TextCallback | None, on_thinking: TextCallback | None, reported: dict[str, Any]
    ) -> dict[str, Any]:
        import anthropic
        import httpx2

        stall = stall_timeout() if self.stream else None
        try:
            client = _with_run_id(self.client())
            if self.stream:
                # The read timeout catches a silent stream; one that only pings is caught by
                # ``read_message``, which counts the limit from the last event of progress.
                timeout = self.timeout if stall is None else httpx2.Timeout(self.timeout, read=stall)
                with client.messages.create(**request, stream=True, timeout=timeout) as stream:
                    message = read_message(stream, on_text, on_thinking, stall=stall, reported=reported)
                    request_id = stream.response.headers.get("request-id")
            else:
                reply = client.messages.create(**request)
                message, request_id = reply.model_dump(mode="json"), getattr(reply, "_request_id", None)
        except anthropic.APIStatusError as e:
            raise _status_error(e) from None
        except anthropic.APITimeoutError as e:
            if stall is not None and isinstance(e.__cause__, httpx2.ReadTimeout):
                raise stalled(stall) from None
            raise TransientModelError(
                "the request to the Messages API timed out", error_type="timeout"
            ) from None
        except anthropic.APIConnectionError as e:
            # The cause may quote the request: h11 refuses a key with a line break by showing the header.
            raise TransientModelError(
                f"could not reach the Messages API ({redact_known(str(e.__cause__ or e))})", error_type="connection_error"
            ) from None
        except httpx2.ReadTimeout:
            if stall is None:
                raise TransientModelError(
                    "the connection to the Messages API timed out mid-answer", error_type="timeout"
                ) from None
            raise stalled(stall) from None
        except httpx2.TransportError as e:
            # The SDK wraps transport failures before the response headers; a stream's body is
            # read here (``stream.read_message``), so one cut off midway is the raw httpx2 error.
            raise TransientModelError(
                f"the connection to the Messages API broke mid-answer ({type(e).__name__}: {e})",
                error_type="connection_error",
            ) from None
        except (TypeError, getattr(anthropic, "CredentialsError", TypeError)) as e:
            if "api_key" in str(e) or "auth" in str(e).lower() or "credential" in str(e).lower():
                raise ModelError(
                    # A run keeps its model, so the demo model is for a new run only: named
                    # last, it read as a way to go on, before "Then resume it".
                    "no credentials for the Messages API (without a key, a new run can use the "
                    "offline demo model: client=DemoModel() in Python, --demo in a cell or at a "
                    "terminal); for this run, set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN)",
                    error_type="authentication_error",
                ) from None
            raise
        return {"message": _recordable(message), "request_id": request_id}


class AnthropicBatches:
    """The Message Batches API through the SDK (``messages.batches``): create, retrieve, results."""

    def __init__(self, model: AnthropicModel) -> None:
        self._model = model

    @property
    def account(self) -> str:
        """A digest of the credential the batches are made with (never the credential): runs
        with other keys to one endpoint gather into batches of their own."""
        options = self._model._options
        secret = options["api_key"] or options["auth_token"] or os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("ANTHROPIC_AUTH_TOKEN") or ""
        return hashlib.sha256(secret.encode()).hexdigest()[:16]

    def create(self, requests: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
        """Create one batch of ``(custom_id, params)``; its id."""
        params = [{"custom_id": custom_id, "params": dict(request)} for custom_id, request in requests]
        return str(_asked(self._model, lambda c: c.messages.batches.create(requests=params).id, "create a Message Batch"))

    def retrieve(self, batch_id: str) -> dict[str, Any]:
        """The batch as JSON (``MessageBatch``)."""
        return dict(_asked(self._model, lambda c: c.messages.batches.retrieve(batch_id).model_dump(mode="json"), "read a Message Batch"))

    def results(self, batch_id: str) -> dict[str, dict[str, Any]]:
        """An ended batch's results by custom id (``MessageBatchResult`` as JSON)."""

        def read(client: Any) -> dict[str, dict[str, Any]]:
            return {r.custom_id: r.result.model_dump(mode="json") for r in client.messages.batches.results(batch_id)}

        return dict(_asked(self._model, read, "read a Message Batch's results"))

    def created_between(self, start: float, end: float) -> list[str]:
        """The ids of the batches created from ``start`` to ``end`` (epoch seconds): the list is
        newest first, read page by page until a batch older than ``start``."""

        def read(client: Any) -> list[str]:
            found = []
            for batch in client.messages.batches.list(limit=100):
                when = batch.created_at.timestamp()
                if when < start:
                    break
                if when <= end:
                    found.append(str(batch.id))
            return found

        return list(_asked(self._model, read, "list the Message Batches"))


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _recordable(value: Any) -> Any:
    """A reply with each lone surrogate (JSON's ``"\\udce9"``, from a broken endpoint or proxy)
    made U+FFFD: UTF-8 cannot hold one, so the step could never be recorded, and each resume
    would pay for the same call again."""
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {k: _recordable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_recordable(v) for v in value]
    return value


def _asked(model: AnthropicModel, fn: Callable[[Any], Any], what: str) -> Any:
    """``fn(client)``, one request that is not a streamed message, its SDK errors made ``ModelError``s."""
    import anthropic

    try:
        return fn(model.client())
    except anthropic.APIStatusError as e:
        raise _status_error(e, what) from None
    except anthropic.APIConnectionError as e:
        raise TransientModelError(f"could not reach the Messages API to {what} ({e})", error_type="connection_error") from None
    except TypeError as e:
        if "api_key" in str(e) or "auth" in str(e).lower():
            raise ModelError(
                "no credentials for the Messages API: set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN)",
                error_type="authentication_error",
            ) from None
        raise


_ADVICE = {
    400: "the request was malformed; the message above says which part",
    401: "the API key was rejected: check ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN)",
    403: "this key may not use that model or feature: check the key's permissions",
    404: "not found: check the model name",
    413: "the request is too large: shorten the task or the tool outputs",
}


def _status_error(e: Any, what: str = "") -> ModelError:
    """The error to raise for an SDK ``APIStatusError``: transient or not, and what to do
    (``what``: the request, when not a message: ``create a Message Batch``)."""
    status = int(e.status_code)
    error_type = getattr(e, "type", None)
    body = getattr(e, "body", None)
    if error_type is None and isinstance(body, dict) and isinstance(body.get("error"), dict):
        error_type = body["error"].get("type")
    # An error body may echo the request, key included: mask it before it is recorded or shown.
    detail = redact_known(getattr(e, "api_message", None) or str(e))
    request_id = getattr(e, "request_id", None)
    # A 200 is a stream that began well and then carried an error event: not an answer of 200.
    mid_answer = "failed mid-answer" if status == 200 else ""
    said = mid_answer or f"answered {status}"
    # Else a Batches endpoint's 529 reads as the model's overload ("Overloaded" is all it says).
    asked = f" to {what}" if what else ""
    if is_transient(status, error_type, should_retry=should_retry(getattr(e, "response", None))):
        kind = (
            "overloaded"
            if error_type == "overloaded_error" or status == 529
            else error_type or f"HTTP {status}"
        )
        return TransientModelError(
            f"the Messages API {said} ({kind}){asked}: {detail}",
            status=status,
            error_type=error_type,
            request_id=request_id,
            retry_after=retry_after(getattr(e, "response", None)),
        )
    advice = _ADVICE.get(status, "see the message above")
    return ModelError(
        f"the Messages API {mid_answer or f'refused the request{asked} with {status}'} ({error_type or 'error'}): {detail}. "
        f"To fix: {advice}.",
        status=status,
        error_type=error_type,
        request_id=request_id,
    )


_SHARED_MAX = 8
_shared: dict[tuple[Any, ...], Any] = {}
_shared_lock = threading.Lock()


def _shared_client(options: Mapping[str, str | None], timeout: float) -> Any:
    """One SDK client per process for the same options, timeout and environment: building
    one costs ~25 ms of CPU (an SSL context), and a worker resuming run after run would
    otherwise pay it per run and open a new connection pool each time. The client is
    thread-safe; the environment is in the key because the SDK reads it when built."""
    environment = tuple(sorted((k, v) for k, v in os.environ.items() if k.upper().startswith(_CLIENT_ENVIRONMENT) or k.upper().endswith("_PROXY")))
    key = (tuple(sorted(options.items())), timeout, environment)
    with _shared_lock:
        client = _shared.get(key)
        if client is None:
            import anthropic

            client = anthropic.Anthropic(
                api_key=options["api_key"], auth_token=options["auth_token"], base_url=options["base_url"], max_retries=0, timeout=timeout
            )
            while len(_shared) >= _SHARED_MAX:  # dropped, not closed: a model may still hold it
                del _shared[next(iter(_shared))]
            _shared[key] = client
        return client


_CLIENT_ENVIRONMENT = ("ANTHROPIC_", "OTEL_", "SSL_CERT_", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NO_PROXY")
"""Variables the SDK (or httpx beneath it) reads when a client is built, besides ``*_PROXY``."""


def _with_run_id(client: Any) -> Any:
    """The client, naming the run in the SDK's own spans (``gen_ai.conversation.id``) when it
    traces: inside a step the run id is known, and the SDK never sends it to the API."""
    step = current_step()
    options = getattr(client, "open_telemetry", None)
    if step is None or not isinstance(options, Mapping):
        return client
    traces = options.get("traces")
    if not (isinstance(traces, Mapping) and traces.get("enabled")) or not _spans_recorded():
        return client
    return client.with_options(open_telemetry={**options, "conversation_id": step.log.run_id})


def _spans_recorded() -> bool:
    """Whether a tracer provider records spans: the SDK traces by default into OpenTelemetry's
    global provider, a no-op until one is set, and a new client per call (a copy with the run's
    id) is work only worth doing for a span someone records."""
    try:
        from opentelemetry import trace
    except ImportError:
        return False
    return not isinstance(trace.get_tracer_provider(), (trace.ProxyTracerProvider, trace.NoOpTracerProvider))
