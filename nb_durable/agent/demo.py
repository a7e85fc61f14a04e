"""``DemoModel``: a scripted agent that fixes the bundled demo project with the real tools,
offline, and ``prepare_demo_workspace``, which puts that project where a run can work on it.

``DemoModel`` is an agent, not a queue. Its scenario (explore, read, run the tests, fix, run
them again, report) is a generator that yields one turn (text and tool calls) per model call
and receives the tool results. To answer a request it replays that generator against the
conversation in the request, feeding it the tool results recorded there, and answers with
the first turn the conversation does not hold yet: the durable log's idea in miniature, the
conversation being the log. So it reacts to what the tools really returned, keeps no state
between calls (a resumed run in a new process gets the same answer), and the same tool
results always give the same transcript: ids, text and token counts derive from the
conversation, never from a clock or a random source. Only its latency is simulated.
"""

from __future__ import annotations

import os
import random
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .model import TextCallback
from .offline import _input_tokens, _pieces, _stable_id, make_message

if TYPE_CHECKING:
    from importlib.abc import Traversable

__all__ = ["DEMO_TASK", "LATENCY_ENV", "DemoModel", "prepare_demo_workspace"]


DEMO_TASK = (
    "The tests in this project fail. Find out why, fix the code (not the tests), and show "
    "that the tests pass. Then explain what was wrong and what you changed."
)

LATENCY_ENV = "NB_DURABLE_DEMO_LATENCY"

# --- the demo workspace ----------------------------------------------------------------------

_SKIP = {"__pycache__", ".pytest_cache"}


def _bundled() -> Traversable:
    """The demo project as the installed package holds it."""
    return resources.files("nb_durable.agent").joinpath("demo_workspace")


def _bundled_files(root: Traversable | None = None, prefix: str = "") -> dict[str, bytes]:
    """The demo project's files by relative path (caches left out)."""
    root = _bundled() if root is None else root
    files: dict[str, bytes] = {}
    for entry in sorted(root.iterdir(), key=lambda e: e.name):
        if entry.name in _SKIP or entry.name.endswith(".pyc"):
            continue
        if entry.is_dir():
            files.update(_bundled_files(entry, f"{prefix}{entry.name}/"))
        else:
            files[prefix + entry.name] = entry.read_bytes()
    return files


def prepare_demo_workspace(dest: str | os.PathLike[str], *, reset: bool = False) -> Path:
    """Copy the demo project into ``dest`` (missing or empty) and return it; never overwrite.

    A folder that already holds the demo project keeps its files as they are (with the fix,
    if an earlier run made it) and gets only the missing ones; ``reset=True`` restores the
    bundled versions. A folder with anything else in it is refused, untouched.
    """
    dest = Path(dest)
    files = _bundled_files()
    if dest.exists() and not dest.is_dir():
        raise FileExistsError(f"cannot prepare the demo workspace at {dest}: it is a file, not a folder")
    present = sorted(p.name for p in dest.iterdir()) if dest.exists() else []
    top_level = {name.split("/")[0] for name in files}
    strangers = [name for name in present if name not in top_level and name not in _SKIP]
    if strangers:
        shown = ", ".join(strangers[:5]) + (", ..." if len(strangers) > 5 else "")
        raise FileExistsError(
            f"cannot prepare the demo workspace in {dest}: the folder holds other files ({shown}), "
            f"and the demo agent edits files. Choose a new or empty folder."
        )
    for relative, data in files.items():
        target = dest / relative
        # An existing copy keeps its state (the fix an earlier run made) unless reset is asked.
        if reset or not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
    return dest


# --- DemoModel -------------------------------------------------------------------------------

_DEMO_TOOLS = ("list_dir", "read_file", "write_file", "run_bash")
_DEMO_FILES = ("calc.py", "test_calc.py")
# The bug the demo project ships with, and its fix; matched per line so CRLF files work too.
_BUG = re.compile(r"^([ \t]*)ordered = list\(values\)", re.M)
_FIXED = re.compile(r"^[ \t]*ordered = sorted\(values\)", re.M)


@dataclass(frozen=True)
class _Outcome:
    """One tool call as the conversation records it: what was asked and what came back."""

    name: str
    input: Mapping[str, Any]
    text: str
    is_error: bool


@dataclass(frozen=True)
class _Turn:
    """One assistant turn of the scenario: something to say and tools to call."""

    text: str
    calls: tuple[tuple[str, dict[str, Any]], ...]


