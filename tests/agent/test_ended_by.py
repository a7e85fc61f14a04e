"""How every front end shows a session that raised before it could show its end: one status
rule (``ended_status``) and one wording of the error, ``Type: message`` (``ended_by``), the
foreground cell's and the background thread's alike (they said ``message`` and ``Type: message``)."""

from __future__ import annotations

from nb_durable.agent.display.views import ended_by, starting_view
from nb_durable.core.status import Status
from nb_durable.errors import RunLockedError, SimulatedCrash


def test_a_run_that_never_opened_is_shown_not_run_with_its_error_named() -> None:
    shown = ended_by(RunLockedError("run 'busy' is being written by pid 7", run_id="busy", holder=None), starting_view("busy", {}))
    assert shown.status == Status.NOT_RUN
    assert shown.error == "RunLockedError: run 'busy' is being written by pid 7"


def test_a_crash_is_shown_crashed_and_an_end_already_shown_stays() -> None:
    assert ended_by(SimulatedCrash("simulated crash at step 3"), starting_view("r", {})).status == Status.CRASHED
    ended = starting_view("r", {}).but(status=Status.COMPLETED)
    assert ended_by(RuntimeError("late"), ended).status == Status.COMPLETED
