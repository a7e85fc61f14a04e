"""A live model call's budget, as the session that makes it sees it (``money.budget`` prices it).

A call is priced before it is made: one past the log's end, and one the log holds unfinished
(failed, or in flight when its process died), which a resume asks again live, perhaps of the
model it names (``fallback.road``) and under the budget it gives. Those are this session's
changes, recorded only at the run's next point, so the call is priced as they would have it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...core.log import EventLog
from ..money.budget import refusal_before
from .fallback import resumed_live

if TYPE_CHECKING:
    from .session import RunSession

__all__ = ["refusal"]


def refusal(session: RunSession, log: EventLog, request: dict[str, Any]) -> str:
    """Why the call with ``request`` at the log's cursor may not be made ('' if it may)."""
    asked = session.asks.change.recorded() if resumed_live(log) else {}
    children = session.delegation.bill.spent if session.delegation is not None else None
    return refusal_before(
        request, session.current.but(**asked), client=session.client, spent=session.cost, children=children,
        prices=session.hooks.prices, simulated=session.settings.model_kind == "demo",  # the demo's replies are priced as simulated
    )  # fmt: skip
