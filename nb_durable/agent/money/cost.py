"""Tokens and dollars: what a run paid live, what replay served from the log for free, and
what prompt caching saved.

Every model step records the API's ``usage``. A step that ran live in this session was paid
for; a step replayed from the log was not paid again: its tokens are what "replay saved
you". Dollars come from :mod:`.prices`; each step should be priced by the model that
answered it (:func:`.prices.price_of_reply`). A cost priced with a simulated price (the demo
model) is ``simulated``: displays label its dollars as such.

A streamed call that broke after ``message_start`` was paid for as far as it got: the usage it
reported (``AttemptFailed.usage``) is paid too, priced like a reply of the model that answered
(``broken_stream``), and ``Cost.broken`` names that part of what was paid.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from .prices import ASKED_MODEL, DEFAULT_PRICES, Price, price_for, price_of_reply

__all__ = ["DEFAULT_PRICES", "Cost", "Price", "Usage", "broken_stream", "dollars", "price_for", "price_of_reply"]


def dollars(amount: float, *, simulated: bool) -> str:
    """A dollar figure as every display and message prints it, labelled when it is simulated."""
    text = f"{'-' if amount < 0 else ''}${abs(amount):.4f}"
    return f"simulated {text}" if simulated else text


def _count(source: Mapping[str, Any], name: str) -> int:
    return int(source.get(name) or 0)


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts of one or more model calls, as the Messages API reports them.

    ``cache_creation_input_tokens`` counts every cache write; ``cache_creation_1h_input_tokens``
    the part written with the 1-hour TTL (the rest had 5 minutes).
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_1h_input_tokens: int = 0

    @classmethod
    def parse(cls, usage: Mapping[str, Any] | None) -> Usage:
        """A ``usage`` object, as the API sends it or :meth:`to_json` wrote it; missing or null
        counts are 0, and writes without the TTL split count as 5-minute writes."""
        usage = usage or {}
        split = usage.get("cache_creation") or {}
        one_hour = _count(split, "ephemeral_1h_input_tokens") or _count(
            usage, "cache_creation_1h_input_tokens"
        )
        writes = max(
            _count(usage, "cache_creation_input_tokens"),
            _count(split, "ephemeral_5m_input_tokens") + one_hour,
        )
        return cls(
            _count(usage, "input_tokens"),
            _count(usage, "output_tokens"),
            writes,
            _count(usage, "cache_read_input_tokens"),
            one_hour,
        )

    @classmethod
    def of(cls, message: Mapping[str, Any]) -> Usage:
        """The usage of a Message (as JSON)."""
        return cls.parse(message.get("usage"))

    def __add__(self, other: Usage) -> Usage:
        return Usage(*(getattr(self, n) + getattr(other, n) for n in self.__slots__))

    @property
    def cache_creation_5m_input_tokens(self) -> int:
        """Cache writes with the 5-minute TTL."""
        return self.cache_creation_input_tokens - self.cache_creation_1h_input_tokens

    @property
    def prompt_tokens(self) -> int:
        """Every input token: uncached, read from the cache and written to it."""
        return self.input_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens

    @property
    def total(self) -> int:
        return self.prompt_tokens + self.output_tokens

    def to_json(self) -> dict[str, int]:
        return {n: getattr(self, n) for n in self.__slots__}


@dataclass(frozen=True, slots=True)
class Cost:
    """A session's model usage split into paid (ran live) and saved (served by replay).

    ``cache_saved_dollars`` is what the live steps would have cost more with no prompt caching
    (negative while writes have not yet been read back); ``simulated`` is true once any usage
    was priced with a simulated price, so none of the dollars is a bill. ``broken``,
    ``broken_dollars`` and ``broken_streams``: the part of ``paid`` that streams which broke
    midway reported before they broke (``add_broken``).
    """

    paid: Usage = field(default_factory=Usage)
    saved: Usage = field(default_factory=Usage)
    paid_dollars: float = 0.0
    saved_dollars: float = 0.0
    cache_saved_dollars: float = 0.0
    simulated: bool = False
    broken: Usage = field(default_factory=Usage)
    broken_dollars: float = 0.0
    broken_streams: int = 0

    def add(self, usage: Usage, price: Price, *, replayed: bool) -> Cost:
        """This cost and one step's usage, priced by ``price``."""
        simulated = self.simulated or price.simulated
        if replayed:
            return replace(
                self,
                saved=self.saved + usage,
                saved_dollars=self.saved_dollars + price.dollars(usage),
                simulated=simulated,
            )
        dollars = price.dollars(usage)
        return replace(
            self,
            paid=self.paid + usage,
            paid_dollars=self.paid_dollars + dollars,
            cache_saved_dollars=self.cache_saved_dollars + price.uncached_dollars(usage) - dollars,
            simulated=simulated,
        )

    def __add__(self, other: Cost) -> Cost:
        """Two costs added up, field by field."""
        return Cost(
            paid=self.paid + other.paid,
            saved=self.saved + other.saved,
            paid_dollars=self.paid_dollars + other.paid_dollars,
            saved_dollars=self.saved_dollars + other.saved_dollars,
            cache_saved_dollars=self.cache_saved_dollars + other.cache_saved_dollars,
            simulated=self.simulated or other.simulated,
            broken=self.broken + other.broken,
            broken_dollars=self.broken_dollars + other.broken_dollars,
            broken_streams=self.broken_streams + other.broken_streams,
        )

    def add_broken(self, usage: Usage, price: Price) -> Cost:
        """This cost and what one stream that broke midway reported using: paid, and named so."""
        paid = self.add(usage, price, replayed=False)
        return replace(
            paid, broken=self.broken + usage, broken_dollars=self.broken_dollars + price.dollars(usage),
            broken_streams=self.broken_streams + 1,
        )  # fmt: skip

    def with_session_saving(self, recorded: Mapping[str, Any], price: Price) -> Cost:
        """This cost plus what a session recorded (``Cost.to_json``, in its run_finished) that its
        replay saved; ``price`` prices a session from before savings were priced step by step."""
        saved = Usage.parse(recorded.get("saved") or {})
        if "cache_saved_dollars" in recorded:
            # Priced step by step when it was recorded: a sum of calls is not one call's price,
            # and whether any was simulated is said by the record, not by ``price``.
            return replace(
                self,
                saved=self.saved + saved,
                saved_dollars=self.saved_dollars + float(recorded["saved_dollars"]),
                simulated=self.simulated or bool(recorded.get("simulated")),
            )
        return self.add(saved, price, replayed=True)

    def to_json(self) -> dict[str, Any]:
        return {
            "paid": self.paid.to_json(),
            "saved": self.saved.to_json(),
            "paid_dollars": round(self.paid_dollars, 6),
            "saved_dollars": round(self.saved_dollars, 6),
            "cache_saved_dollars": round(self.cache_saved_dollars, 6),
            "simulated": self.simulated,
            # Only when there were any: a session's end records its cost, and older ends read alike.
            **(
                {"broken": self.broken.to_json(), "broken_dollars": round(self.broken_dollars, 6), "broken_streams": self.broken_streams}
                if self.broken_streams
                else {}
            ),
        }


def broken_stream(usage: Mapping[str, Any], run_model: str, prices: Mapping[str, Price] | None = None) -> tuple[Usage, Price]:
    """The usage a stream reported before it broke (``AttemptFailed.usage``) and its price: as a
    reply's, by the model that answered, else the one its step asked (``run_model`` if unnamed).
    The one rule, for the run index's figures and for every view of a run's cost."""
    return Usage.parse(usage), price_of_reply(usage, str(usage.get(ASKED_MODEL) or run_model), prices)
