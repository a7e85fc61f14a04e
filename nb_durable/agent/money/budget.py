"""Budgets: stop before a model call that could take a run past its dollars or tokens.

Before each *live* model call (never on replay) the request's input is counted with the
model's ``count_tokens`` (the API's own counter; not a step, nothing recorded; models that
cannot count are estimated at about four characters a token), and the call is priced at its
worst: every input token at the dearer of the input and cache-write prices, and the whole
``max_tokens`` as output, by the dearest model that may answer it (a step that keeps failing
overloaded moves on to its fallback models). If what the run has spent plus that worst case
would cross the budget, the call is not made and the run ends ``budget_exhausted``, resumable
with a larger budget. So a run never spends past its budget, at the price of stopping a little early.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..models.messages import request_tokens
from .cost import Price, Usage, dollars

__all__ = ["Budget", "input_tokens"]


def input_tokens(client: Any, request: Mapping[str, Any]) -> int:
    """The request's input tokens, counted by the model if it can (``count_tokens``)."""
    count = getattr(client, "count_tokens", None)
    if count is None:
        return request_tokens(request)
    try:
        return int(count(request))
    except Exception:
        return request_tokens(request)


@dataclass(frozen=True, slots=True)
class Budget:
    """A run's limits: dollars and tokens (all kinds), each optional."""

    max_usd: float | None = None
    max_run_tokens: int | None = None
    """Tokens of every kind the whole run may use (``max_tokens`` is one call's output limit)."""

    @property
    def limited(self) -> bool:
        return self.max_usd is not None or self.max_run_tokens is not None

    def refusal(
        self, *, spent: Usage, spent_usd: float, counted: int, max_tokens: int, prices: Sequence[Price], cache_ttl: str
    ) -> str:
        """Why the next call may not be made ('' if it may): what it could cost, against what.
        ``prices``: of every model that may answer it (its own, and the fallbacks it may move to)."""
        if self.max_run_tokens is not None:
            worst = counted + max_tokens
            if spent.total + worst > self.max_run_tokens:
                return (
                    f"the next model call could use {worst:,} tokens ({counted:,} in, up to {max_tokens:,} out), "
                    f"and the run has used {spent.total:,} of its budget of {self.max_run_tokens:,} tokens. "
                    "Resume with a larger token budget to go on."
                )
        if self.max_usd is not None:
            worst_usd = max(_worst_usd(price, counted, max_tokens, cache_ttl) for price in prices)
            if spent_usd + worst_usd > self.max_usd:
                simulated = any(price.simulated for price in prices)  # the demo model's: not a bill
                return (
                    f"the next model call could cost up to {dollars(worst_usd, simulated=simulated)} ({counted:,} "
                    f"tokens in, up to {max_tokens:,} out), and the run has spent "
                    f"{dollars(spent_usd, simulated=simulated)} of its budget of "
                    f"${self.max_usd:g}. Resume with a larger --max-usd to go on."  # :g, not :.2f: a budget of 0.001 read $0.00
                )
        return ""


def _worst_usd(price: Price, counted: int, max_tokens: int, cache_ttl: str) -> float:
    """The most one call may cost: every input token at the dearer of input and cache write."""
    price = price.at(Usage(input_tokens=counted))  # a long prompt may be priced higher
    write = price.cache_write_1h if cache_ttl == "1h" else price.cache_write_5m
    return (counted * max(price.input, write) + max_tokens * price.output) / 1_000_000
