"""The demo agent's scenario: explore, read, run the tests, fix, run them again, report.

The scenario is a generator that yields one ``Turn`` (text and tool calls) per model call and
receives the ``Outcome`` of each call. ``next_turn`` replays it over the turns a conversation
already holds, feeding it the results recorded there, and returns the first turn the
conversation does not hold yet: the durable log's idea in miniature, the conversation being
the log. Every branch follows what the tools really returned, and the scenario keeps no state
of its own, so the same tool results always give the same transcript.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field
from typing import Any

from .offered import plan_for, use_offered_tools
from .reading import (
    Outcome,
    TestRun,
    describe_file,
    failures_in,
    how_many_fail,
    inline_code,
    join_words,
    parse_test_run,
    python_files,
)

__all__ = ["DEMO_TASK", "Context", "Turn", "next_turn", "scenario", "this_python"]

DEMO_TASK = (
    "The tests in this project fail. Find out why, fix the code (not the tests), and show "
    "that the tests pass. Then explain what was wrong and what you changed."
)

_DEMO_TOOLS = ("list_dir", "read_file", "write_file", "run_bash")
_DEMO_FILES = ("calc.py", "test_calc.py")
# The bug the demo project ships with, and its fix; matched per line so CRLF files work too.
_BUG = re.compile(r"^([ \t]*)ordered = list\(values\)", re.M)
_FIXED = re.compile(r"^[ \t]*ordered = sorted\(values\)", re.M)


@dataclass(frozen=True)
class Turn:
    """One assistant turn of the scenario: something to say and tools to call."""

    text: str
    calls: tuple[tuple[str, dict[str, Any]], ...]


@dataclass(frozen=True)
class Context:
    """What the scenario knows of a request: the task, the tools offered, the Python to test with."""

    task: str
    tools: frozenset[str] | None
    python: str
    schemas: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Each offered tool's input schema, by name."""


