"""Resume clicked as soon as it can be: the stopped session may still be on its way out.

A stopped background run records its end and lets its lease go, then the stop travels up its
thread, then the thread draws its last state, which turns Resume on, and only then is it done.
A click in either moment (a person quick on the button, a loaded kernel, or a second view of
the run that reads it stopped) must resume the run, not be refused as if the run went on.
In-process, with the clicks the browser would send; each moment is held open (by a callback
of the session's own, or by its log's close) and released a moment after the click.
"""

from __future__ import annotations

import sys
import threading
import time
import traceback
from typing import Any

import pytest

from nb_durable import read_run
from nb_durable.agent.fleet.background_runs import (
    BackgroundRun,
    background_run,
    background_runs,
    started_background_runs,
)
from nb_durable.agent.models.demo import DEMO_TASK
from nb_durable.core.log import EventLog
from nb_durable.core.runs import read_summary
from nb_durable.jupyter import background
from tests.jupyter.test_child_timeline import CLICK
from tests.jupyter.test_magics import run
from tests.waiting import wait_until


def asking_run(ip: Any) -> tuple[BackgroundRun, Any]:
    """Run ``quick`` in the background until it waits on its question; its handle and timeline."""
    started, _ = run(ip, f"%%agent --run quick --background\n{DEMO_TASK}")
    assert started.success, started.error_in_exec
    stopped = background_run("quick")
    wait_until(lambda: stopped.pending, "the run's question")
    return stopped, background._TIMELINES["quick"]


def resume_and_answer(timeline: Any, stopped: BackgroundRun, release: threading.Event) -> None:
    """Click Resume with ``stopped``'s way out held open (released a moment later), check the
    click was taken, then deny the resumed session's questions until it ends."""
    threading.Timer(0.3, release.set).start()
    timeline.bar.resume._handle_msg(CLICK)
    assert "nothing to resume" not in timeline.bar.note.value, timeline.bar.note.value
    resumed = wait_until(
        lambda: [h for h in background_runs() if h.run_id == "quick" and h is not stopped], "the resumed session"
    )[0]
    wait_until(lambda: resumed.pending, "the resumed session's question")
    while not resumed.done:
        for pending in resumed.pending:
            pending.deny(note="not in this test")
        resumed.join(0.05)


def stop_seen(stopped: BackgroundRun, timeline: Any) -> str:
    """Where a Stop click stands: what the handle, the timeline's bar and the run's summary say,
    and where the run's thread waits (a stop the run does not hear, or a thread held elsewhere)."""
    actions = timeline.bar.actions
    summary = read_summary("quick", "runs")
    waiting = []  # the run thread's own wait_for, if it is in one: which signal it checks, and is it set
    frame = sys._current_frames().get(stopped.thread.ident) if stopped.thread is not None and stopped.thread.ident else None
    if frame is not None:
        waiting.append(f"innermost {frame.f_code.co_name} {frame.f_code.co_filename.rpartition('/')[2]}:{frame.f_lineno}")
    while frame is not None:
        if frame.f_code.co_name == "wait_for" and "self" in frame.f_locals:
            signal = frame.f_locals["self"]
            waiting.append(f"wait_for on {type(signal).__name__} set: {signal.requested}, the handle's: {signal is stopped.stop_signal}")
        if frame.f_code.co_name == "wait" and "waiter" in frame.f_locals:  # Condition.wait: one wait, or a new one each poll?
            waiting.append(f"Condition.wait {id(frame)} line {frame.f_lineno} timeout {frame.f_locals.get('timeout')!r}")
        frame = frame.f_back
    if waiting:
        time.sleep(0.5)
        again = sys._current_frames().get(stopped.thread.ident) if stopped.thread is not None and stopped.thread.ident else None
        waiting.append(f"0.5 s later its innermost frame {id(again) if again else None} line {again.f_lineno if again else None}")
        if again is not None:  # where a thread that left wait_for waits now, on its way out
            waiting.append("".join(traceback.format_stack(again)[-12:]))
    return (
        f"thread {waiting}; "
        f"handle {stopped!r} stop asked: {stopped.stop_signal.requested} ({stopped.stop_signal.reason!r}), "
        f"pending {len(stopped.pending)}; bar note {timeline.bar.note.value!r}, its handle is this one: "
        f"{getattr(actions, 'handle', None) is stopped}, the timeline is the run's: {background._TIMELINES.get('quick') is timeline}; "
        f"handles started here: {started_background_runs()}; summary {summary.status}, holder {summary.holder}"
    )


def asked_and_answered() -> None:
    decisions = [(d.decision, d.note) for s in read_run("quick", "runs").steps for d in s.decisions]
    assert ("denied", "not in this test") in decisions, "the resumed session asked, and was answered"


def test_resume_clicked_while_the_stopped_session_draws_its_end_resumes_the_run(ip: Any) -> None:
    ip.run_line_magic("config", 'AgentMagics.approve_bash = "unittest"')  # the run waits on a question
    release = threading.Event()
    try:
        stopped, timeline = asking_run(ip)

        def held_open(_: Any) -> None:
            release.wait(30)

        stopped.when_done(held_open)  # after the timeline's own callback: Resume is on by then
        timeline.bar.stop._handle_msg(CLICK)
        wait_until(lambda: not timeline.bar.resume.disabled, "Resume turning on")
        assert stopped.ending and not stopped.done
        resume_and_answer(timeline, stopped, release)
    finally:
        release.set()
        ip.run_line_magic("config", 'AgentMagics.approve_bash = ""')
    asked_and_answered()


def test_resume_clicked_after_the_stop_let_the_lease_go_but_before_the_session_ended_resumes_the_run(
    ip: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    ip.run_line_magic("config", 'AgentMagics.approve_bash = "unittest"')  # the run waits on a question
    release = threading.Event()
    close = EventLog.close

    def held_close(log: EventLog) -> None:
        # Only the session's own log, as it lets its lease go: a log of an earlier "quick" that the
        # garbage collector finalizes on this thread (EventLog.__del__ closes it again, at any
        # allocation) once held the thread 30 s at a time wherever it was, even before the Stop.
        letting_go = log.writer._out is not None
        close(log)  # the lease is free and the run's end recorded; the stop has not left the thread
        if letting_go and log.run_id == "quick" and threading.current_thread() is background_run("quick").thread:
            release.wait(30)

    monkeypatch.setattr(EventLog, "close", held_close)
    try:
        stopped, timeline = asking_run(ip)
        timeline.bar.stop._handle_msg(CLICK)
        wait_until(
            lambda: read_summary("quick", "runs").holder is None, "the stopped session letting its lease go",
            seen=lambda: stop_seen(stopped, timeline),
        )  # fmt: skip
        assert stopped.stopping and not stopped.ending
        resume_and_answer(timeline, stopped, release)  # as a click on another view of the run would
    finally:
        release.set()
        ip.run_line_magic("config", 'AgentMagics.approve_bash = ""')
    assert read_summary("quick", "runs").status != "running"
    asked_and_answered()
