"""A run's bytes as a store holds them: the one value every store hands the history.

Its own module so that ``history`` (which reads it) and the stores (which make it) share it
without the stores' package importing the history or the history the stores.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .codec import split_tail

__all__ = ["StoredLog"]


@dataclass(frozen=True, slots=True)
class StoredLog:
    """A run's bytes as a store holds them: whole lines, then any unterminated tail."""

    data: bytes
    """Every complete line, each ending in a newline."""
    tail: bytes
    """Bytes after the last newline: the torn write of a crash, or b""."""
    location: str
    can_tear: bool
    """Whether a crash can cut this store's last write short (files can; transactions cannot)."""

    @classmethod
    def from_file(cls, data: bytes, location: str) -> StoredLog:
        """A log file's bytes, cut after the last newline."""
        whole, tail = split_tail(data)
        return cls(whole, tail, location, True)

    @classmethod
    def from_lines(cls, lines: Sequence[bytes], location: str) -> StoredLog:
        """Lines kept one per row (no newlines), as transactional stores hold them."""
        return cls(b"".join([line + b"\n" for line in lines]), b"", location, False)