@dataclass(frozen=True)
class _TestRun:
    """What a unittest run's output says."""

    status: str  # passed, failed, no_tests, timeout, missing (no interpreter), unknown
    ran: int | None
    failed: tuple[str, ...]
    assertions: tuple[str, ...]
    summary: str
    excerpt: str


def _parse_test_run(outcome: _Outcome) -> _TestRun:
    """Read a unittest run out of combined output, whatever wording the tool wraps it in."""
    text = outcome.text
    ran_match = re.search(r"^Ran (\d+) tests? in", text, re.M)
    ran = int(ran_match.group(1)) if ran_match else None
    failed = tuple(dict.fromkeys(re.findall(r"^(?:FAIL|ERROR): (\w+) \(", text, re.M)))
    assertions = tuple(a.strip() for a in re.findall(r"^(\w*(?:Error|Exception): .+)$", text, re.M))
    summary_match = re.search(r"^(FAILED \([^)]*\)|OK\b.*|NO TESTS RAN.*)$", text, re.M)
    summary = summary_match.group(1).strip() if summary_match else ""
    if ran == 0 or "NO TESTS RAN" in text:
        status = "no_tests"
    elif summary.startswith("FAILED") or failed:
        status = "failed"
    elif summary.startswith("OK") and ran is not None:
        status = "passed"
    elif re.search(r"timed?[ -]?out", text, re.I):
        status = "timeout"
    elif re.search(r"not found|not recognized|no such file|cannot find|can't open", text, re.I):
        status = "missing"
    else:
        status = "unknown"
    return _TestRun(status, ran, failed, assertions, summary, _excerpt(text))


