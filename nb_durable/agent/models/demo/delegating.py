"""The demo agent with the delegate tool: it splits the fix between two sub-agents.

When a request offers ``delegate`` (a run with ``--delegate``), the demo task is worked by a
tree: the parent hands "find and fix the bug" and "write a regression test" to two child runs
in one turn (they run at the same time), then runs the regression test itself and reports
what each child said. The finding child works the ordinary demo scenario; the test-writing
child reads ``calc.py`` and writes ``regression/test_median_order.py`` (a folder of its own,
so the project's test run, and what the finding child sees, are the same whenever it lands).
Like the rest of the demo, every branch follows what the tools really returned.
"""

from __future__ import annotations

from collections.abc import Callable, Generator

from .reading import Outcome, inline_code, parse_test_run
from .scenario import Context, Turn, scenario

__all__ = ["FIND_TASK", "TEST_TASK", "pick_scenario"]

FIND_TASK = (
    "The tests in this project fail. Find out why, fix the code (not the tests), and show that the "
    "tests pass. Report what was wrong in two sentences."
)
TEST_TASK = (
    "Write a regression test for median() in calc.py: a unittest module at regression/test_median_order.py "
    "that fails while median() ignores the order of its input. Do not change any other file."
)
TEST_PATH = "regression/test_median_order.py"
TEST_FILE = '''"""A regression test for median(): it must sort its input, whatever order it arrives in."""

import unittest

from calc import median


class MedianOrderTest(unittest.TestCase):
    def test_unsorted_odd(self) -> None:
        self.assertEqual(median([3, 1, 2]), 2)

    def test_unsorted_even(self) -> None:
        self.assertEqual(median([4, 1, 3, 2]), 2.5)


if __name__ == "__main__":
    unittest.main()
'''

Scenario = Callable[[Context], Generator[Turn, list[Outcome], str]]


def pick_scenario(ctx: Context) -> Scenario:
    """The scenario a request's task and tools call for."""
    if ctx.task == TEST_TASK:
        return _test_writer
    if ctx.task != FIND_TASK and ctx.tools is not None and "delegate" in ctx.tools:
        return _delegating
    return scenario


def _delegating(ctx: Context) -> Generator[Turn, list[Outcome], str]:
    found, tested = yield Turn(
        "This splits in two, so I'll hand each half to a sub-agent of its own: one finds and fixes the bug, "
        "the other writes a regression test for it. They work at the same time, each a durable run.",
        (("delegate", {"task": FIND_TASK}), ("delegate", {"task": TEST_TASK})),
    )
    if found.is_error or tested.is_error:
        failed = [o.text for o in (found, tested) if o.is_error]
        return "A sub-agent did not finish, so I stopped here: " + " ".join(failed)
    command = f"{ctx.python} -m unittest -v {TEST_PATH}"
    [result] = yield Turn(
        "Both sub-agents reported back. Let me run the new regression test myself to check their work.",
        (("run_bash", {"command": command, "timeout": 60}),),
    )
    run = parse_test_run(result)
    verdict = (
        f"The regression test passes ({run.ran} ran: {run.summary})."
        if run.status == "passed"
        else f"The regression test does not pass ({run.summary or run.excerpt}); look at the fix again."
    )
    return (
        f"Done, with two sub-agents. {verdict}\n\n"
        f"**The sub-agent that found and fixed the bug said:** {found.text}\n\n"
        f"**The sub-agent that wrote the test said:** {tested.text}"
    )


def _test_writer(ctx: Context) -> Generator[Turn, list[Outcome], str]:
    [read] = yield Turn("Let me read `calc.py` to see what `median()` promises.", (("read_file", {"path": "calc.py"}),))
    if read.is_error:
        return f"I couldn't read `calc.py` ({read.text.strip()[:120]}), so I wrote no test."
    [written] = yield Turn(
        "`median()` must give the middle value whatever order the values come in. I'll write a test of "
        f"unsorted input, odd and even counts, in {inline_code(TEST_PATH)}.",
        (("write_file", {"path": TEST_PATH, "content": TEST_FILE}),),
    )
    if written.is_error:
        return f"Writing {inline_code(TEST_PATH)} failed ({written.text.strip()[:120]})."
    return (
        f"Wrote {inline_code(TEST_PATH)}: two tests of `median()` on unsorted input (odd and even counts). "
        "They fail while `median()` does not sort its values."
    )