def scenario(ctx: Context) -> Generator[Turn, list[Outcome], str]:
    """The demo agent: every branch follows what the tools actually returned."""
    plan = plan_for(ctx.schemas, _DEMO_TOOLS)
    if plan is not None:
        # Given tools of its own to search, tag or send with, the run is about them, not the demo project.
        moves = use_offered_tools(ctx.task, plan)
        try:
            move = next(moves)
            while True:
                outcomes = yield Turn(*move)
                move = moves.send(outcomes)
        except StopIteration as stop:
            return str(stop.value)
    if ctx.tools is not None and not set(_DEMO_TOOLS) <= ctx.tools:
        offered = join_words(sorted(ctx.tools)) if ctx.tools else "no tools"
        return (
            "I'm nb_durable's offline demo model. I work the demo task with the built-in tools "
            f"{join_words(_DEMO_TOOLS)}, but this request offers {offered}, so there is nothing I can do. "
            "Run the agent with the built-in tools."
        )
    note = ""
    if "test" not in ctx.task.lower():
        note = (
            "(I'm nb_durable's offline demo model: no API key is set, so whatever the task says, I work "
            "the demo scenario: find out why this project's tests fail and fix them.)\n\n"
        )
    [listing] = yield Turn(
        note + "I'll start by looking at what's in the project.", (("list_dir", {"path": "."}),)
    )
    files = list(_DEMO_FILES)
    if listing.is_error:
        intro = (
            f"Listing the folder failed ({listing.text.strip()[:120]}), so I'll try the files this demo "
            f"project usually has: {join_words([inline_code(f) for f in files])}."
        )
    else:
        found = python_files(listing.text)
        if not set(files) <= set(found):
            seen = join_words([inline_code(f) for f in found[:6]]) if found else "no Python files"
            # Running the tests of a project it does not know would run code nobody vetted.
            return (
                f"This folder doesn't hold the demo project: I see {seen}, not `calc.py` with its tests "
                "in `test_calc.py`. I'm nb_durable's offline demo model: I only work the bundled demo "
                "project, and I won't run the code of a project I don't know. Point the workspace at a "
                "folder made by `prepare_demo_workspace()`, or set ANTHROPIC_API_KEY to work on your own "
                "code with Claude."
            )
        extra = [inline_code(f) for f in found if f not in files]
        also = f" (besides {join_words(extra)})" if extra else ""
        intro = f"The project is small: `calc.py`, with its tests in `test_calc.py`{also}. Let me read both."
    reads = yield Turn(intro, tuple(("read_file", {"path": f}) for f in files))
    code = {f: r.text for f, r in zip(files, reads, strict=True) if not r.is_error}
    unread = [f"{inline_code(f)} ({r.text.strip()[:80]})" for f, r in zip(files, reads, strict=True) if r.is_error]
    if not code:
        return (
            f"I couldn't read any of the project's files: {join_words(unread)}. Without the code I can't fix it."
        )
    said = "; ".join(describe_file(f, t) for f, t in code.items())
    if unread:
        said += f". I couldn't read {join_words(unread)}"
    run, command = yield from _run_tests(
        ctx, f"{said[0].upper()}{said[1:]}. Let me run the tests and see what fails.", ctx.python
    )
    if run.status == "passed":
        already = next((f for f, t in code.items() if _FIXED.search(t)), None)
        why = (
            f" `median()` in {inline_code(already)} already sorts its input (`ordered = sorted(values)`), which is "
            "the fix this project needed: it was applied before this run (by an earlier one, perhaps)."
            if already
            else ""
        )
        return f"The tests already pass ({run.ran} ran, {run.summary}), so there is nothing to fix.{why} I left the files unchanged."
    if run.status != "failed":
        return _not_run(run, command)
    buggy = next((f for f, t in code.items() if _BUG.search(t)), None)
    if buggy is None:
        return (
            f"The tests fail ({run.summary or 'see the output above'}): {failures_in(run)}. I read the code but "
            "found no cause I'm sure of, so I changed nothing rather than guess. The failing assertions above "
            "are the place to start."
        )
    fixed = _BUG.sub(r"\1ordered = sorted(values)", code[buggy], count=1)
    explain = f"{how_many_fail(run)}: {failures_in(run)}.\n\n" + (
        f"The cause is in {inline_code(buggy)}: `median()` copies the values with `list(values)` and takes the "
        "middle element(s) without sorting them, so it returns whatever sits in the middle of the input "
        "order. It only gives the right answer when the values arrive sorted. The fix is to sort them: "
        f"`ordered = sorted(values)`. I'll write the corrected {inline_code(buggy)}."
    )
    [written] = yield Turn(explain, (("write_file", {"path": buggy, "content": fixed}),))
    aside = ""
    if written.is_error:
        [check] = yield Turn(
            f"Writing {inline_code(buggy)} failed ({written.text.strip()[:120]}). Before anything else, let me "
            "check what the file holds now.",
            (("read_file", {"path": buggy}),),
        )
        if check.is_error or not _FIXED.search(check.text):
            state = "I couldn't read it back either" if check.is_error else "it still has the bug"
            return (
                f"I couldn't apply the fix: writing {inline_code(buggy)} failed ({written.text.strip()[:120]}) and "
                f"{state}. The fix is one line in `median()`: replace `ordered = list(values)` with "
                "`ordered = sorted(values)`. Apply it by hand, or run me again once the file is writable."
            )
        aside = " (Writing the file reported an error, but reading it back showed the fix in place.)"
    again, command = yield from _run_tests(ctx, "Now let me run the tests again.", command)
    if again.status == "passed":
        return (
            f"Done. The tests pass now ({again.ran} ran: {again.summary}).{aside}\n\n"
            f"**What was wrong:** `median()` in {inline_code(buggy)} took the middle element(s) of the values in "
            "the order they were given, without sorting them first, so it only worked for input that was "
            f"already sorted. {how_many_fail(run, before=True)}: {failures_in(run)}.\n\n"
            f"**What changed:** one line of {inline_code(buggy)}, inside `median()`:\n\n"
            "```diff\n-    ordered = list(values)\n+    ordered = sorted(values)\n```\n\n"
            "Nothing else was touched; the tests are as they were."
        )
    if again.status == "failed":
        return (
            f"I fixed `median()` in {inline_code(buggy)} (`ordered = list(values)` became `ordered = sorted(values)`), "
            f"but the tests still fail ({again.summary}): {failures_in(again)}. The sort was needed, but something "
            "else is wrong as well; I stopped here rather than guess."
        )
    return (
        f"I fixed `median()` in {inline_code(buggy)} (it now sorts the values), but could not confirm it: "
        + _not_run(again, command)
    )


