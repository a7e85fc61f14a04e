"""Tokens and dollars: what a run paid live, and what replay served from the log for free.

Every model step records the API's ``usage``. A step that ran live in this session was paid
for; a step replayed from the log was not paid again: its tokens are what "replay saved
you". Dollars come from a price table (USD per million tokens) that users can override;
prices change, so the table is a default, matched by the longest model-name prefix.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["DEFAULT_PRICES", "Cost", "Price", "Usage", "price_for"]


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts of one or more model calls."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0

    @classmethod
    def of(cls, message: Mapping[str, Any]) -> Usage:
        """The usage of a Message (as JSON); missing or null counts are 0."""
        usage = message.get("usage") or {}
        return cls(*(int(usage.get(name) or 0) for name in cls.__slots__))

    def __add__(self, other: Usage) -> Usage:
        return Usage(*(getattr(self, n) + getattr(other, n) for n in self.__slots__))

    @property
    def total(self) -> int:
        return sum(getattr(self, n) for n in self.__slots__)

    def to_json(self) -> dict[str, int]:
        return {n: getattr(self, n) for n in self.__slots__}


@dataclass(frozen=True, slots=True)
class Price:
    """USD per million tokens."""

    input: float
    output: float
    cache_write: float
    cache_read: float

    @classmethod
    def simple(cls, input: float, output: float) -> Price:
        """A price with Anthropic's usual cache multipliers (write 1.25x, read 0.1x input)."""
        return cls(input, output, input * 1.25, input * 0.1)

    def dollars(self, usage: Usage) -> float:
        return (
            usage.input_tokens * self.input
            + usage.output_tokens * self.output
            + usage.cache_creation_input_tokens * self.cache_write
            + usage.cache_read_input_tokens * self.cache_read
        ) / 1_000_000


DEFAULT_PRICES: dict[str, Price] = {
    "claude-opus-4-5": Price.simple(5, 25),
    "claude-opus-4": Price.simple(15, 75),
    "claude-opus": Price.simple(15, 75),
    "claude-sonnet": Price.simple(3, 15),
    "claude-3-7-sonnet": Price.simple(3, 15),
    "claude-3-5-sonnet": Price.simple(3, 15),
    "claude-haiku": Price.simple(1, 5),
    "claude-haiku-4": Price.simple(1, 5),
    "claude-3-5-haiku": Price.simple(0.8, 4),
    "claude-3-haiku": Price.simple(0.25, 1.25),
    "claude": Price.simple(3, 15),
}
"""Prefix -> price; the longest matching prefix wins. Anything else is priced as Sonnet."""


def price_for(model: str, prices: Mapping[str, Price] | None = None) -> Price:
    """The price of a model: the longest matching prefix of the table, else Sonnet's."""
    table = DEFAULT_PRICES if prices is None else {**DEFAULT_PRICES, **prices}
    best = max((p for p in table if model.startswith(p)), key=len, default="claude-sonnet")
    return table[best]


@dataclass(frozen=True, slots=True)
class Cost:
    """A session's model usage split into paid (ran live) and saved (served by replay)."""

    paid: Usage = field(default_factory=Usage)
    saved: Usage = field(default_factory=Usage)
    paid_dollars: float = 0.0
    saved_dollars: float = 0.0

    def add(self, usage: Usage, price: Price, *, replayed: bool) -> Cost:
        if replayed:
            return Cost(self.paid, self.saved + usage, self.paid_dollars, self.saved_dollars + price.dollars(usage))
        return Cost(self.paid + usage, self.saved, self.paid_dollars + price.dollars(usage), self.saved_dollars)

    def to_json(self) -> dict[str, Any]:
        return {
            "paid": self.paid.to_json(),
            "saved": self.saved.to_json(),
            "paid_dollars": round(self.paid_dollars, 6),
            "saved_dollars": round(self.saved_dollars, 6),
        }
