"""The fork box under a run's header follows the run's last step, and keeps a step typed into it
(a run that records more, or ends, must not overwrite the step a person chose to fork from)."""

from __future__ import annotations

import ipywidgets as widgets

from nb_durable.core.status import Status
from nb_durable.jupyter.controls import RunBar


def test_the_fork_box_follows_the_last_step_until_a_step_is_typed_into_it() -> None:
    bar = RunBar(widgets)
    status = Status.RUNNING
    box = bar.fork_at
    for recorded in (2, 3):
        bar.update(status, recorded, going=False, foreground=False, stopping=False)
        assert (box.value, box.max) == (recorded, recorded), "it follows the last step"
    box.value = 1  # typed, as the front end sends it
    bar.update(status, 4, going=False, foreground=False, stopping=False)
    bar.update(Status.COMPLETED, 5, going=False, foreground=False, stopping=False)
    assert (box.value, box.max) == (1, 5), "the typed step stays; the box reaches the new last step"
    box.value = 5  # back at the last step: it follows again
    bar.update(status, 6, going=False, foreground=False, stopping=False)
    assert (box.value, box.max) == (6, 6)
