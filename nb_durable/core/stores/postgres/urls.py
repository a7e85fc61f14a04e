"""PostgreSQL URLs and server messages, made fit to show: never the password."""

from __future__ import annotations

import urllib.parse

__all__ = ["password_in", "safe_url", "scrub"]


def safe_url(url: str) -> str:
    """The URL with any password taken out, fit for messages and logs."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return "postgresql://(unparsable URL)"
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hostport = netloc.rpartition("@")
        netloc = f"{userinfo.partition(':')[0]}@{hostport}"
    query = "&".join(
        p for p in parts.query.split("&") if p and p.split("=", 1)[0].lower() not in ("password", "passfile")
    )
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def scrub(error: BaseException | str, secret: str | None) -> str:
    """An error's message on one line and without its last full stop (a message goes on after it),
    without the password, and without the server's LINE 1: echo of the SQL."""
    diag = getattr(error, "diag", None)
    said = diag.message_primary if diag is not None and diag.message_primary else str(error)
    text = "; ".join(" ".join(line.split()) for line in said.splitlines() if line.strip())
    text = text.rstrip(".?")  # libpq ends a refused connection with "Is the server running ...?"
    return text.replace(secret, "***") if secret else text




def password_in(url: str) -> str | None:
    try:
        return urllib.parse.urlsplit(url).password
    except ValueError:
        return None
