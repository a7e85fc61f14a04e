"""The run index's figures for agent runs: tokens and dollars, counted as steps are recorded.

``core.index.rows`` keeps per-run sums of what ``AgentFigures`` says each event adds, so
``%agent_runs`` and ``nb-durable runs`` show a run's tokens and dollars without reading its
log. The sums are those ``views_of`` makes of a recorded run: the usage of every model call,
a turn's or a compaction's (``tokens``, ``dollars``, ``cache_saved_dollars``; ``simulated``
counts the steps priced with a simulated price), priced by the model that answered it, else
by the one its step asked (at batch prices when its result names a Message Batch), and what
each session recorded that its replay saved (``saved_tokens``, ``saved_dollars``). A failed
attempt whose stream broke midway adds what it reported using (``AttemptFailed.usage``) to the
paid figures, priced as ``cost.broken_stream`` prices it for every view, and names that part
(``broken_streams``, ``broken_dollars``, ``broken.*``). Registered when ``nb_durable.agent`` loads.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...core.events import ATTEMPT_FAILED, RUN_FINISHED, STEP_COMPLETED
from ...core.index.figures import set_figures
from ..display.step_ids import StepId
from .cost import Cost, Price, Usage, broken_stream
from .prices import model_asked, price_for, price_of_reply

__all__ = ["AgentFigures", "cost_of_figures"]

def _usage(prefix: str, usage: Usage) -> dict[str, float]:
    return {f"{prefix}{name}": getattr(usage, name) for name in Usage.__slots__}


def _paid(usage: Usage, price: Price) -> dict[str, float]:
    """What one paid model call (a reply, or a stream that broke midway) adds, priced at ``price``."""
    dollars = price.dollars(usage)
    return {
        "tokens": usage.total,
        "dollars": dollars,
        "cache_saved_dollars": price.uncached_dollars(usage) - dollars,
        "simulated": 1 if price.simulated else 0,
        **_usage("paid.", usage),
    }


def _usage_of(prefix: str, figures: Mapping[str, float]) -> Usage:
    return Usage(*(int(figures.get(f"{prefix}{name}", 0)) for name in Usage.__slots__))


class AgentFigures:
    """What a model step and a session's end add to a run's figures."""

    rule = 3
    """Raised whenever ``count`` would add other figures for the same event (``core.index.rows``;
    2: a reply no table knows is priced at the model its step asked, when its result says it;
    3: what a broken stream reported using is paid)."""

    def wants(self, kind: str, step_id: str | None) -> bool:
        # Every model call counts, a compaction's too, as the timeline's header counts them.
        return kind == RUN_FINISHED or (kind in (STEP_COMPLETED, ATTEMPT_FAILED) and step_id is not None and StepId.is_paid(step_id))

    def count(self, settings: Mapping[str, Any], kind: str, value: Any) -> Mapping[str, float]:
        model = str(settings.get("model", ""))
        if kind == ATTEMPT_FAILED:
            if not isinstance(value, dict):
                return {}  # nothing reported: it broke before its message_start, or never streamed
            usage, price = broken_stream(value, model)
            paid = _paid(usage, price)
            return {**paid, "broken_streams": 1, "broken_dollars": paid["dollars"], **_usage("broken.", usage)}
        if kind == STEP_COMPLETED:
            message = value.get("message") if isinstance(value, dict) else None
            if not isinstance(message, dict) or not message:
                return {}
            asked = model_asked(value, model)
            price = price_of_reply({"model": str(message.get("model") or "")}, asked, batch=bool(value.get("batch")))
            return _paid(Usage.of(message), price)
        session = value.get("cost") if isinstance(value, dict) else None
        if not isinstance(session, dict):
            return {}
        saved = Cost().with_session_saving(session, price_for(model))
        return {
            "saved_tokens": saved.saved.total,
            "saved_dollars": saved.saved_dollars,
            "simulated": 1 if saved.simulated else 0,
            **_usage("saved.", saved.saved),
        }


def cost_of_figures(figures: Mapping[str, float]) -> Cost:
    """A run's figures as the ``Cost`` a display shows: paid and saved, tokens and dollars."""
    return Cost(
        paid=_usage_of("paid.", figures),
        saved=_usage_of("saved.", figures),
        paid_dollars=float(figures.get("dollars", 0.0)),
        saved_dollars=float(figures.get("saved_dollars", 0.0)),
        cache_saved_dollars=float(figures.get("cache_saved_dollars", 0.0)),
        simulated=bool(figures.get("simulated", 0)),
        broken=_usage_of("broken.", figures),
        broken_dollars=float(figures.get("broken_dollars", 0.0)),
        broken_streams=int(figures.get("broken_streams", 0)),
    )


set_figures(AgentFigures())