def _excerpt(text: str, limit: int = 160) -> str:
    """The first meaningful line of a tool's output, shortened, for quoting in prose."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    first = lines[0] if lines else "no output"
    return first if len(first) <= limit else first[: limit - 3] + "..."


def _python_files(listing: str) -> list[str]:
    """The Python files a directory listing names, in its order."""
    names = re.findall(r"[\w./-]*\w\.py\b", listing)
    return list(dict.fromkeys(n.removeprefix("./") for n in names if "__pycache__" not in n))


def _is_test_file(path: str) -> bool:
    """Whether unittest discovery would pick the file up as tests."""
    name = path.rsplit("/", 1)[-1]
    return name.startswith("test") or name.endswith("_test.py")


def _code(text: str) -> str:
    """Inline code in Markdown."""
    return f"`{text}`"


def _join(items: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _describe(path: str, text: str) -> str:
    """One clause saying what a Python file holds."""
    tests = re.findall(r"^[ \t]*def (test\w*)\(", text, re.M)
    if _is_test_file(path):
        return f"{_code(path)} has {len(tests)} unittest case{'s' if len(tests) != 1 else ''}"
    functions = [f"{_code(name + '()')}" for name in re.findall(r"^def (\w+)\(", text, re.M)]
    return f"{_code(path)} defines {_join(functions)}" if functions else f"{_code(path)} holds no functions"


def _failures(run: _TestRun) -> str:
    """The failing tests with their assertion messages, as prose."""
    if run.failed and len(run.failed) == len(run.assertions):
        return _join(
            [
                f"{_code(name)} ({a.removeprefix('AssertionError: ')})"
                for name, a in zip(run.failed, run.assertions, strict=True)
            ]
        )
    if run.failed:
        return _join([_code(name) for name in run.failed])
    return run.summary or run.excerpt


def _how_many_fail(run: _TestRun, *, before: bool = False) -> str:
    """ "2 of the 6 tests fail, both in `median()`", and the like."""
    count, ran = len(run.failed), run.ran
    if not count:
        return "Before the fix, tests failed" if before else "Tests fail"
    verb = ("failed" if before else "fails" if count == 1 else "fail") + (" before the fix" if before else "")
    subject = f"{count} of the {ran} tests" if ran and ran > 1 else f"{count} test{'s' if count > 1 else ''}"
    if all("median" in name for name in run.failed):
        scope = (
            " in `median()`"
            if count == 1
            else ", both in `median()`"
            if count == 2
            else ", all in `median()`"
        )
    else:
        scope = ""
    return f"{subject} {verb}{scope}"


@dataclass(frozen=True)
class _Context:
    task: str
    tools: frozenset[str] | None
    python: str


def _scenario(ctx: _Context) -> Generator[_Turn, list[_Outcome], str]:
    """The demo agent: every branch follows what the tools actually returned."""
    if ctx.tools is not None and not set(_DEMO_TOOLS) <= ctx.tools:
        offered = _join(sorted(ctx.tools)) if ctx.tools else "no tools"
        return (
            "I'm nb_durable's offline demo model. I work the demo task with the built-in tools "
            f"{_join(_DEMO_TOOLS)}, but this request offers {offered}, so there is nothing I can do. "
            "Run the agent with the built-in tools."
        )
    note = ""
    if "test" not in ctx.task.lower():
        note = (
            "(I'm nb_durable's offline demo model: no API key is set, so whatever the task says, I work "
            "the demo scenario: find out why this project's tests fail and fix them.)\n\n"
        )
    [listing] = yield _Turn(
        note + "I'll start by looking at what's in the project.", (("list_dir", {"path": "."}),)
    )
    files = list(_DEMO_FILES)
    if listing.is_error:
        intro = (
            f"Listing the folder failed ({listing.text.strip()[:120]}), so I'll try the files this demo "
            f"project usually has: {_join([_code(f) for f in files])}."
        )
    else:
        found = _python_files(listing.text)
        if not set(files) <= set(found):
            seen = _join([_code(f) for f in found[:6]]) if found else "no Python files"
            # Running the tests of a project it does not know would run code nobody vetted.
            return (
                f"This folder doesn't hold the demo project: I see {seen}, not `calc.py` with its tests "
                "in `test_calc.py`. I'm nb_durable's offline demo model: I only work the bundled demo "
                "project, and I won't run the code of a project I don't know. Point the workspace at a "
                "folder made by `prepare_demo_workspace()`, or set ANTHROPIC_API_KEY to work on your own "
                "code with Claude."
            )
        extra = [_code(f) for f in found if f not in files]
        also = f" (besides {_join(extra)})" if extra else ""
        intro = f"The project is small: `calc.py`, with its tests in `test_calc.py`{also}. Let me read both."
    reads = yield _Turn(intro, tuple(("read_file", {"path": f}) for f in files))
    code = {f: r.text for f, r in zip(files, reads, strict=True) if not r.is_error}
    unread = [f"{_code(f)} ({r.text.strip()[:80]})" for f, r in zip(files, reads, strict=True) if r.is_error]
    if not code:
        return (
            f"I couldn't read any of the project's files: {_join(unread)}. Without the code I can't fix it."
        )
    said = "; ".join(_describe(f, t) for f, t in code.items())
    if unread:
        said += f". I couldn't read {_join(unread)}"
    run, command = yield from _run_tests(
        ctx, f"{said[0].upper()}{said[1:]}. Let me run the tests and see what fails.", ctx.python
    )
    if run.status == "passed":
        already = next((f for f, t in code.items() if _FIXED.search(t)), None)
        why = (
            f" `median()` in {_code(already)} already sorts its input (`ordered = sorted(values)`), which is "
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
            f"The tests fail ({run.summary or 'see the output above'}): {_failures(run)}. I read the code but "
            "found no cause I'm sure of, so I changed nothing rather than guess. The failing assertions above "
            "are the place to start."
        )
    fixed = _BUG.sub(r"\1ordered = sorted(values)", code[buggy], count=1)
    explain = f"{_how_many_fail(run)}: {_failures(run)}.\n\n" + (
        f"The cause is in {_code(buggy)}: `median()` copies the values with `list(values)` and takes the "
        "middle element(s) without sorting them, so it returns whatever sits in the middle of the input "
        "order. It only gives the right answer when the values arrive sorted. The fix is to sort them: "
        f"`ordered = sorted(values)`. I'll write the corrected {_code(buggy)}."
    )
    [written] = yield _Turn(explain, (("write_file", {"path": buggy, "content": fixed}),))
    aside = ""
    if written.is_error:
        [check] = yield _Turn(
            f"Writing {_code(buggy)} failed ({written.text.strip()[:120]}). Before anything else, let me "
            "check what the file holds now.",
            (("read_file", {"path": buggy}),),
        )
        if check.is_error or not _FIXED.search(check.text):
            state = "I couldn't read it back either" if check.is_error else "it still has the bug"
            return (
                f"I couldn't apply the fix: writing {_code(buggy)} failed ({written.text.strip()[:120]}) and "
                f"{state}. The fix is one line in `median()`: replace `ordered = list(values)` with "
                "`ordered = sorted(values)`. Apply it by hand, or run me again once the file is writable."
            )
        aside = " (Writing the file reported an error, but reading it back showed the fix in place.)"
    again, command = yield from _run_tests(ctx, "Now let me run the tests again.", command)
    if again.status == "passed":
        return (
            f"Done. The tests pass now ({again.ran} ran: {again.summary}).{aside}\n\n"
            f"**What was wrong:** `median()` in {_code(buggy)} took the middle element(s) of the values in "
            "the order they were given, without sorting them first, so it only worked for input that was "
            f"already sorted. {_how_many_fail(run, before=True)}: {_failures(run)}.\n\n"
            f"**What changed:** one line of {_code(buggy)}, inside `median()`:\n\n"
            "```diff\n-    ordered = list(values)\n+    ordered = sorted(values)\n```\n\n"
            "Nothing else was touched; the tests are as they were."
        )
    if again.status == "failed":
        return (
            f"I fixed `median()` in {_code(buggy)} (`ordered = list(values)` became `ordered = sorted(values)`), "
            f"but the tests still fail ({again.summary}): {_failures(again)}. The sort was needed, but something "
            "else is wrong as well; I stopped here rather than guess."
        )
    return (
        f"I fixed `median()` in {_code(buggy)} (it now sorts the values), but could not confirm it: "
        + _not_run(again, command)
    )


def _run_tests(
    ctx: _Context, text: str, command: str
) -> Generator[_Turn, list[_Outcome], tuple[_TestRun, str]]:
    """Run the tests; once more if the interpreter is missing or the outcome is unknown."""
    full = f"{command} -m unittest -v"
    [result] = yield _Turn(text, (("run_bash", {"command": full, "timeout": 60}),))
    run = _parse_test_run(result)
    fallback = _this_python()
    if run.status == "missing" and command != fallback:
        [result] = yield _Turn(
            f"{_code(command)} isn't available to the shell here ({run.excerpt}), so I'll run the tests "
            "with the Python interpreter that runs this notebook.",
            (("run_bash", {"command": f"{fallback} -m unittest -v", "timeout": 60}),),
        )
        return _parse_test_run(result), fallback
    if run.status == "unknown" and result.is_error:
        [result] = yield _Turn(
            f"The test run reported no result ({run.excerpt}). Running the tests has no side effects, so "
            "I'll simply run them again.",
            (("run_bash", {"command": full, "timeout": 60}),),
        )
        return _parse_test_run(result), command
    return run, command


def _not_run(run: _TestRun, command: str) -> str:
    """Why a test run told us nothing, as the final word."""
    reasons = {
        "timeout": "the test run timed out",
        "missing": f"no Python interpreter could run them ({run.excerpt})",
        "no_tests": "unittest found no tests to run",
    }
    reason = reasons.get(run.status, f"the test run's output made no sense to me ({run.excerpt})")
    return f"I couldn't get a test result: {reason}. The command was {_code(command + ' -m unittest -v')}."


def _this_python() -> str:
    """The interpreter running this process, quoted for the shell."""
    if os.name == "nt":
        return subprocess.list2cmdline([sys.executable])
    return shlex.quote(sys.executable)


def _default_python() -> str:
    """The shell's name for Python: ``python3``, else ``python``, else this interpreter's path."""
    for name in ("python3", "python"):
        if shutil.which(name):
            return name
    return _this_python()


def _blocks(content: Any) -> list[Mapping[str, Any]]:
    """A message's content as a list of blocks (a plain string is one text block)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, Mapping)]


