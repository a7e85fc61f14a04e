"""A child run unfolds inside its parent's timeline: its own rows, live, and its own buttons.

The offline demo with ``--delegate`` splits its fix between two children; with bash commands
that run ``unittest`` needing approval, the child that writes the regression test asks a
person before it runs it. In the background the question reaches the parent's cell, and its
Approve button sits in the child's own timeline, folded under the row of the parent's step
that started the child; a click there (the comm message a browser sends) is recorded in the
child's log. The static forms (the frozen cell, ``%agent_show``) nest the child's rows inside
that row, escaped.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from functools import partial
from typing import Any

from nb_durable import read_run
from nb_durable.agent.fleet.background_runs import background_run
from nb_durable.agent.fleet.decisions import who
from nb_durable.agent.models.demo import DEMO_TASK
from nb_durable.jupyter import background
from nb_durable.jupyter.child_rows import ChildRow
from tests.jupyter.test_magics import run
from tests.waiting import wait_until

CLICK = {"content": {"data": {"method": "custom", "content": {"event": "click"}}}, "buffers": []}


def tree_of(widget: Any) -> Iterator[Any]:
    """A widget and every widget inside it."""
    yield widget
    for child in getattr(widget, "children", ()):
        yield from tree_of(child)


def rows_in(widget: Any) -> str:
    return "".join(str(getattr(w, "value", "")) for w in tree_of(widget) if type(w).__name__ == "HTML")


def buttons_for(timeline: Any, pending: Any) -> list[Any]:
    """The answer buttons shown for ``pending`` in ``timeline`` (Approve first), if shown there."""
    box = timeline._questions.get(pending.step_id)
    return list(box.buttons) if box is not None and box.pending is pending else []


def approve_buttons(widget: Any) -> list[Any]:
    return [w for w in tree_of(widget) if "nbd-approve" in getattr(w, "_dom_classes", ())]


def test_a_child_unfolds_in_its_parent_timeline_live_and_its_approve_button_settles_its_step(ip: Any) -> None:
    ip.run_line_magic("config", 'AgentMagics.approve_bash = "unittest"')
    answered: dict[str, ChildRow] = {}
    clicked: list[Any] = []
    try:
        started, _ = run(ip, f"%%agent --run tree --delegate --background\n{DEMO_TASK}")
        assert started.success, started.error_in_exec
        handle = background_run("tree")
        timeline = background._TIMELINES["tree"]
        while not handle.done:  # a child and then the parent run the unittest command, and ask first
            for pending in handle.pending:
                if any(pending is p for p in clicked):
                    continue
                if pending.run_id == "tree":  # the parent runs the test too, once its children reported
                    own = wait_until(partial(buttons_for, timeline, pending), "the parent's buttons")
                    assert not any(own[0] in approve_buttons(c.fold) for c in answered.values())
                    own[0]._handle_msg(CLICK)
                    clicked.append(pending)
                    continue
                assert pending.run_id.startswith("tree.delegate-"), "the question names the child asking, not the parent"
                child = next(c for c in timeline._children.values() if c.timeline.run.run_id == pending.run_id)
                # The child's timeline is inside the parent's widget, under the row of the step that started it.
                assert any(w is child.fold for w in tree_of(timeline.widget))
                assert child.step_id.startswith("delegate:")
                assert child.holder.children[0].value.count(f'data-step="{child.step_id}"') == 1
                # Live: the child's own rows and state overlay; its question unfolds it, its button is its own.
                approve = wait_until(partial(buttons_for, child.timeline, pending), "the child's Approve button")
                shown = rows_in(child.fold)
                assert "nbd-waiting" in shown and 'data-kind="model"' in shown and "run_bash" in shown
                assert [b.description for b in approve] == ["Approve", "Deny"] and not approve[0].disabled
                assert all(any(b is w for w in tree_of(child.fold)) for b in approve), "its buttons are in its own timeline"
                assert child.fold.selected_index == 0, "a child asking a person unfolds"
                assert child.fold.get_title(0) == f"child run {pending.run_id} · waiting · {child.timeline.run.steps} steps"
                approve[0]._handle_msg(CLICK)
                answered[pending.run_id] = child
                clicked.append(pending)
            time.sleep(0.02)
        waited, _ = run(ip, "%agent_wait tree")
        assert waited.success, waited.error_in_exec
    finally:
        ip.run_line_magic("config", 'AgentMagics.approve_bash = ""')
    assert read_run("tree", "runs").summary.status == "completed"
    assert len(answered) == 1, "the child that writes the regression test runs it, and asks first"
    assert len(timeline._children) == 2
    for run_id, child in answered.items():
        decisions = [(d.decision, d.by) for s in read_run(run_id, "runs").steps for d in s.decisions]
        assert decisions and set(decisions) == {("approved", f"{who()} (button)")}, decisions
        assert child.fold.get_title(0) == f"child run {run_id} · completed · {child.timeline.run.steps} steps"
    parent = [(d.decision, d.by) for s in read_run("tree", "runs").steps for d in s.decisions]
    assert parent == [("approved", f"{who()} (button)")], "the parent's one question, its own"
    # The frozen form nests both children's rows inside their start rows.
    page = timeline.static().html
    assert page.count('class="nbd-timeline nbd-child"') == 2
    for child in timeline._children.values():
        assert page.index(f'data-step="{child.step_id}"') < page.index(f">{child.timeline.run.run_id}</span>")


def test_agent_show_nests_each_child_timeline_under_its_start_row_escaped(ip: Any) -> None:
    done, done_out = run(ip, f"%%agent --run shown --delegate\n{DEMO_TASK}")
    assert done.success, done.error_in_exec
    frozen = read_run("shown", "runs")
    shown, _ = run(ip, "%agent_show shown")
    assert shown.success, shown.error_in_exec
    page = shown.result._repr_mimebundle_()["text/html"]
    assert page.count('class="nbd-timeline nbd-child"') == 2
    starts = [s.step_id for s in frozen.steps if s.step_id.startswith("delegate:")]
    for start in starts:
        row = page.index(f'data-step="{start}"')
        nested = page.index('class="nbd-timeline nbd-child"', row)
        assert nested < page.index("</details></div>", row) + 200, "the child's timeline is inside its row"
    # The foreground cell's frozen output nests them the same way.
    assert done_out.outputs[-1].data["text/html"].count('class="nbd-timeline nbd-child"') == 2
    # What a child's rows show is escaped as the parent's are (the HTML widget renders raw HTML).
    child = page[page.index('class="nbd-timeline nbd-child"') :]
    assert "&quot;command&quot;: &quot;" in child and '"command": "' not in child


def test_a_child_s_own_stop_button_stops_that_child_alone(ip: Any) -> None:
    ip.run_line_magic("config", 'AgentMagics.approve_bash = "unittest"')
    try:
        started, _ = run(ip, f"%%agent --run alone --delegate --background\n{DEMO_TASK}")
        assert started.success, started.error_in_exec
        handle = background_run("alone")
        timeline = background._TIMELINES["alone"]
        pending = wait_until(lambda: [p for p in handle.pending if p.run_id != "alone"], "a child's question")[0]
        child = next(c for c in timeline._children.values() if c.timeline.run.run_id == pending.run_id)
        stop = child.timeline.bar.stop
        assert not stop.disabled and any(stop is w for w in tree_of(child.fold))
        stop._handle_msg(CLICK)
        assert "stopping this child" in child.timeline.bar.note.value
        approve = wait_until(partial(buttons_for, child.timeline, pending), "the child's Approve button")
        approve[0]._handle_msg(CLICK)  # the child goes on to its next step boundary, and stops there
        while not handle.done:
            for asked in handle.pending:
                asked.deny(note="not in this test")
            time.sleep(0.02)
        run(ip, "%agent_wait alone")
    finally:
        ip.run_line_magic("config", 'AgentMagics.approve_bash = ""')
    stopped = read_run(pending.run_id, "runs").summary
    # The stop reached the child inside the command it had just been allowed to run: Stop cuts a
    # running command off, so that step is in doubt, as any stopped run's would be.
    assert (stopped.status, stopped.error) == ("in_doubt", f"stopped alone by {who()} with its Stop button")
    parent = read_run("alone", "runs")
    assert parent.summary.status == "completed", "the parent goes on, told the child did not complete"
    told = [s.result for s in parent.steps if s.step_id.startswith("tool:0:") and isinstance(s.result, dict)]
    assert any(r.get("is_error") and "did not complete: it ended interrupted (stopped alone by" in str(r.get("content")) for r in told), told
    assert sum(not r.get("is_error") for r in told) == 1, "the other child reported as usual"


def test_a_child_s_stop_button_ends_the_question_it_waits_on(ip: Any) -> None:
    """A child waiting for a person's answer waited on its parent's stop alone: its own Stop
    button did nothing until someone answered the question it was told to drop."""
    ip.run_line_magic("config", 'AgentMagics.approve_bash = "unittest"')
    try:
        started, _ = run(ip, f"%%agent --run dropped --delegate --background\n{DEMO_TASK}")
        assert started.success, started.error_in_exec
        handle = background_run("dropped")
        timeline = background._TIMELINES["dropped"]
        pending = wait_until(lambda: [p for p in handle.pending if p.run_id != "dropped"], "a child's question")[0]
        child = next(c for c in timeline._children.values() if c.timeline.run.run_id == pending.run_id)
        child.timeline.bar.stop._handle_msg(CLICK)
        wait_until(lambda: not any(p is pending for p in handle.pending), "the child's question dropped by its Stop")
        assert not pending.decided, "nobody answered it: the Stop ended the wait"
        while not handle.done:  # the parent goes on, and asks before its own unittest command
            for asked in handle.pending:
                asked.deny(note="not in this test")
            time.sleep(0.02)
        run(ip, "%agent_wait dropped")
    finally:
        ip.run_line_magic("config", 'AgentMagics.approve_bash = ""')
    stopped = read_run(pending.run_id, "runs")
    assert (stopped.summary.status, stopped.summary.error) == ("interrupted", f"stopped alone by {who()} with its Stop button")
    assert pending.step_id not in [s.step_id for s in stopped.steps], "the command it asked about never ran"
    parent = read_run("dropped", "runs")
    assert parent.summary.status == "completed", "the parent goes on, told the child did not complete"
    told = [s.result for s in parent.steps if s.step_id.startswith("tool:0:") and isinstance(s.result, dict)]
    assert any(r.get("is_error") and "did not complete: it ended interrupted (stopped alone by" in str(r.get("content")) for r in told), told
