"""How a batch-mode model step reads in ``show``, ``%agent_show`` and the runs' timelines: one
whose request sits in a Message Batch says it waits on that batch, not just "in flight" (a batch
may take hours); once answered it says it was priced at batch prices."""

from __future__ import annotations

from nb_durable.agent.display.step_views import view_of
from nb_durable.agent.run.batch_step import BATCH_BY, GATHERING, IN_BATCH, asked_directly
from nb_durable.core.events import Decision
from nb_durable.core.steps import StepRecord, StepState

CUSTOM = "nbd-0123456789abcdef"


def _decision(seq: int, decision: str) -> Decision:
    return Decision(seq=seq, ts=1.0 + seq, step="model:0", decision=decision, by=BATCH_BY, note=CUSTOM)


def _model_step(*decisions: str, result: object = None) -> StepRecord:
    state: StepState = "completed" if result is not None else "in_doubt"
    made = tuple(_decision(i + 4, d) for i, d in enumerate(decisions))
    return StepRecord(3, "model:0", state, "idempotent", "h", result, 1.0, None, None, (), made)


def test_a_step_whose_request_is_in_a_batch_says_it_waits_on_that_batch() -> None:
    view = view_of(_model_step(GATHERING, IN_BATCH + "msgbatch_1"), state="in_flight")
    assert view.title == "model turn 0 (waiting on Message Batch msgbatch_1, half price)"


def test_a_step_still_gathering_says_no_batch_and_one_fallen_back_says_why_it_costs_the_full_price() -> None:
    # Gathering: no batch holds its request yet; fallen back: a normal call at full price is in
    # flight (then recorded), and the batch's decisions are said by the title, not as a person's.
    assert view_of(_model_step(GATHERING), state="in_flight").title == "model turn 0"
    for what, said in [
        ("expired", "request expired"), ("canceled", "request canceled"),
        ("missing", "request missing from its batch"), ("unreadable", "could not be read"),
    ]:  # fmt: skip
        view = view_of(_model_step(GATHERING, IN_BATCH + "msgbatch_1", asked_directly(what)), state="in_flight")
        assert view.title == f"model turn 0 (Message Batch {said}; sent as a normal call, full price)"
        assert view.decision == ""


def test_an_answered_step_says_its_batch_prices_and_no_longer_waits() -> None:
    message = {"role": "assistant", "model": "claude-test-1", "content": [{"type": "text", "text": "Done."}],
               "stop_reason": "end_turn", "usage": {"input_tokens": 10, "output_tokens": 2}}  # fmt: skip
    done = _model_step(GATHERING, IN_BATCH + "msgbatch_1", result={"message": message, "batch": {"id": "msgbatch_1", "custom_id": CUSTOM}})
    view = view_of(done)
    assert (view.title, view.batch) == ("model turn 0 (Message Batch, half price)", "msgbatch_1")