def _result_text(block: Mapping[str, Any]) -> str:
    """A tool_result's content as text: a string, or text blocks joined."""
    content = block.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(str(b.get("text", "")) for b in _blocks(content) if b.get("type") == "text")


def _history(messages: Sequence[Mapping[str, Any]]) -> tuple[str, list[list[_Outcome]], bool]:
    """The task, each assistant turn's tool calls with their results, and whether a turn ended."""
    task = ""
    turns: list[list[_Outcome]] = []
    ended = False
    for index, message in enumerate(messages):
        if message.get("role") == "user" and not task and not turns:
            task = "\n".join(
                str(b.get("text", "")) for b in _blocks(message.get("content")) if b.get("type") == "text"
            )
        if message.get("role") != "assistant":
            continue
        calls = [b for b in _blocks(message.get("content")) if b.get("type") == "tool_use"]
        if not calls:
            ended = True
            continue
        following = messages[index + 1] if index + 1 < len(messages) else {}
        results = {
            b.get("tool_use_id"): b
            for b in _blocks(following.get("content"))
            if following.get("role") == "user" and b.get("type") == "tool_result"
        }
        turns.append(
            [
                _Outcome(
                    str(c.get("name")),
                    c.get("input") or {},
                    _result_text(results[c.get("id")])
                    if c.get("id") in results
                    else "(no result was returned for this call)",
                    bool(results[c.get("id")].get("is_error")) if c.get("id") in results else True,
                )
                for c in calls
            ]
        )
    return task, turns, ended


