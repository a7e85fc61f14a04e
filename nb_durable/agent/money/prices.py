"""What a model's tokens cost, and where that figure came from.

A :class:`Price` is USD per million tokens for each kind of token the Messages API reports:
uncached input, output, cache reads, and cache writes by TTL (5 minutes or 1 hour). A model
call is priced by the first of these that knows the model:

1. the caller's overrides (``RunHooks.prices``), longest matching name prefix;
2. the maintained ``genai-prices`` package, when it is installed (the ``prices`` extra);
3. the bundled table below, longest matching name prefix, which a test keeps in agreement
   with ``genai-prices`` for every model both know.

A prefix matches at a name boundary (``claude-sonnet-4-5`` prices ``claude-sonnet-4-5-20250929``
but ``claude-fable-5-2`` is no prefix of ``claude-fable-5-20260101``).

A name none of them knows is priced as :data:`FALLBACK`. The demo model's price is the
fallback's marked ``simulated``: its dollars are what the run would have cost, not a bill.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from genai_prices.types import ModelPrice

    from .cost import Usage

__all__ = [
    "ASKED_MODEL",
    "BATCH_DISCOUNT",
    "CACHE_READ",
    "CACHE_WRITE_1H",
    "CACHE_WRITE_5M",
    "DEFAULT_PRICES",
    "FALLBACK",
    "Price",
    "PriceSource",
    "bundled_price",
    "genai_price",
    "known_price",
    "load_prices",
    "model_asked",
    "price_for",
    "price_of_reply",
]

PriceSource = Literal["genai-prices", "bundled", "override"]

# Anthropic's prompt-caching multipliers of the base input price. Writes follow them on every
# model; reads do on most, and a model whose list price differs names its own.
CACHE_WRITE_5M = 1.25
CACHE_WRITE_1H = 2.0
CACHE_READ = 0.1
BATCH_DISCOUNT = 0.5
"""What a Message Batches call pays of the list price, for every kind of token (the one owner
of that figure: ``Price.batched`` applies it)."""


@dataclass(frozen=True, slots=True)
class Price:
    """USD per million tokens of one model, by kind of token.

    ``source`` says which table priced it, ``model`` the entry that matched, ``simulated`` that
    its dollars were never billed (the demo model). A call whose prompt (input, cache reads and
    writes) exceeds ``long_above`` tokens is priced wholly at ``long`` (long-context pricing).
    """

    input: float
    output: float
    cache_read: float
    cache_write_5m: float
    cache_write_1h: float
    source: PriceSource = "override"
    model: str = ""
    simulated: bool = False
    long_above: int = 0
    long: Price | None = None

    @classmethod
    def simple(
        cls,
        input: float,
        output: float,
        *,
        cache_read: float | None = None,
        cache_write_5m: float | None = None,
        cache_write_1h: float | None = None,
        **more: Any,
    ) -> Price:
        """A price whose cache rates follow the multipliers unless given."""
        return cls(
            input,
            output,
            input * CACHE_READ if cache_read is None else cache_read,
            input * CACHE_WRITE_5M if cache_write_5m is None else cache_write_5m,
            input * CACHE_WRITE_1H if cache_write_1h is None else cache_write_1h,
            **more,
        )

    def rates(self) -> dict[str, float]:
        """The per-million rates by kind of token, long-context ones prefixed ``long.``."""
        own = {
            "input": self.input,
            "output": self.output,
            "cache_read": self.cache_read,
            "cache_write_5m": self.cache_write_5m,
            "cache_write_1h": self.cache_write_1h,
        }
        if self.long is not None:
            own["long_above"] = self.long_above
            own.update({f"long.{k}": v for k, v in self.long.rates().items()})
        return own

    def batched(self) -> Price:
        """This price for a Message Batches call: every rate times ``BATCH_DISCOUNT``."""
        return replace(
            self,
            input=self.input * BATCH_DISCOUNT,
            output=self.output * BATCH_DISCOUNT,
            cache_read=self.cache_read * BATCH_DISCOUNT,
            cache_write_5m=self.cache_write_5m * BATCH_DISCOUNT,
            cache_write_1h=self.cache_write_1h * BATCH_DISCOUNT,
            long=None if self.long is None else self.long.batched(),
        )

    def at(self, usage: Usage) -> Price:
        """The rates one call with this usage pays: ``long``'s past ``long_above`` prompt tokens."""
        if self.long is not None and usage.prompt_tokens > self.long_above:
            return self.long.at(usage)
        return self

    def dollars(self, usage: Usage) -> float:
        """What one call with this usage costs."""
        p = self.at(usage)
        return (
            usage.input_tokens * p.input
            + usage.output_tokens * p.output
            + usage.cache_read_input_tokens * p.cache_read
            + usage.cache_creation_5m_input_tokens * p.cache_write_5m
            + usage.cache_creation_1h_input_tokens * p.cache_write_1h
        ) / 1_000_000

    def uncached_dollars(self, usage: Usage) -> float:
        """What the same call would cost with no caching: every prompt token as plain input."""
        p = self.at(usage)
        return (usage.prompt_tokens * p.input + usage.output_tokens * p.output) / 1_000_000


