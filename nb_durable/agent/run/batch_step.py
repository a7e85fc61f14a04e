"""A model step in batch mode (``batch_api``): its request goes in a Message Batch, at half
price, and a resume polls the batch its log names instead of sending the request again.

The step is an ordinary model step (``model:N``, effect ``idempotent``); what batch mode adds
happens inside it, in this order, each recorded before the next begins:

1. ``step_started``, as for every model step: the intent. The request's custom id is derived
   from the step's idempotency key (``custom_id_of``), so the intent names it.
2. A decision ``gathering a batch``, then the request goes to the process's ``Gatherer``,
   which sends it in one batch with the other batch-mode runs' pending calls; the create
   call is retried like any model attempt, after a look for the request in the batches made
   since when the failure may have made one (its answer lost: ``_maybe_made``); its failures,
   recorded as attempts, never count toward a fallback switch (``into_batch``).
3. A decision ``in batch <batch id>`` (by ``batch``, its note the custom id), as soon as the
   batch exists.
4. The batch is polled until it ends, the run's lease marked meanwhile with the batch it waits
   on (``core.holders.Awaiting``), so listings say so beside its status, ``running``, and how
   its polls fail while they do (they are polled through: the batch still answers). A succeeded result is the step's result, the message
   with ``"batch": {"id", "custom_id"}`` beside it, which is how every reader prices it at batch
   prices (``money.prices.BATCH_DISCOUNT``). An errored, expired, canceled or missing result,
   or a batch the API no longer has (404), is a decision ``batch <what>: asked directly``,
   then one normal call (retried as any), recorded as the step's result at full price. A batch
   refused to its reader (401, 403) fails the step, no decision recorded: a resume polls it.

A resume meets the step started and not completed, and runs it again (model steps are
idempotent), reading its decisions first: after a fallback decision it makes the normal call
at once; after an ``in batch`` decision it polls that batch and sends nothing; after only a
``gathering`` decision it first looks for its custom id in the batches created around then
(``_sent_before``), and submits the request only if none holds it; with no decision at all
(stopped before its request went anywhere) it submits it.

The crash windows: before 2's decision nothing was sent. From it to the write of decision 3
the request may be in a batch the log does not name (the widest part is one local append
after the create call's answer: about a millisecond); the resume's look around finds it,
records it, and sends nothing again. That look lists the batches created from the
``gathering`` decision to the step's last attempt plus a gathering window, ``LOOK_AROUND``
seconds either side, and waits for each to end: so only a clock off by more than that, or a
list the API refuses outright (a 4xx), can still pay a request twice (said in docs/guarantees.md);
a list that fails for a while is retried, and past the retry policy the step fails, resumable,
having sent nothing. After 3,
the resume polls. After the result is recorded, replay sends nothing at all.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING, Any

from ...core.context import StepContext
from ...core.events import Decision
from ...core.holders import Awaiting
from ...core.steps import StepRecord
from ...errors import ModelError, RunError, TransientModelError
from ..models.base import endpoint_of
from ..models.message_batches import Gatherer, Member, custom_id_of, gatherer_for
from ..models.retry import call_with_retries

if TYPE_CHECKING:
    from .hooks import RunHooks
    from .model_call import ModelCall
    from .seams import ModelSeam

__all__ = [
    "ASKED_DIRECTLY", "BATCH_BY", "GATHERING", "IN_BATCH", "LOOK_AROUND", "Said",
    "asked_directly", "batch_mode", "batch_named", "batch_of", "batched_reply", "into_batch", "left_in_batch",
]  # fmt: skip

BATCH_BY = "batch"
"""Who records a batch-mode step's decisions."""
IN_BATCH = "in batch "
"""A decision's prefix: the step's request is in the batch named after it."""
GATHERING = "gathering a batch"
"""A decision: the step's request goes to the gatherer now, and may be in a batch from here on."""
ASKED_DIRECTLY = ": asked directly"
"""The end of a fallback decision (``asked_directly``)."""
LOOK_AROUND = 120.0
"""Seconds around the time a step of an earlier session may have created a batch that its
resume looks at (the API's clock and this machine's may differ)."""


@dataclass(frozen=True, slots=True)
class Said:
    """What a step's decisions say of its batch."""

    batch_id: str | None = None
    """The batch its request was sent in, if recorded."""
    custom_id: str = ""
    gathering: Decision | None = None
    """The last time its request went to the gatherer, if it did."""
    fell_back: str = ""
    """What became of its request when it fell back to a normal call (``expired``, ``errored``,
    ``canceled``, ``missing``, ``unreadable``), '' while it has not."""
    why: str = ""
    """The note of its fallback: the batch's error (``overloaded_error: ...``), if it gave one."""


