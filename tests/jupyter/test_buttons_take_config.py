"""The timeline's Resume and Fork buttons take ``%config AgentMagics`` as ``%agent_resume`` does.

They resumed with the store, ``--in-doubt ask`` and ``--background`` alone, so a person who set
``%config AgentMagics.max_turns = 1``, ``in_doubt`` or ``max_usd`` and clicked got another run
than the magic gives, and was told nothing. Now a click takes what ``%agent_resume RUN
--background`` takes (on the run's own store; a step in doubt asked by button unless
``in_doubt`` is configured) and says on its bar what the run keeps over ``%config``. In-process,
with the clicks the browser would send.
"""

from __future__ import annotations

import contextlib
import html
import re
from collections.abc import Iterator
from typing import Any

import pytest

from nb_durable import read_run
from nb_durable.agent.fleet.background_runs import BackgroundRun, started_background_runs
from nb_durable.agent.models.demo import DEMO_TASK
from nb_durable.jupyter import background
from tests.jupyter.test_child_timeline import CLICK
from tests.jupyter.test_magics import run
from tests.waiting import wait_until

KEPT = "run {run} goes on with its recorded settings, not %config's: max_usd unset, not 5.0 (--max-usd changes it)"
TURNS = "reached the limit of 1 turns"


@contextlib.contextmanager
def configured(ip: Any, **values: str) -> Iterator[None]:
    """``%config AgentMagics.<name> = <value>`` for each, unset again after (not merely set back:
    a setting once configured counts as the person's choice)."""
    try:
        for name, value in values.items():
            ip.run_line_magic("config", f"AgentMagics.{name} = {value}")
        yield
    finally:
        for name in values:
            ip.config.AgentMagics.pop(name, None)


def crashed(ip: Any, run_id: str) -> Any:
    """A background run of the demo cut off in run_bash (step 7, in doubt); its timeline."""
    assert run(ip, f"%%agent --run {run_id} --background --crash-at 7 -o h\n{DEMO_TASK}")[0].success
    ip.user_ns["h"].join(60)
    assert read_run(run_id, "runs").summary.status == "in_doubt"
    return background._TIMELINES[run_id]


def note_of(timeline: Any) -> str:
    """What the timeline's bar says, as the person reads it."""
    return html.unescape(re.sub(r"<[^>]+>", "", timeline.bar.note.value))


def session_after(run_id: str, before: list[BackgroundRun]) -> BackgroundRun:
    """The session of ``run_id`` started since ``before``, once it has ended or asks a question."""
    [session] = wait_until(
        lambda: [h for h in started_background_runs() if h.run_id == run_id and h not in before], "the new session"
    )
    wait_until(lambda: session.done or session.pending, "the session to end or ask", seen=lambda: session.status)
    return session


@pytest.mark.parametrize("how", ["button", "magic"])
def test_the_resume_button_resumes_as_agent_resume_does_with_config(ip: Any, how: str) -> None:
    timeline = crashed(ip, "s")
    before = started_background_runs()
    with configured(ip, in_doubt='"rerun"', max_turns="1", max_usd="5"):
        if how == "button":
            timeline.bar.resume._handle_msg(CLICK)
            said = note_of(timeline)
        else:
            said = run(ip, "%agent_resume s --background")[1].stdout
        session = session_after("s", before)
    asked = list(session.pending)
    for pending in asked:  # settled, so that no session of "s" is left waiting in this process
        pending.skip(note="not in this test")
    session.join(60)
    assert not asked, f"asked about step 7 though %config says rerun: {asked}"
    assert (session.status, TURNS in session.wait(0).detail) == ("interrupted", True), session.wait(0)
    decisions = [(s.step_id, d.decision, d.by) for s in read_run("s", "runs").steps for d in s.decisions]
    assert [d[1:] for d in decisions] == [("rerun", "policy")], decisions
    assert KEPT.format(run="s") in said, said
    if how == "button":
        assert KEPT.format(run="s") in note_of(timeline), "the session's end leaves what it said"


def test_the_fork_button_resumes_the_fork_as_agent_resume_would_on_the_run_s_own_store(ip: Any) -> None:
    assert run(ip, f"%%agent --run f --background -o h\n{DEMO_TASK}")[0].success
    assert ip.user_ns["h"].wait(60).status == "completed"
    timeline = background._TIMELINES["f"]
    before = started_background_runs()
    with configured(ip, max_turns="1", max_usd="5", store='"elsewhere"'):
        timeline.bar.fork_at.value = 3
        timeline.bar.fork._handle_msg(CLICK)
        session = session_after("f-fork3", before)
    assert (session.status, TURNS in session.wait(0).detail) == ("interrupted", True), session.wait(0)
    [fork] = timeline._forks
    assert note_of(fork) == KEPT.format(run="f-fork3"), note_of(fork)
    assert note_of(timeline) == "forked the first 3 steps into f-fork3, below", note_of(timeline)


def test_without_the_magics_loaded_the_resume_button_asks_about_a_step_in_doubt(ip: Any) -> None:
    timeline = crashed(ip, "n")
    before = started_background_runs()
    with configured(ip, in_doubt='"rerun"', max_turns="1"):
        ip.run_line_magic("unload_ext", "nb_durable")  # what %config set is no magics' any more
        try:
            timeline.bar.resume._handle_msg(CLICK)
            session = session_after("n", before)
            [pending] = session.pending
            assert pending.kind == "in_doubt", pending
            pending.skip(note="not in this test")
            assert session.wait(60).status == "completed"
        finally:
            ip.run_line_magic("load_ext", "nb_durable")
    assert note_of(timeline) == "", "nothing kept over a %config no magics hold"