def _bundled(input: float, output: float, **more: Any) -> Price:
    return Price.simple(input, output, source="bundled", **more)


_SONNET_5_5 = _bundled(2, 10, cache_read=0.1)
_OPUS_5_5 = _bundled(4, 20, cache_read=0.2)
_HAIKU_5_5 = _bundled(0.1, 0.5, long_above=100_000, long=_bundled(0.5, 2.5))
_SONNET_4_5 = _bundled(3, 15, long_above=200_000, long=_bundled(6, 22.5))
_FABLE_5_2 = _bundled(8, 40, cache_read=0.2)

FALLBACK = "claude-sonnet-5-5"
"""The entry that prices a model no table knows (the default model's)."""

_TABLE: dict[str, Price] = {
    # Current models (list prices; dated snapshots such as claude-sonnet-5-5-20260101 match
    # by prefix).
    "claude-sonnet-5-5": _SONNET_5_5,
    "claude-sonnet-5.5": _SONNET_5_5,
    "claude-5-5-sonnet": _SONNET_5_5,
    "claude-5.5-sonnet": _SONNET_5_5,
    "claude-sonnet-5": _bundled(2, 10),
    "claude-sonnet-5.0": _bundled(2, 10),
    "claude-5-sonnet": _bundled(2, 10),
    "claude-5.0-sonnet": _bundled(2, 10),
    "claude-opus-5-5": _OPUS_5_5,
    "claude-opus-5.5": _OPUS_5_5,
    "claude-5-5-opus": _OPUS_5_5,
    "claude-5.5-opus": _OPUS_5_5,
    "claude-opus-5": _bundled(5, 25),
    "claude-opus-5.0": _bundled(5, 25),
    "claude-5-opus": _bundled(5, 25),
    "claude-5.0-opus": _bundled(5, 25),
    "claude-haiku-5-5": _HAIKU_5_5,
    "claude-haiku-5.5": _HAIKU_5_5,
    "claude-5-5-haiku": _HAIKU_5_5,
    "claude-5.5-haiku": _HAIKU_5_5,
    "claude-fable-5": _bundled(10, 50),
    "claude-fable-5-1": _bundled(10, 50, cache_read=0.25),
    "claude-fable-5-2": _FABLE_5_2,
    "claude-mythos-5-2": _FABLE_5_2,
    # Claude 4.
    "claude-opus-4-8": _bundled(5, 25),
    "claude-opus-4-7": _bundled(5, 25),
    "claude-opus-4-6": _bundled(5, 25),
    "claude-opus-4-5": _bundled(5, 25),
    "claude-opus-4.5": _bundled(5, 25),
    "claude-4-5-opus": _bundled(5, 25),
    "claude-opus-4-1": _bundled(15, 75),
    "claude-opus-4.1": _bundled(15, 75),
    "claude-opus-4": _bundled(15, 75),
    "claude-4-opus": _bundled(15, 75),
    "claude-sonnet-4-6": _bundled(3, 15),
    "claude-sonnet-4-5": _SONNET_4_5,
    "claude-sonnet-4.5": _SONNET_4_5,
    "claude-sonnet-4": _bundled(3, 15),
    "claude-4-sonnet": _bundled(3, 15),
    "claude-haiku-4-5": _bundled(1, 5),
    "claude-haiku-4.5": _bundled(1, 5),
    "claude-4-5-haiku": _bundled(1, 5),
    "claude-4.5-haiku": _bundled(1, 5),
    # Claude 3 and older.
    "claude-3-7-sonnet": _bundled(3, 15),
    "claude-3.7-sonnet": _bundled(3, 15),
    "claude-sonnet-3-7": _bundled(3, 15),
    "claude-3-5-sonnet": _bundled(3, 15),
    "claude-3.5-sonnet": _bundled(3, 15),
    "claude-3-5-haiku": _bundled(0.8, 4),
    "claude-3.5-haiku": _bundled(0.8, 4),
    "claude-3-opus": _bundled(15, 75),
    "claude-3-sonnet": _bundled(3, 15),
    "claude-3-haiku": _bundled(0.25, 1.25, cache_read=0.03, cache_write_5m=0.3),
    "claude-2": _bundled(8, 24),
    "claude-v1": _bundled(8, 24),
    "claude-v2": _bundled(8, 24),
    # A family's newest member prices its unknown names.
    "claude-sonnet": _SONNET_5_5,
    "claude-opus": _OPUS_5_5,
    "claude-haiku": _HAIKU_5_5,
    "claude": _SONNET_5_5,
}

DEFAULT_PRICES: dict[str, Price] = {
    **{name: replace(price, model=name) for name, price in _TABLE.items()},
    "demo": replace(_SONNET_5_5, model="demo", simulated=True),
}
"""The bundled table: name prefix -> price, the longest matching prefix wins."""


