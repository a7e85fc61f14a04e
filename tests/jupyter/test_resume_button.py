"""Resume clicked as soon as it turns on: the stopped session may still be drawing its end.

A stopped background run records its end and lets its lease go, then its thread draws its last
state, which turns Resume on, and only then is it done. A click in that moment (a person quick
on the button, or a loaded kernel) must resume the run, not be refused as if the run went on.
In-process, with the clicks the browser would send; the session's end is held open by a callback
of its own, released a moment after the click.
"""

from __future__ import annotations

import threading
from typing import Any

from nb_durable import read_run
from nb_durable.agent.fleet.background_runs import background_run, background_runs
from nb_durable.agent.models.demo import DEMO_TASK
from nb_durable.jupyter import background
from tests.jupyter.test_child_timeline import CLICK
from tests.jupyter.test_magics import run
from tests.waiting import wait_until


def test_resume_clicked_while_the_stopped_session_draws_its_end_resumes_the_run(ip: Any) -> None:
    ip.run_line_magic("config", 'AgentMagics.approve_bash = "unittest"')  # the run waits on a question
    release = threading.Event()
    try:
        started, _ = run(ip, f"%%agent --run quick --background\n{DEMO_TASK}")
        assert started.success, started.error_in_exec
        stopped = background_run("quick")
        timeline = background._TIMELINES["quick"]
        wait_until(lambda: stopped.pending, "the run's question")

        def held_open(_: Any) -> None:
            release.wait(30)

        stopped.when_done(held_open)  # after the timeline's own callback: Resume is on by then
        timeline.bar.stop._handle_msg(CLICK)
        wait_until(lambda: not timeline.bar.resume.disabled, "Resume turning on")
        assert stopped.ending and not stopped.done
        threading.Timer(0.3, release.set).start()
        timeline.bar.resume._handle_msg(CLICK)
        assert "nothing to resume" not in timeline.bar.note.value, timeline.bar.note.value
        resumed = wait_until(
            lambda: [h for h in background_runs() if h.run_id == "quick" and h is not stopped], "the resumed session"
        )[0]
        asked = wait_until(lambda: resumed.pending, "the resumed session's question")[0]
        asked.deny(note="not in this test")
        while not resumed.done:
            for pending in resumed.pending:
                pending.deny(note="not in this test")
            resumed.join(0.05)
    finally:
        release.set()
        ip.run_line_magic("config", 'AgentMagics.approve_bash = ""')
    decisions = [(d.decision, d.note) for s in read_run("quick", "runs").steps for d in s.decisions]
    assert ("denied", "not in this test") in decisions, "the resumed session asked, and was answered"
