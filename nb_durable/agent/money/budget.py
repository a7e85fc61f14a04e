"""Budgets: stop before a model call that could take a run past its dollars or tokens.

Before each *live* model call (never on replay) the request's input is counted with the
model's ``count_tokens`` (the API's own counter; not a step, nothing recorded; models that
cannot count, or whose count fails, are estimated: four characters a token for ASCII, more for
other text, ``models.messages.request_tokens``; a stop that rests on a failed count's estimate
says so), and the call is priced at its
worst: every input token at the dearer of the input and cache-write prices, and the whole
``max_tokens`` of that request as output, by the dearest model that may answer it (a step that keeps failing
overloaded moves on to its fallback models). If what the run has spent plus that worst case
would cross the budget, the call is not made and the run ends ``budget_exhausted``, resumable
with a larger budget. So a run never spends past its budget, at the price of stopping a little early.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ..models.messages import request_tokens
from .cost import Cost, Price, Usage, dollars
from .prices import price_for

if TYPE_CHECKING:
    from ..settings import AgentSettings

__all__ = ["Budget", "counted_input", "input_tokens", "refusal_before"]


def counted_input(client: Any, request: Mapping[str, Any]) -> tuple[int, str]:
    """The request's input tokens, counted by the model if it can (``count_tokens``), and why
    they are an estimate instead when its count failed ('' when it did not)."""
    count = getattr(client, "count_tokens", None)
    if count is None:
        return request_tokens(request), ""
    try:
        return int(count(request)), ""
    except Exception as e:
        status = getattr(e, "status", None)
        return request_tokens(request), f"count_tokens failed{f' with {status}' if status else ''}"


def input_tokens(client: Any, request: Mapping[str, Any]) -> int:
    """The request's input tokens, counted by the model if it can (``count_tokens``)."""
    return counted_input(client, request)[0]


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
        self, *, spent: Usage, spent_usd: float, counted: int, max_tokens: int, prices: Sequence[Price], cache_ttl: str,
        estimated: str = "",
    ) -> str:
        """Why the next call may not be made ('' if it may): what it could cost, against what.
        ``prices``: of every model that may answer it (its own, and the fallbacks it may move to);
        ``estimated``: why ``counted`` is an estimate, not the API's count ('' if it is the count)."""
        # A stop that rests on a guess says so: the figure is not the API's.
        guessed = f", estimated as {estimated}" if estimated else ""
        if self.max_run_tokens is not None:
            worst = counted + max_tokens
            if spent.total + worst > self.max_run_tokens:
                return (
                    f"the next model call could use {worst:,} tokens ({counted:,} in{guessed}, up to {max_tokens:,} out), "
                    f"and the run has used {spent.total:,} of its budget of {self.max_run_tokens:,} tokens. "
                    "Resume with a larger token budget to go on."
                )
        if self.max_usd is not None:
            worst_usd = max(_worst_usd(price, counted, max_tokens, cache_ttl) for price in prices)
            if spent_usd + worst_usd > self.max_usd:
                simulated = any(price.simulated for price in prices)  # the demo model's: not a bill
                return (
                    f"the next model call could cost up to {dollars(worst_usd, simulated=simulated)} ({counted:,} "
                    f"tokens in{guessed}, up to {max_tokens:,} out), and the run has spent "
                    f"{dollars(spent_usd, simulated=simulated)} of its budget of "
                    f"${self.max_usd:g}. Resume with a larger --max-usd to go on."  # :g, not :.2f: a budget of 0.001 read $0.00
                )
        return ""


def refusal_before(
    request: Mapping[str, Any],
    current: AgentSettings,
    *,
    client: Any,
    spent: Cost,
    children: Callable[[], Cost] | None,
    prices: Mapping[str, Price] | None,
    simulated: bool,
) -> str:
    """Why a live model call with ``request`` may not be made ('' if it may), under the budget
    of ``current`` (the settings the call is made with). ``spent``: what the session paid and
    its replay saved; ``children``: what a delegating run's children recorded, asked only of a
    run with a budget (the whole tree spends one budget); ``simulated``: the demo's replies, priced as simulated."""
    budget = Budget(current.max_usd, current.max_run_tokens)
    if not budget.limited:
        return ""
    used = spent.paid + spent.saved
    used_usd = spent.paid_dollars + spent.saved_dollars
    if children is not None:
        recorded = children()
        used, used_usd = used + recorded.paid, used_usd + recorded.paid_dollars
    # The step may move on to a fallback model (fallback.py): priced at the dearest of them.
    priced = [price_for(m, prices) for m in (current.model, *current.fallback_models)]
    if simulated:
        priced = [replace(p, simulated=True) for p in priced]
    counted, estimated = counted_input(client, request)
    return budget.refusal(
        spent=used,
        spent_usd=used_usd,
        counted=counted,
        estimated=estimated,
        # The request's own limit: a compaction's summary is cut well below the run's max_tokens.
        max_tokens=int(request.get("max_tokens", current.max_tokens)),
        prices=priced,
        cache_ttl=str(request.get("cache_control", {}).get("ttl", "off")),
    )


def _worst_usd(price: Price, counted: int, max_tokens: int, cache_ttl: str) -> float:
    """The most one call may cost: every input token at the dearer of input and cache write."""
    price = price.at(Usage(input_tokens=counted))  # a long prompt may be priced higher
    write = price.cache_write_1h if cache_ttl == "1h" else price.cache_write_5m
    return (counted * max(price.input, write) + max_tokens * price.output) / 1_000_000