_FINISHED = (
    "I've finished the demo task; see my report above. As nb_durable's offline demo model I can only "
    "work that one scenario: set ANTHROPIC_API_KEY to talk to Claude."
)


def _next_turn(ctx: _Context, turns: list[list[_Outcome]], ended: bool) -> _Turn:
    """Replay the scenario over the recorded turns; the first unrecorded turn is the answer."""
    if ended:
        return _Turn(_FINISHED, ())
    scenario = _scenario(ctx)
    try:
        turn = next(scenario)
        for position, outcomes in enumerate(turns):
            # Answer exactly the calls the scenario made: a conversation that is not quite
            # the demo's still gets a result (an error) for every call and nothing more.
            fitted = [
                outcomes[i] if i < len(outcomes) else _Outcome(name, args, "(no result)", True)
                for i, (name, args) in enumerate(turn.calls)
            ]
            try:
                turn = scenario.send(fitted)
            except StopIteration as stop:
                return _Turn(str(stop.value) if position == len(turns) - 1 else _FINISHED, ())
    except StopIteration as stop:
        return _Turn(str(stop.value), ())
    return turn


class DemoModel:
    """A scripted agent that fixes the bundled demo project with the real tools, offline."""

    name = "demo"

    def __init__(
        self,
        *,
        latency: float | None = None,
        sleep: Callable[[float], None] = time.sleep,
        python: str | None = None,
    ) -> None:
        """``latency`` scales the simulated delays (1 = ~0.4-1.2 s a call, 0 = none); when it is
        None, ``NB_DURABLE_DEMO_LATENCY`` sets it, else 1. ``python`` is the command the demo
        runs the tests with (``python3`` or ``python`` from PATH by default)."""
        if latency is None:
            raw = os.environ.get(LATENCY_ENV, "").strip()
            try:
                latency = float(raw) if raw else 1.0
            except ValueError:
                raise ValueError(
                    f"{LATENCY_ENV}={raw!r} is not a number: use a scale like 1, 0.2 or 0"
                ) from None
        if not latency >= 0:
            raise ValueError(f"the demo latency scale must be 0 or more, not {latency}")
        self.latency = latency
        self._sleep = sleep
        self.python = python or _default_python()

    def __repr__(self) -> str:
        return f"DemoModel(latency={self.latency})"

    def create(self, request: Mapping[str, Any], on_text: TextCallback | None = None) -> dict[str, Any]:
        """Decide the next turn from the conversation so far, and say it at a human pace."""
        messages = list(request.get("messages") or [])
        task, turns, ended = _history(messages)
        tools = request.get("tools")
        offered = (
            None if tools is None else frozenset(str(t.get("name")) for t in tools if isinstance(t, Mapping))
        )
        turn = _next_turn(_Context(task, offered, self.python), turns, ended)
        content: list[dict[str, Any]] = [{"type": "text", "text": turn.text}] if turn.text else []
        position = len(turns)
        for index, (name, args) in enumerate(turn.calls):
            content.append(
                {
                    "type": "tool_use",
                    "id": _stable_id("toolu_", messages, position, index, name, args),
                    "name": name,
                    "input": args,
                }
            )
        message_id = _stable_id("msg_", messages, content)
        message = make_message(
            content,
            stop_reason="tool_use" if turn.calls else "end_turn",
            model="demo",
            input_tokens=_input_tokens(request),
            id=message_id,
        )
        self._speak(message_id, turn.text, len(turn.calls), message["usage"]["output_tokens"], on_text)
        return {"message": dict(message), "request_id": _stable_id("req_", message_id)}

    def _speak(
        self, seed: str, text: str, calls: int, output_tokens: int, on_text: TextCallback | None
    ) -> None:
        """Stream ``text`` in small pieces, spending ~0.4-1.2 s (times the latency scale) in all."""
        rng = random.Random(seed)  # the same turn takes the same time: replays look alike
        total = min(1.2, 0.4 + output_tokens * 0.002 + rng.uniform(0.0, 0.3)) * self.latency
        pieces = _pieces(text, 3) if text else []
        # Time to the first token, then the text as it streams, then the tool inputs.
        first, streaming, tools = (0.45, 0.4, 0.15) if calls else (0.5, 0.5, 0.0)
        if not pieces:
            first += streaming
        self._wait(total * first)
        for piece in pieces:
            self._wait(total * streaming / len(pieces))
            if on_text is not None:
                on_text(piece)
        self._wait(total * tools)

    def _wait(self, seconds: float) -> None:
        """Sleep, unless there is nothing to wait for (latency 0 never calls sleep)."""
        if seconds > 0:
            self._sleep(seconds)