def batch_of(decisions: tuple[Decision, ...]) -> Said:
    """What a step's decisions say of its batch."""
    said = Said()
    for d in decisions:
        if d.by != BATCH_BY:
            continue
        if d.decision.startswith(IN_BATCH):
            said = replace(said, batch_id=d.decision[len(IN_BATCH) :], custom_id=d.note)
        elif d.decision == GATHERING:
            said = replace(said, gathering=d)
        else:  # the only other decision batch mode records (``asked_directly``)
            what = d.decision.removeprefix("batch ").removesuffix(ASKED_DIRECTLY)
            said = replace(said, fell_back=what or d.decision, why=d.note)
    return said


def batch_named(batch_id: str) -> str:
    """A batch as a run waiting on it says it, running or left: 'Message Batch msgbatch_01'."""
    return f"Message Batch {batch_id}"


def left_in_batch(decision: str | None) -> Awaiting | None:
    """The batch a step left without a result waits on, if its latest decision is ``in batch <id>``
    (a worker's stop, a kill, a refused poll): its request is paid for, and a resume polls it."""
    if not decision or not decision.startswith(IN_BATCH):
        return None
    return Awaiting("", batch_named(decision[len(IN_BATCH) :]))


def asked_directly(what: str) -> str:
    """The decision a step records when its batch gave no answer (``what``: the result's type) and
    it falls back to a normal call: ``batch expired: asked directly``."""
    return f"batch {what}{ASKED_DIRECTLY}"


def into_batch(record: StepRecord) -> frozenset[int]:
    """The seqs of a step's failed attempts on the way into its Message Batch (a create, a list
    of the batches made): those from a ``gathering`` decision to the batch's next decision.
    They asked the Batches endpoint, for every run gathered whatever its model, not the model:
    a fallback switch never counts them (``fallback.counted``)."""
    seqs: set[int] = set()
    gathering = False
    for event in sorted([*record.attempts, *record.decisions], key=lambda e: e.seq):
        if isinstance(event, Decision):
            if event.by == BATCH_BY:
                gathering = event.decision == GATHERING
        elif gathering:
            seqs.add(event.seq)
    return frozenset(seqs)


def batched_reply(call: ModelCall, context: StepContext, member: Member) -> dict[str, Any] | None:
    """The step's reply from its Message Batch, or None when it falls back to a normal call
    (that decision recorded first)."""
    gatherer = member.gatherer
    log = context.log
    record = log.record_at(context.position)
    said = batch_of(record.decisions)
    if said.fell_back:
        return None
    batch_id, custom_id = said.batch_id, said.custom_id or custom_id_of(log.run_id, context.step_id)
    stop = partial(_waiting, call.hooks)
    result: Mapping[str, Any] | None = None
    if batch_id is None and said.gathering is not None:
        # An earlier session sent the request to its gatherer and recorded no batch: it may
        # have died just after the batch was made. Look in the batches made then, first.
        call.show(state="in_flight", output="looking for this call in the batches made before the crash")
        def retrying(look: Callable[[], list[str]]) -> list[str]:
            return call_with_retries(look, call.seam.retry, on_failure=call._failed, sleep=call.hooks.sleep)

        found = _sent_before(gatherer, said.gathering.ts, record, custom_id, stop, retrying)
        if found is not None:
            batch_id, result = found
            log.record_decision(context.step_id, IN_BATCH + batch_id, by=BATCH_BY, note=custom_id)
    if batch_id is None:
        request = call.request
        lost = False  # the last create's answer was lost, not a refusal: its batch may exist

        def submit() -> str:
            nonlocal lost, result
            if lost:
                # Sent again blindly, the request would run in two batches, paid twice: look first,
                # as a resume does (a list that fails is a failed attempt, retried by this loop).
                now = log.record_at(context.position)
                gathering = batch_of(now.decisions).gathering  # recorded just before this loop
                since = gathering.ts if gathering is not None else now.started_at or 0.0
                found = _sent_before(gatherer, since, now, custom_id, stop, lambda look: look())
                if found is not None:
                    found_id, result = found
                    return found_id
            try:
                return member.submit(custom_id, request)
            except TransientModelError as e:
                lost = _maybe_made(e)
                raise

        call.show(state="in_flight", output="gathering a Message Batch")
        log.record_decision(context.step_id, GATHERING, by=BATCH_BY, note=custom_id)
        batch_id = call_with_retries(submit, call.seam.retry, on_failure=call._failed, sleep=call.hooks.sleep)
        log.record_decision(context.step_id, IN_BATCH + batch_id, by=BATCH_BY, note=custom_id)
    call.show(state="in_flight", output=f"waiting for {batch_named(batch_id)}")
    if result is None:
        # Up to a day: every listing says what the running run waits on, from its lease's mark.
        mark = Awaiting.now(context.step_id, batch_named(batch_id))
        log.writer.mark_asking(mark)

        def told(trouble: str) -> None:
            # Polled on (the batch still answers), but said: an endpoint down for hours is no slow batch.
            what = f"{mark.what} (its last poll failed: {trouble}; polling on)" if trouble else mark.what
            log.writer.mark_asking(replace(mark, what=what))
            call.show(state="in_flight", output=f"waiting for {what}")

        try:
            result = gatherer.result(batch_id, custom_id, stop=stop, told=told)
        except ModelError as e:
            if not _gone(e):
                # Refused to this reader (a wrong key: 401, 403), the batch still answers, and is
                # paid: the step fails, resumable, and its resume polls it (a fallback pays twice).
                raise
            result = {"type": "unreadable", "error": str(e)}
        finally:
            log.writer.mark_asking(None)
    kind = str(result.get("type"))
    if kind == "succeeded":
        return {"message": result["message"], "request_id": None, "batch": {"id": batch_id, "custom_id": custom_id}}
    log.record_decision(context.step_id, asked_directly(kind), by=BATCH_BY, note=_why(result))
    call.show(state="in_flight", output="")
    return None


