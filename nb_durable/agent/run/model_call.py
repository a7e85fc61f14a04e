"""A live model call: its attempts, its view, and the budget it is priced under before it is made.

A live model call is a ``ModelCall``: one small object per call, holding its attempts and its view
as it streams, retries and waits, and its road through the fallback models (``fallback``): a step
that keeps failing overloaded moves on to the next model inside the step, its identity unchanged. In
batch mode (``batch_step``) the call goes in a Message Batch first, and only a result the batch
could not give is asked for directly.

A call is priced before it is made (``refusal``): one past the log's end, and one the log holds
unfinished (failed, or in flight when its process died), which a resume asks again live, perhaps
of the model it names (``fallback.road``) and under the budget it gives. Those are this session's
changes, recorded only at the run's next point, so the call is priced as they would have it.
A stream that broke midway was paid as far as it got: before the call is tried again, the budget
is asked again with what it reported (``Overspent``, which ends the run ``budget_exhausted``).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ...core.context import current_step
from ...core.log import EventLog
from ...errors import ModelError, TransientModelError
from ..display.views import StepId, Tally, many, pending_view
from ..models.base import stall_limit
from ..models.retry import call_with_retries
from ..models.stops import marked
from ..money.budget import refusal_before
from ..money.cost import Cost, Price, broken_stream, dollars
from ..money.prices import ASKED_MODEL
from .batch_step import batched_reply
from .compaction import full_reply, too_long
from .fallback import record_failure, resumed_live, road

if TYPE_CHECKING:
    from .seams import ModelSeam
    from .session import RunSession

__all__ = ["ModelCall", "Overspent", "refusal"]


class Overspent(Exception):
    """A model step's broken streams spent what its budget needs for another attempt: the step
    is not tried again, and the run ends ``budget_exhausted`` with this as its detail."""


class ModelCall:
    """One model step asked for live: its attempts, and its view as it streams, retries and waits.

    ``run`` is the step's function (``run_step`` calls it only when the log has no result);
    the view is an overlay on ``pending_view``, shown as each piece of text arrives, each
    attempt fails and each shared limit is waited on, until the recorded view replaces it.
    """

    def __init__(self, seam: ModelSeam, step: StepId, request: dict[str, Any]) -> None:
        self.seam = seam
        self.step = step
        self.request = request
        self.hooks = seam.session.hooks
        self.view = pending_view(step)
        self.ran = False
        self._streamed: list[str] = []
        self._thought: list[str] = []
        self._failures = 0
        self._moved_at = 0
        """The step's attempts before the model it asks now: each model has attempts of its own
        (``call_with_retries``), so a row's n/m counts those of the model asked now."""

    def show(self, **changes: Any) -> None:
        """The view with ``changes``, shown."""
        self.view = self.view.but(**changes)
        self.hooks.show_step(self.view)

    def run(self) -> dict[str, Any]:
        self.ran = True
        context = current_step()
        assert context is not None
        self.hooks.show_step(self.view)
        self.hooks.starting(context.position, self.view)
        moving = road(self, context)
        try:
            batches = self.seam.batches
            reply = batched_reply(self, context, batches) if batches is not None else None
            if reply is None:
                reply = call_with_retries(
                    self._attempt, self.seam.retry, on_failure=self._failed, sleep=self.hooks.sleep, moving=moving
                )
        except TransientModelError:
            raise  # _failed recorded it, with its status
        except ModelError as e:
            # Record the refusal with its status and type (the core would record only its class).
            record_failure(context, context.attempts + 1, e, None)
            if too_long(e):  # a full window, as if the model had stopped for it
                return {**full_reply(e, str(self.request.get("model"))), ASKED_MODEL: self.request.get("model")}
            raise
        self.hooks.effect_ran(context.position, self.view)
        # The model asked, after any switch: what a reply named by a gateway is priced at.
        return {**marked(reply), ASKED_MODEL: self.request.get("model")}

    def _attempt(self) -> dict[str, Any]:
        limits = self.seam.limits
        longest = self.seam.retry.max_retry_after
        with contextlib.nullcontext() if limits is None else limits.call(self.request, self._waiting, longest):
            if self.view.state == "retrying":
                self.show(state="in_flight", wait=None)
            with stall_limit(self.seam.stall_timeout):
                if not self.hooks.observer.hears_steps():
                    return self.seam.client.create(self.request)
                return self.seam.client.create(self.request, on_text=self._on_text, on_thinking=self._on_thinking)

    def _on_text(self, text: str) -> None:
        self._streamed.append(text)
        self.show(output="".join(self._streamed))

    def _on_thinking(self, text: str) -> None:
        self._thought.append(text)
        self.show(thinking="".join(self._thought))

    def _failed(self, attempt: int, error: TransientModelError, delay: float | None) -> None:
        self._streamed.clear()
        self._thought.clear()
        context = current_step()
        assert context is not None
        over = self._over_budget(error) if delay is not None else ""
        record_failure(context, attempt, error, None if over else delay)
        self._failures = attempt
        if over:
            self.show(state="failed", wait=None, error=over, output="", thinking="")
            raise Overspent(over)
        self.show(
            state="retrying" if delay is not None else "failed",
            wait=delay,
            retry_at=None if delay is None else time.time() + delay,
            attempt=attempt - self._moved_at,
            max_attempts=self.seam.retry.max_attempts,
            error=str(error),
            output="",
            thinking="",
        )

    def _over_budget(self, error: ModelError) -> str:
        """Why the step may not be tried again after ``error`` ('' if it may): what its broken
        streams reported (``error``'s and those its record holds, of any session) is spent, though
        the session's tally counts them only once the step has ended. A failure that reported
        nothing spent nothing the budget has not seen."""
        context = current_step()
        if error.usage is None or self.seam.budget_after is None or context is None:
            return ""
        model, prices = str(self.request.get("model") or ""), self.hooks.prices
        mine = broken_so_far(context.log, context.position, model, prices).add_broken(*broken_stream(error.usage, model, prices))
        said = self.seam.budget_after(self.request, mine)
        if not said:
            return ""
        reported = dollars(mine.broken_dollars, simulated=mine.simulated)
        return (
            f"model step {self.step} was not tried again: its {many(mine.broken_streams, 'broken stream')} reported using "
            f"{reported} before they broke, which counts as spent (the API may not bill all of it); {said}"
        )

    def moved(self, why: str) -> None:
        """The step moved on to another model (``why`` says so): its attempts count from 1 again."""
        self._moved_at = self._failures
        self.show(state="retrying", error=why, attempt=0, max_attempts=self.seam.retry.max_attempts, wait=None)

    def _waiting(self, why: str) -> None:
        # A wait on a limit shared by every process is no attempt of this step's: the row says
        # why it waits, not "n/m after" a failure (the next attempt's view brings its count back).
        self.show(state="retrying", error=why, attempt=0, max_attempts=self.seam.retry.max_attempts, wait=None)


def broken_so_far(log: EventLog, position: int, model: str, prices: Mapping[str, Price] | None) -> Cost:
    """What the unfinished step at ``position`` spent in streams that broke midway, in any
    session: no step's end has counted it yet (``Tally.ended``)."""
    return Tally().ended([log.record_at(position, result=False)], model, prices).cost


def refusal(session: RunSession, log: EventLog, request: dict[str, Any], *, spent: Cost | None = None) -> str:
    """Why the call with ``request`` at the log's cursor may not be made ('' if it may);
    ``spent``: what the run has spent, if more than the session's tally yet counts."""
    resumed = resumed_live(log)
    asked = session.asks.change.recorded() if resumed else {}
    children = session.delegation.bill.spent if session.delegation is not None else None
    if spent is None:
        spent = session.cost
        if resumed:  # what the step's broken streams reported, which no step's end has counted yet
            spent = spent + broken_so_far(log, log.cursor, session.current.model, session.hooks.prices)
    return refusal_before(
        request, session.current.but(**asked), client=session.client, spent=spent, children=children,
        prices=session.hooks.prices, simulated=session.settings.model_kind == "demo",  # the demo's replies are priced as simulated
    )  # fmt: skip
