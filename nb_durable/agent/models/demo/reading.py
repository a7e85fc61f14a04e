"""How the demo agent reads what its tools returned, and says it in prose.

The demo reacts to real tool output, so it must read it the way a person would: a unittest
run's counts, failures and assertion messages whatever wording the tool wraps them in, the
Python files of a directory listing, what a file defines. Everything here is a pure function
of text: the same output always reads the same, so a replayed conversation gets the same words.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Outcome",
    "TestRun",
    "describe_file",
    "excerpt_of",
    "failures_in",
    "how_many_fail",
    "inline_code",
    "is_test_file",
    "join_words",
    "parse_test_run",
    "python_files",
]


@dataclass(frozen=True)
class Outcome:
    """One tool call as the conversation records it: what was asked and what came back."""

    name: str
    input: Mapping[str, Any]
    text: str
    is_error: bool


@dataclass(frozen=True)
class TestRun:
    """What a unittest run's output says."""

    status: str  # passed, failed, no_tests, timeout, missing (no interpreter), unknown
    ran: int | None
    failed: tuple[str, ...]
    assertions: tuple[str, ...]
    summary: str
    excerpt: str


def parse_test_run(outcome: Outcome) -> TestRun:
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
    return TestRun(status, ran, failed, assertions, summary, excerpt_of(text))


def excerpt_of(text: str, limit: int = 160) -> str:
    """The first meaningful line of a tool's output, shortened, for quoting in prose."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    first = lines[0] if lines else "no output"
    return first if len(first) <= limit else first[: limit - 3] + "..."


def python_files(listing: str) -> list[str]:
    """The Python files a directory listing names, in its order."""
    names = re.findall(r"[\w./-]*\w\.py\b", listing)
    return list(dict.fromkeys(n.removeprefix("./") for n in names if "__pycache__" not in n))


def is_test_file(path: str) -> bool:
    """Whether unittest discovery would pick the file up as tests."""
    name = path.rsplit("/", 1)[-1]
    return name.startswith("test") or name.endswith("_test.py")


def inline_code(text: str) -> str:
    """Inline code in Markdown."""
    return f"`{text}`"


def join_words(items: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def describe_file(path: str, text: str) -> str:
    """One clause saying what a Python file holds."""
    tests = re.findall(r"^[ \t]*def (test\w*)\(", text, re.M)
    if is_test_file(path):
        return f"{inline_code(path)} has {len(tests)} unittest case{'s' if len(tests) != 1 else ''}"
    functions = [f"{inline_code(name + '()')}" for name in re.findall(r"^def (\w+)\(", text, re.M)]
    return f"{inline_code(path)} defines {join_words(functions)}" if functions else f"{inline_code(path)} holds no functions"


def failures_in(run: TestRun) -> str:
    """The failing tests with their assertion messages, as prose."""
    if run.failed and len(run.failed) == len(run.assertions):
        return join_words(
            [
                f"{inline_code(name)} ({a.removeprefix('AssertionError: ')})"
                for name, a in zip(run.failed, run.assertions, strict=True)
            ]
        )
    if run.failed:
        return join_words([inline_code(name) for name in run.failed])
    return run.summary or run.excerpt


def how_many_fail(run: TestRun, *, before: bool = False) -> str:
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