def _matches(model: str, name: str) -> bool:
    """``name`` is a prefix of ``model`` ending at a name boundary: ``claude-fable-5-2`` is
    not a prefix of the dated snapshot ``claude-fable-5-20260101``."""
    return model.startswith(name) and not model[len(name) : len(name) + 1].isalnum()


def _longest_prefix(model: str, table: Mapping[str, Price]) -> str | None:
    return max((name for name in table if _matches(model, name)), key=len, default=None)


# genai-prices' names for Price's rates (USD per million tokens).
_GENAI_RATES = {
    "input": "input_mtok",
    "output": "output_mtok",
    "cache_read": "cache_read_mtok",
    "cache_write_5m": "cache_write_mtok",
    "cache_write_1h": "cache_write_1h_mtok",
}


def _rate(value: Any, tier: int) -> float | None:
    """A genai-prices rate (a Decimal, or tiered prices) at ``tier`` (0: the base rate)."""
    if value is None or isinstance(value, Decimal):
        return None if value is None else float(value)
    return float(value.base if tier == 0 else value.tiers[tier - 1].price)


def _from_model_price(prices: ModelPrice, model: str, tier: int = 0) -> Price:
    """Price from genai-prices' prices; tiers (all cut at the input rate's thresholds) nest as
    ``long``, and a missing cache rate follows the multipliers."""
    first = prices.input_mtok
    thresholds = [] if first is None or isinstance(first, Decimal) else [t.start for t in first.tiers]
    rates = {key: _rate(getattr(prices, name), tier) for key, name in _GENAI_RATES.items()}
    # A 5-minute rate of its own, where a model has one, beats the generic write rate.
    rates["cache_write_5m"] = _rate(prices.cache_write_5m_mtok, tier) or rates["cache_write_5m"]
    more: dict[str, Any] = {k: v for k, v in rates.items() if k not in ("input", "output") and v is not None}
    if tier < len(thresholds):
        more.update(long_above=thresholds[tier], long=_from_model_price(prices, model, tier + 1))
    return Price.simple(
        rates["input"] or 0.0, rates["output"] or 0.0, source="genai-prices", model=model, **more
    )


def genai_price(model: str) -> Price | None:
    """The price genai-prices gives an Anthropic model today, or None (not installed, not known)."""
    info = _genai_model(model)
    if info is None:
        return None
    return _from_model_price(info.get_prices(datetime.now(tz=timezone.utc)), info.id)


def load_prices() -> None:
    """Read genai-prices' table now, if it is installed (~0.1 s of CPU, else paid at a process's
    first priced reply): a worker pays it before it takes a run's lease, not inside a run."""
    with contextlib.suppress(ImportError):
        from genai_prices import data_snapshot

        data_snapshot.get_snapshot()


@functools.lru_cache(maxsize=256)
def _genai_model(model: str) -> Any:
    """genai-prices' entry for ``model`` (None: not installed, not known). Remembered: the
    search matches every entry of its snapshot, and each reply of a run asks again."""
    try:
        from genai_prices import data_snapshot
    except ImportError:
        return None
    try:
        return data_snapshot.get_snapshot().find_provider_model(model, None, "anthropic", None)[1]
    except LookupError:
        return None


def known_price(model: str, overrides: Mapping[str, Price] | None = None) -> Price | None:
    """The price of ``model`` if an override, genai-prices or the bundled table knows it."""
    if overrides and (name := _longest_prefix(model, overrides)) is not None:
        return replace(overrides[name], source="override", model=overrides[name].model or name)
    found = genai_price(model)
    return found if found is not None else bundled_price(model)


@functools.lru_cache(maxsize=256)
def bundled_price(model: str) -> Price | None:
    """The bundled table's price of ``model`` (longest matching prefix), or None."""
    name = _longest_prefix(model, DEFAULT_PRICES)
    return None if name is None else DEFAULT_PRICES[name]


def price_for(model: str, overrides: Mapping[str, Price] | None = None) -> Price:
    """The price of ``model``: overrides, then genai-prices, then the bundled table, else
    :data:`FALLBACK`'s."""
    return known_price(model, overrides) or DEFAULT_PRICES[FALLBACK]


ASKED_MODEL = "asked_model"
"""The key of a model step's result naming the model the step asked, after any fallback switch:
a reply whose own name no table knows (a gateway's) is priced at it."""


def model_asked(result: Mapping[str, Any], run_model: str) -> str:
    """The model a recorded model step asked, by its result; ``run_model`` for a step recorded
    before results named it, which is what such a step has always been priced at."""
    return str(result.get(ASKED_MODEL) or run_model)


def price_of_reply(
    message: Mapping[str, Any], requested_model: str, overrides: Mapping[str, Price] | None = None, *, batch: bool = False
) -> Price:
    """The price of one model reply: by the model that answered (its ``model`` field) when
    that name can be priced, else by the model that was asked for; ``batch``: the reply came
    from a Message Batch (``Price.batched``)."""
    answered = str(message.get("model") or "")
    price = known_price(answered, overrides) if answered else None
    price = price if price is not None else price_for(requested_model, overrides)
    return price.batched() if batch else price
