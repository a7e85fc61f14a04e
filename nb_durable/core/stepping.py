"""``run_step``: at the log's cursor, hand back a step's record, or run it live and record it.

What the cursor decides, split from ``EventLog`` (``log``), which keeps a run's reading and
recording: inside the recorded steps, a step that is the same one (id, and request hash when
both have one) is replayed and anything else is a ``DivergenceError``; a step in doubt goes
to its policy (``in_doubt``); past the end, a step runs, its intent recorded first where it
has an effect, and its result recorded before ``run_step`` returns. An ``EventLog``'s own
part: it reaches into the log as the log's methods did.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import DivergenceError, InvalidStepIdError, SettingError, StoreShortError
from .codec import pinned_hash, request_hash
from .context import StepContext, running
from .events import EFFECTS, Effect, StepStarted
from .in_doubt import RERUN, InDoubtPolicy, OutcomeUnknown, settle
from .steps import StepIndex

if TYPE_CHECKING:
    from .log import EventLog

__all__ = ["run_step"]

T = TypeVar("T")

_hash_request = request_hash  # run_step's keyword of the same name shadows it there


def run_step(
    log: EventLog,
    step_id: str,
    fn: Callable[[], T],
    *,
    effect: Effect = "pure",
    request: Any = None,
    request_hash: str | None = None,
    in_doubt: InDoubtPolicy | None = None,
    check: Callable[[], Any] | None = None,
) -> T | Any:
    """Run ``fn`` as the next step of ``log`` and record its result, or replay the record.

    ``effect`` says what running it does: ``pure`` (nothing), ``idempotent`` (the same
    thing twice) or ``external`` (intent synced first; in doubt after a crash). ``request``
    (any JSON) or ``request_hash`` pins the step's input: replay with a different one raises
    ``DivergenceError``. ``in_doubt`` overrides the log's policy for this step; ``check``
    is a guard that, for an in-doubt step, returns the result if the effect did happen and
    None if it did not.
    """
    if not isinstance(step_id, str) or not step_id or "\n" in step_id:
        raise InvalidStepIdError(
            f"a step id is a non-empty one-line string, not {step_id!r}", run_id=log.run_id
        )
    if effect not in EFFECTS:
        raise SettingError(setting="effect", value=effect, reason=f"of step {step_id!r} of run {log.run_id!r} must be 'pure', 'idempotent' or 'external'")
    try:
        digest = pinned_hash(request_hash)
    except TypeError as e:
        raise SettingError(setting="request_hash", value=request_hash, reason=f"of step {step_id!r} of run {log.run_id!r}: {e}") from None
    if digest is None and request is not None:
        try:
            digest = _hash_request(request)
        except (TypeError, ValueError) as e:
            raise InvalidStepIdError(
                f"the request of step {step_id!r} is not JSON ({e}); pass JSON data or request_hash=",
                run_id=log.run_id,
            ) from e
    return _at_cursor(log, step_id, fn, effect, digest, in_doubt, check)


def _at_cursor(
    log: EventLog,
    step_id: str,
    fn: Callable[[], Any],
    effect: Effect,
    digest: str | None,
    in_doubt: InDoubtPolicy | None,
    check: Callable[[], Any] | None,
) -> Any:
    if not log.writer.open:
        raise log.writer.lost_error()
    history = log.writer.history
    position = log.cursor
    if position < history.step_count:
        seq = history.completed_seq(position, step_id, digest)
        if seq is not None:
            # The common case of replay: a step recorded by one line, its result at hand.
            log.cursor = position + 1
            if log.listeners:
                log._notify(history.event(seq), True)
            return history.result_at(seq)
        step = history.step(position)
        if step.step_id != step_id or (digest and step.hash and digest != step.hash):
            raise _divergence(log, position, step, step_id, digest)
        if step.completed is not None:
            log.cursor = position + 1
            if log.listeners:
                log._notify(history.event(step.completed), True)
            return history.result_at(step.completed)
        if step.decision == "skip":
            log.cursor = position + 1
            if log.listeners:
                log._notify(history.event(step.seqs[-1]), True)
            return OutcomeUnknown(log.run_id, step_id, log.idempotency_key(step_id))
        kept = log._unrecorded.get(position)
        if kept is not None and kept[0] == step_id:
            return _complete_live(log, position, step_id, digest, kept[1], kept[2], step.effect or "external")
        if step.state == "in_doubt":
            settled = settle(log, step, log.in_doubt if in_doubt is None else in_doubt, check)
            if settled is not RERUN:
                return settled
    elif (used := history.position_of(step_id)) is not None:
        raise InvalidStepIdError(
            f"step id {step_id!r} is already used at position {used} of run {log.run_id!r}; "
            "give each step of a run its own id (for example add a counter: 'fetch:2').",
            run_id=log.run_id,
        )
    return _run_live(log, position, step_id, fn, effect, digest)

def _run_live(log: EventLog, position: int, step_id: str, fn: Callable[[], Any], effect: Effect, digest: str | None) -> Any:
    key = log.idempotency_key(step_id)
    if effect != "pure":
        log._record(StepStarted, step=step_id, hash=digest, key=key, effect=effect)
    context = StepContext(log, step_id, key, effect, position)
    started = time.perf_counter()
    try:
        with running(context):
            result = fn()
    except Exception as e:
        # The step's own failure is recorded (it is not in flight any more); a crash is not.
        if not context.gave_up and log.writer.open:
            context.record_attempt_failed(context.attempts + 1, type(e).__name__, message=str(e)[:2000])
        raise
    ms = (time.perf_counter() - started) * 1000
    return _complete_live(log, position, step_id, digest, result, ms, effect)

def _complete_live(log: EventLog, position: int, step_id: str, digest: str | None, result: Any, ms: float, effect: Effect) -> Any:
    after = (
        " The step's effect has run and its intent stays in the log, so the next run treats it as in doubt."
        if effect == "external"
        else " Nothing was recorded for it."
    )
    try:
        value = log.complete_step(position, step_id, digest, result, ms, what=f"step {step_id!r}", after=after)
    except StoreShortError as e:  # a full disk, a server short of capacity: the store could not take it for now
        if effect == "pure":
            raise  # it simply runs again
        log._unrecorded[position] = (step_id, result, ms)
        then = (
            f"run the step again with this same log: the result its {effect} effect returned is kept and "
            "recorded then, and the effect does not run again (a process that opens the run anew finds the step in doubt)"
        )
        raise e.said_as(f"cannot record the result of step {step_id!r} of run {log.run_id!r}", then) from None
    log._unrecorded.pop(position, None)
    return value

def _divergence(log: EventLog, position: int, step: StepIndex, step_id: str, digest: str | None) -> DivergenceError:
    recorded = step.step_id + (f" (request {step.hash})" if step.hash else "")
    requested = step_id + (f" (request {digest})" if digest else "")
    why = "a different step" if step.step_id != step_id else "the same step with a different request"
    return DivergenceError(run_id=log.run_id, position=position, recorded=recorded, requested=requested, why=why)