def _run_tests(
    ctx: Context, text: str, command: str
) -> Generator[Turn, list[Outcome], tuple[TestRun, str]]:
    """Run the tests; once more if the interpreter is missing or the outcome is unknown."""
    full = f"{command} -m unittest -v"
    [result] = yield Turn(text, (("run_bash", {"command": full, "timeout": 60}),))
    run = parse_test_run(result)
    fallback = this_python()
    if run.status == "missing" and command != fallback:
        [result] = yield Turn(
            f"{inline_code(command)} isn't available to the shell here ({run.excerpt}), so I'll run the tests "
            "with the Python interpreter that runs this notebook.",
            (("run_bash", {"command": f"{fallback} -m unittest -v", "timeout": 60}),),
        )
        return parse_test_run(result), fallback
    if run.status == "unknown" and result.is_error:
        [result] = yield Turn(
            f"The test run reported no result ({run.excerpt}). Running the tests has no side effects, so "
            "I'll simply run them again.",
            (("run_bash", {"command": full, "timeout": 60}),),
        )
        return parse_test_run(result), command
    return run, command


def _not_run(run: TestRun, command: str) -> str:
    """Why a test run told us nothing, as the final word."""
    reasons = {
        "timeout": "the test run timed out",
        "missing": f"no Python interpreter could run them ({run.excerpt})",
        "no_tests": "unittest found no tests to run",
    }
    reason = reasons.get(run.status, f"the test run's output made no sense to me ({run.excerpt})")
    return f"I couldn't get a test result: {reason}. The command was {inline_code(command + ' -m unittest -v')}."


def this_python() -> str:
    """The interpreter running this process, quoted for the shell."""
    if os.name == "nt":
        return subprocess.list2cmdline([sys.executable])
    return shlex.quote(sys.executable)


_FINISHED = (
    "I've finished the demo task; see my report above. As nb_durable's offline demo model I can only "
    "work that one scenario: set ANTHROPIC_API_KEY to talk to Claude."
)


def next_turn(
    ctx: Context,
    turns: list[list[Outcome]],
    ended: bool,
    play: Callable[[Context], Generator[Turn, list[Outcome], str]] = scenario,
) -> Turn:
    """Replay the scenario (``play``) over the recorded turns; the first unrecorded turn is the answer."""
    if ended:
        return Turn(_FINISHED, ())
    played = play(ctx)
    try:
        turn = next(played)
        for position, outcomes in enumerate(turns):
            # Answer exactly the calls the scenario made: a conversation that is not quite
            # the demo's still gets a result (an error) for every call and nothing more.
            fitted = [
                outcomes[i] if i < len(outcomes) else Outcome(name, args, "(no result)", True)
                for i, (name, args) in enumerate(turn.calls)
            ]
            try:
                turn = played.send(fitted)
            except StopIteration as stop:
                return Turn(str(stop.value) if position == len(turns) - 1 else _FINISHED, ())
    except StopIteration as stop:
        return Turn(str(stop.value), ())
    return turn
