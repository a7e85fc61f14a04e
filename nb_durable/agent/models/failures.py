"""Which Messages API failures are worth retrying: one rule, for the real model and the script.

The server's own word comes first: an ``x-should-retry: true`` or ``false`` header decides,
whatever the status (the SDK honours it the same way). Then an HTTP status decides when
there is one that says anything: 408 (timeout), 409 (conflict),
429 (rate limited) and every 5xx (529 is overloaded) are transient; every other 4xx needs a
fix first. A failure without an error status (an ``error`` event in the middle of a stream
that began with 200, or no status at all) is judged by its error type. ``AnthropicModel``
and the scripted ``api_error`` both ask ``is_transient``, so a test's scripted failure is
retried exactly when the real one would be. Among transient failures, ``overload_kind`` names
those that say the service itself is failing (529, 503, a connection that fails or stalls),
not that the caller went too fast (429): they move a run to a fallback model and count toward
an endpoint's circuit breaker. The server's words are read here too: ``should_retry`` (its
``x-should-retry``) and ``retry_after`` (the wait it asks for). Standard library only: cheap to import.
"""

from __future__ import annotations

import email.utils
import time
from typing import Any

__all__ = [
    "ERROR_TYPES", "TRANSIENT_STATUSES", "TRANSIENT_TYPES", "error_type_for", "is_transient", "overload_kind", "retry_after",
    "should_retry",
]  # fmt: skip

TRANSIENT_STATUSES = frozenset({408, 409, 429})
"""The 4xx statuses that pass with time (every 5xx does too)."""

TRANSIENT_TYPES = frozenset({"overloaded_error", "rate_limit_error", "api_error", "timeout_error"})
"""The error types that pass with time, when no status says otherwise."""

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}
"""The error type the API sends with each status."""


def is_transient(status: int | None, error_type: str | None, *, should_retry: bool | None = None) -> bool:
    """Whether a failure may pass if the call is retried: as the server says, else by status and type."""
    if should_retry is not None:
        return should_retry
    if status is not None and (status in TRANSIENT_STATUSES or status >= 500):
        return True
    # A 200 whose stream then carried an error event: the status was sent before the
    # failure, so only the type tells. Any other status below 500 is the request's fault.
    if status is None or status == 200:
        return error_type in TRANSIENT_TYPES
    return False


def error_type_for(status: int) -> str:
    """The error type the API would send with ``status`` (``api_error`` for one it has no name for)."""
    return ERROR_TYPES.get(status, "api_error")


OVERLOAD_STATUSES = frozenset({503, 529})
_OVERLOAD_TYPES = {"overloaded_error": "529", "connection_error": "connection", "timeout": "connection", "stalled_stream": "stalled"}


def overload_kind(status: int | None, error_type: str | None) -> str | None:
    """What a failure that says the service is failing is called (``529``, ``503``,
    ``connection``, ``stalled``), or None for any other."""
    if status in OVERLOAD_STATUSES:
        return str(status)
    return _OVERLOAD_TYPES.get(error_type or "")


def should_retry(response: Any) -> bool | None:
    """What the server's ``x-should-retry`` header says (``None`` when it says nothing)."""
    headers = getattr(response, "headers", None)
    value = headers.get("x-should-retry") if headers else None
    if value is None:
        return None
    return {"true": True, "false": False}.get(str(value).strip().lower())


def retry_after(response: Any) -> float | None:
    """The wait a response asks for: ``retry-after-ms``, else ``retry-after`` (seconds or a date)."""
    headers = getattr(response, "headers", None)
    if not headers:
        return None
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
