"""The run tree's part of the store contract: a fork keeps the first steps and goes live after,
a child starts with its parent's step, and a fork takes its own copy of each child.

Each check is a plain function of one fresh, empty store, as in ``store_contract`` (which lists
these in ``STORE_CONTRACT``). A child run is started by a step of its parent
(``core.whole_runs.children``): the step's record and the child's start are written together,
and a replay hands back the child the step recorded without touching it. A fork of the parent
(``core.whole_runs.fork``) shares no child with its source: each one its kept steps started is
forked with it, whole, and the fork's replay of the start names the fork's copy.
"""

from __future__ import annotations

from functools import partial

from ..core.log import EventLog, run_step
from ..core.runs import read_run
from ..core.stores import StoreSpec, opened
from ..core.whole_runs.children import child_id, descendants, start_child
from ..core.whole_runs.fork import fork
from ..errors import InvalidRunIdError

__all__ = ["TREE_CONTRACT"]


def fork_keeps_the_first_steps_and_goes_live_after(spec: StoreSpec) -> None:
    """A fork replays the steps it kept and runs the rest; its source is unchanged."""
    with EventLog("source", spec) as log:
        for name in "abc":
            run_step(log, name, partial(str.__mul__, name, 2))
        log.finish_run("completed")
    calls: list[str] = []
    with fork("source", "branch", at=2, root=spec) as log:
        assert run_step(log, "a", lambda: calls.append("a")) == "aa"
        assert run_step(log, "b", lambda: calls.append("b")) == "bb"
        assert run_step(log, "c", lambda: "new") == "new"
    assert calls == []
    branch = read_run("branch", spec)
    assert getattr(branch.events[0], "forked_from", None) == {"run_id": "source", "at": 2, "lines": 3}
    assert [s.result for s in branch.steps] == ["aa", "bb", "new"]
    assert [s.result for s in read_run("source", spec).steps] == ["aa", "bb", "cc"]


def _parent_with_a_child(spec: StoreSpec, *, finished: bool) -> str:
    """Run ``p``: step ``plan``, then step ``spawn`` starting child ``p.spawn``, which records
    one step and (if ``finished``) its end."""
    with EventLog("p", spec) as log:
        run_step(log, "plan", lambda: "plan")
        child = child_id("p", "spawn")
        assert start_child(log, "spawn", child, {"task": "count"}) == {"child": child}
    with EventLog(child, spec) as log:
        assert log.parent == {"run_id": "p", "step": "spawn"}
        run_step(log, "count", lambda: 3)
        if finished:
            log.finish_run("completed", output=3)
    return child


def a_child_starts_with_its_parent_s_step_and_replays_untouched(spec: StoreSpec) -> None:
    """The step's record names the child, whose log names the step; a replay touches no child."""
    child = _parent_with_a_child(spec, finished=True)
    with EventLog("p", spec) as log:
        run_step(log, "plan", lambda: "again")
        assert start_child(log, "spawn", child, {"task": "other"}) == {"child": child}
    with opened(spec) as store:
        assert descendants(store, "p") == [child]
    assert [s.result for s in read_run(child, spec).steps] == [3] and read_run(child, spec).summary.status == "completed"


def a_fork_takes_its_own_copy_of_each_child_its_kept_steps_started(spec: StoreSpec) -> None:
    """The fork's child is a whole copy under the fork's id; the source's is left as it was."""
    child = _parent_with_a_child(spec, finished=False)
    before = read_run(child, spec)
    with EventLog(child_id("taken", "spawn"), spec) as log:  # where a fork "taken" would copy the child
        run_step(log, "x", lambda: 1)
    try:
        fork("p", "taken", at=2, root=spec).close()
    except InvalidRunIdError as e:
        assert repr(child_id("taken", "spawn")) in str(e), e
    else:
        raise AssertionError("a fork whose child's copy could not be made was made")
    with opened(spec) as store:
        assert "taken" not in store.run_ids(), "a fork cut short leaves no run"
    with fork("p", "f", at=2, root=spec) as log:
        run_step(log, "plan", lambda: "again")
        mine = start_child(log, "spawn", child_id("f", "spawn"), {})["child"]
    assert mine == child_id("f", "spawn") != child
    with EventLog(mine, spec) as log:
        assert log.parent == {"run_id": "f", "step": "spawn"}
        assert run_step(log, "count", lambda: 4) == 3, "the copied step replays"
        run_step(log, "report", lambda: "mine")
    with opened(spec) as store:
        assert descendants(store, "f") == [mine] and descendants(store, "p") == [child]
    after = read_run(child, spec)
    assert (after.summary.steps, [s.result for s in after.steps]) == (before.summary.steps, [3]), "the source's child is untouched"
    with fork("f", "g", at=1, root=spec):  # kept only the plan: no child to copy
        pass
    with opened(spec) as store:
        assert descendants(store, "g") == []


def a_fork_of_a_fork_replays_its_own_copy_of_each_child(spec: StoreSpec) -> None:
    """A fork's copied start names the first source's child; a fork of the fork took its map
    by the id it copied from, so its replay went on with the first source's child, and a third
    fork found no child at all."""
    child = _parent_with_a_child(spec, finished=False)
    with EventLog(child, spec) as log:
        run_step(log, "count", lambda: 3)
        start_child(log, "sub", child_id(child, "sub"), {})
    for source, mine in (("p", "f"), ("f", "g"), ("g", "h")):
        fork(source, mine, at=2, root=spec).close()
        with EventLog(mine, spec) as log:
            run_step(log, "plan", lambda: "again")
            assert start_child(log, "spawn", child_id(mine, "spawn"), {}) == {"child": child_id(mine, "spawn")}, mine
        with EventLog(child_id(mine, "spawn"), spec) as log:
            run_step(log, "count", lambda: 4)
            sub = child_id(child_id(mine, "spawn"), "sub")
            assert start_child(log, "sub", sub, {}) == {"child": sub}, mine
        with opened(spec) as store:
            assert descendants(store, mine) == [child_id(mine, "spawn"), sub], mine


def a_fork_s_copy_of_a_child_that_ended_has_its_ending(spec: StoreSpec) -> None:
    """The copy stopped at the child's last step, its ending left out: a child that had ended
    read as one whose writer died, so a worker took it, and the fork's resume ran it again
    where its ending should have come back."""
    child = _parent_with_a_child(spec, finished=True)
    fork("p", "f", at=2, root=spec).close()
    source, mine = read_run(child, spec).summary, read_run(child_id("f", "spawn"), spec).summary
    assert (mine.status, mine.output, mine.steps) == (source.status, source.output, source.steps) == ("completed", 3, 1)


TREE_CONTRACT = (
    fork_keeps_the_first_steps_and_goes_live_after,
    a_child_starts_with_its_parent_s_step_and_replays_untouched,
    a_fork_takes_its_own_copy_of_each_child_its_kept_steps_started,
    a_fork_of_a_fork_replays_its_own_copy_of_each_child,
    a_fork_s_copy_of_a_child_that_ended_has_its_ending,
)