def _sent_before(
    gatherer: Gatherer,
    since: float,
    record: StepRecord,
    custom_id: str,
    stop: Callable[[], None],
    retrying: Callable[[Callable[[], list[str]]], list[str]],
) -> tuple[str, Mapping[str, Any]] | None:
    """The batch (and its result) an earlier session sent this step's request in, if any: among
    the batches created from ``since`` (its gathering) to its last attempt and a gathering
    window after (``LOOK_AROUND`` either side), each waited for until it ends. None if none
    holds it, or the API refuses the list outright (then the request may be paid twice: said
    in docs/guarantees.md). A list that fails for a while (429, 529, 5xx) is asked again as
    any model call is (``retrying``); past the retry policy the step fails, resumable, and
    sends nothing: not knowing is no reason to pay twice."""
    last = max([since, *(a.ts + (a.delay or 0.0) for a in record.attempts if a.ts >= since)])
    window = (since - LOOK_AROUND, last + gatherer.window + LOOK_AROUND)
    try:
        candidates = retrying(lambda: gatherer.batches.created_between(*window))
    except TransientModelError:
        raise
    except ModelError:
        return None
    for batch_id in candidates:
        try:
            result = gatherer.result(batch_id, custom_id, stop)
        except ModelError:
            continue
        if result.get("type") != "missing":
            return batch_id, result
    return None


def _maybe_made(error: TransientModelError) -> bool:
    """Whether a create call that failed so may have made its batch all the same: its answer
    lost (no connection, a timeout, a 5xx), not a refusal to start (429, 529: overloaded)."""
    return error.status not in (429, 529) and error.error_type not in ("rate_limit_error", "overloaded_error")


def _gone(error: ModelError) -> bool:
    """Whether a batch that could not be read is gone (the API has no such batch: deleted, or past
    its keeping), so its answer will never come, rather than refused to this reader."""
    return error.status == 404 or error.error_type == "not_found_error"


def _waiting(hooks: RunHooks) -> None:
    """While the batch runs: a stop asked of the run, or of its worker, stops it here."""
    hooks.check_stop()
    if hooks.while_waiting is not None:
        hooks.while_waiting()


def _why(result: Mapping[str, Any]) -> str:
    error = result.get("error")
    if isinstance(error, dict):  # an ErrorResponse: {"type": "error", "error": {"type", "message"}}
        inner = error.get("error")
        inner = inner if isinstance(inner, dict) else error
        return f"{inner.get('type', 'error')}: {inner.get('message', '')}"
    return str(error or "")


@contextlib.contextmanager
def batch_mode(seam: ModelSeam, run_id: str, on: bool) -> Iterator[None]:
    """While a session runs: in batch mode, its model calls go through the gatherer of its
    endpoint, which counts the run as one whose next call is worth waiting for."""
    if not on:
        yield
        return
    client = seam.client
    factory = getattr(client, "message_batches", None)
    if factory is None:
        raise RunError(
            f"run {run_id!r} is in batch mode (batch_api), which needs the Message Batches API; the "
            f"{getattr(client, 'name', type(client).__name__)} model has none: run it with the real API, or without batch_api",
            run_id=run_id,
        )
    gatherer = gatherer_for(endpoint_of(client), factory)
    try:
        with gatherer.member() as member:
            seam.batches = member
            yield
    finally:
        seam.batches = None
