"""Where a page of a run listing ends: the cursor ``after=`` (``--after``) starts the next page from.

Listings are ordered most recently updated first, ties by run id (``listing_key`` is that
order's one owner); a row with no update time (none its log gives, or a hand edit's) sorts as
``sort_time`` says, before any time, so last, on every store: the SQL stores write that time in
the column they order and page by, never NULL, whose place PostgreSQL and SQLite disagree on
(first and last in a descending order) and which no cursor range reaches. A page cut short names its last run's key, (updated_at, run_id), as a
cursor, and the next page is the runs whose key comes after it when that page is read: not
"the runs past the first N", which is counted afresh on every page (a run written meanwhile
pushes the others down, so one is shown again, or lifts one onto a page already listed) and
costs a scan of every run skipped. A store with a query asks it there (SQLite, PostgreSQL: a
range on the ``updated_at`` index), the others filter their sorted rows.

What a walk page by page shows while the store is written: a run's key only grows when it is
written, and new keys are the newest, ahead of every cursor. So each run not written during
the walk is shown exactly once; a run written (or started) during it is shown at most once,
as it was when its page was read, or not at all if it moved ahead before its page came. That
holds while the writers' clocks agree (the key is the writer's time of the run's last event).

The token: URL-safe base64 (no padding) of a version byte, the time as an 8-byte IEEE double,
a fingerprint of the store whose listing made it (4 bytes of BLAKE2b of its ``Store.key``), the
run id in UTF-8, then 4 bytes of BLAKE2b of all before them. The version byte (2) makes every
token start with ``A``, never with ``-`` (a command line would read a flag); the check catches a
token cut short or edited; the fingerprint lets a listing refuse a cursor another store's listing
made (``belongs_to``), which would list it from a key of someone else's runs without a word. A
store reached by two names that are not one ``key`` (a folder through two mounts, a database
server by two addresses) refuses the other name's cursors: list it again from its newest runs.
It is no secret and no signature: a cursor made by hand only lists from another place.

Version 1 (nb_durable before the fingerprint) had no fingerprint: such a token is still read, and
cannot be checked, so a listing of any store takes it, as it did. A ``Cursor`` made with no store
(``store`` None) is written as version 1 too, so it reads back as it was made.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import math
import string
import struct
from dataclasses import dataclass

from ...errors import SettingError

__all__ = ["Cursor", "fingerprint", "listing_key", "sort_time"]

_VERSION = 2
_UNCHECKED = 1
"""The version of a token with no fingerprint (an older nb_durable's, or a cursor made with no store)."""
_HEAD = struct.Struct(">Bd")
_CHECK = 4
_FINGERPRINT = 4
_ALPHABET = frozenset(string.ascii_letters + string.digits + "-_")
_WHAT_TO_DO = "copy the cursor whole from the next-page line of the listing that gave it, or list from the newest runs without it"


def sort_time(updated_at: float | None) -> float:
    """The time a run sorts by: its update time, or, with none, before any (the SQL stores' column)."""
    return -math.inf if updated_at is None else updated_at


def listing_key(updated_at: float | None, run_id: str) -> tuple[float, str]:
    """Where a run sorts in a listing: the most recently updated first, ties by run id."""
    return -sort_time(updated_at), run_id


def _check(payload: bytes) -> bytes:
    return hashlib.blake2b(payload, digest_size=_CHECK).digest()


def fingerprint(store_key: str) -> bytes:
    """A store's fingerprint in its cursors: short, and the same from every process (``Store.key``
    is the identity of the storage itself: a folder's or file's real path, a database's table)."""
    # A path that is not UTF-8 (its bytes as surrogates) is hashed as its bytes: it failed to encode.
    return hashlib.blake2b(store_key.encode("utf-8", "surrogateescape"), digest_size=_FINGERPRINT).digest()


@dataclass(frozen=True, slots=True)
class Cursor:
    """The key of the last run of a page: the next page lists the runs after it."""

    updated_at: float
    run_id: str
    store: bytes | None = None
    """The ``fingerprint`` of the store whose listing made it; None if unknown (a version 1 token)."""

    @classmethod
    def at(cls, updated_at: float | None, run_id: str, store_key: str | None = None) -> Cursor:
        """The cursor after a run with this key (``sort_time``: one with no update time sorts last)
        in a listing of the store whose ``Store.key`` is ``store_key``."""
        return cls(sort_time(updated_at), run_id, None if store_key is None else fingerprint(store_key))

    @property
    def token(self) -> str:
        """The cursor as short text to copy and type back (``parse`` reads it)."""
        if self.store is None:
            payload = _HEAD.pack(_UNCHECKED, self.updated_at) + self.run_id.encode("utf-8")
        else:
            payload = _HEAD.pack(_VERSION, self.updated_at) + self.store + self.run_id.encode("utf-8")
        return base64.urlsafe_b64encode(payload + _check(payload)).decode("ascii").rstrip("=")

    @classmethod
    def parse(cls, token: str) -> Cursor:
        """The cursor a ``token`` holds; ``SettingError`` (setting ``after``) saying what is wrong with it otherwise."""
        text = token.strip()
        if not text or not set(text) <= _ALPHABET:
            raise SettingError(setting="after", value=token, reason=f"is no cursor: a cursor is letters, digits, - and _ only; {_WHAT_TO_DO}")
        if not text.startswith("A"):
            # Every token starts with A (the version byte): this was never one, most often a run
            # id typed where the page's last run was meant, which "cut short" would misname.
            raise SettingError(setting="after", value=token, reason=f"is no cursor (a run id is none: a cursor starts with A); {_WHAT_TO_DO}")
        try:
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        except (ValueError, binascii.Error):
            raw = b""  # a length no encoding gives: cut short (or lengthened)
        if base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=") != text:
            raise SettingError(setting="after", value=token, reason=f"was cut short or changed (it is no whole encoding); {_WHAT_TO_DO}")
        store_size = {_VERSION: _FINGERPRINT, _UNCHECKED: 0}.get(raw[0] if raw else -1)
        if store_size is None or len(raw) <= _HEAD.size + store_size + _CHECK:
            raise SettingError(setting="after", value=token, reason=f"is no cursor this nb_durable gave (too short, or of another version); {_WHAT_TO_DO}")
        payload, check = raw[:-_CHECK], raw[-_CHECK:]
        if check != _check(payload):
            raise SettingError(setting="after", value=token, reason=f"was cut short or changed (its check does not match); {_WHAT_TO_DO}")
        _, updated_at = _HEAD.unpack_from(payload)
        store = payload[_HEAD.size : _HEAD.size + store_size] or None
        try:
            run_id = payload[_HEAD.size + store_size :].decode("utf-8")
        except UnicodeDecodeError:
            run_id = ""
        if not (math.isfinite(updated_at) or updated_at == sort_time(None)) or not run_id:
            raise SettingError(setting="after", value=token, reason=f"names no run a listing could have shown; {_WHAT_TO_DO}")
        return cls(updated_at, run_id, store)

    def belongs_to(self, store_key: str, shown: str) -> None:
        """Refuse the cursor (``SettingError``, setting ``after``) if another store's listing made
        it: ``store_key`` is the listed store's ``Store.key``, ``shown`` its name for the message.
        A cursor with no fingerprint (version 1) cannot be checked, and is taken."""
        if self.store is not None and self.store != fingerprint(store_key):
            reason = (
                f"was made by a listing of another store than {shown} (a cursor pages on only the listing that gave it); "
                "give it to that store's listing, or list this one from its newest runs without it"
            )
            raise SettingError(setting="after", value=self.token, reason=reason)

    @classmethod
    def of(cls, after: object) -> Cursor | None:
        """The cursor ``after=`` gives: a token (``parse``), a ``Cursor``, or None for the first page.
        Anything else, the page's last run itself most often, is refused: a store that asks its
        query took such a run for a cursor, and one that filters its rows failed on it."""
        if after is None or isinstance(after, Cursor):
            return after
        if isinstance(after, str):
            return cls.parse(after)
        run_id = getattr(after, "run_id", None)
        shown = f"{type(after).__name__} {run_id!r}" if isinstance(run_id, str) else type(after).__name__
        reason = "is no cursor: pass the cursor of the page's last run (page[-1].cursor), a str"
        raise SettingError(setting="after", value=shown, reason=reason)

    def passed(self, updated_at: float | None, run_id: str) -> bool:
        """Whether a run with this key comes after the cursor (so on the next page)."""
        return listing_key(updated_at, run_id) > listing_key(self.updated_at, self.run_id)
