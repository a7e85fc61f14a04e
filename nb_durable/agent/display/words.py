"""A message in the words of the front end that prints it.

``in_words_of`` turns the Python spellings in the package's messages (``in_doubt='skip'``,
``read_run('x')``, ``max_turns``) into the flags and commands of the front end that prints
them, so a terminal user is never told to call a function; the commands a listing prints for
its next page (``next_page_flags``) and a store's flag (``store_flag``) are written here too.
"""

from __future__ import annotations

import functools
import re
import shlex
from collections.abc import Callable, Sequence
from typing import Literal

from ...core.runs import RUNS_PAGE, RunSummary
from ...core.stores import shown_store
from .inert_text import terminal_text
from .views import StepId

__all__ = ["Interface", "claim_order_words", "in_words_of", "listed_name", "listed_task", "priority_cell", "priority_column", "next_page_flags", "page_start", "step_words", "store_flag"]

Interface = Literal["cli", "notebook"]

_SHOW = {"cli": "nb-durable show {}", "notebook": "%agent_show {}"}
_RESUME = {"cli": "nb-durable resume {}", "notebook": "%agent_resume {}"}
_RUNS = {"cli": "nb-durable runs", "notebook": "%agent_runs"}
_DELETE = {"cli": "nb-durable delete {}", "notebook": "!nb-durable delete {}"}  # a notebook has no delete magic
_WORDS: tuple[tuple[str, Callable[[re.Match[str], Interface, str | None], str]], ...] = (
    (r"in_doubt='(\w+)'", lambda m, *_: f"--in-doubt {m.group(1)}"),
    # Only where the setting is asked to change: a batch file's line names its key max_turns.
    (r"\bwith a higher max_turns\b", lambda m, *_: "with a higher --max-turns"),
    # Only as the whole message, the setting's own refusal: a batch file's line names its key batch_api.
    (r"^batch_api must be off for the offline demo model, (which has no Message Batches API.*), not True$",
     lambda m, *_: f"--batch-api cannot be used with the offline demo model, {m.group(1)}"),
    # A cursor refused by the store listed, not by its parser (which argparse words itself).
    (r"^after (?=was made by a listing of another store)", lambda m, *_: "--after "),
    (r"read_run\(('[^']*')?\)", lambda m, ui, store: _SHOW[ui].format(m.group(1)[1:-1] if m.group(1) else "RUN") + _cli_store(ui, store)),
    (r"list_runs\(('[^']*')?\)", lambda m, ui, store: _listing(m.group(1)[1:-1] if m.group(1) else store or "", ui)),
    (r"resume_agent\('([^']*)'\)", lambda m, ui, store: _RESUME[ui].format(shlex.quote(m.group(1))) + _cli_store(ui, store)),
    # Another model for a resume: the terminal's and the magic's flag alike.
    (r"resume_agent\('([^']*)', model=M\)",
     lambda m, ui, store: _RESUME[ui].format(shlex.quote(m.group(1))) + " --model M" + _cli_store(ui, store)),
    (r"\(model=M\)", lambda m, *_: "(--model M)"),
    (r"delete_run\('([^']*)', '([^']*)'\)", lambda m, ui, *_: _DELETE[ui].format(shlex.quote(m.group(1))) + store_flag(m.group(2))),
    (r"\b[Ss]tep '((?:model|tool|approval):[^']+)'", lambda m, *_: step_words(m.group(1), m.group(0)[0])),
    # A notebook has no fork magic: there, fork() is what a person calls (or the Fork button).
    (r"\bfork\('([^']*)', (?:new_id|'new-id'), at=(N|\d+)\)",
     lambda m, ui, store: f"nb-durable fork {m.group(1)} NEW --at {m.group(2)}{_cli_store(ui, store)}" if ui == "cli" else m.group(0)),
)


def _cli_store(interface: Interface, store: str | None) -> str:
    """The ``--store`` of a command about one run the terminal is told to type: the store the
    command that printed it was given, or the command would look in the default store (a
    notebook's magics act on the store of their session)."""
    return store_flag(store) if interface == "cli" else ""


def _listing(store: str, interface: Interface) -> str:
    """The command that lists the runs of ``store`` ('' for the default store)."""
    return _RUNS[interface] + store_flag(store)


def store_flag(store: str | None) -> str:
    """`` --store STORE`` for a command a message prints (quoted for a shell, never with a
    password), or '' for the default store. A path that is not UTF-8 is spelled byte for byte
    ($'...'), as a shell needs it pasted back: shown as text, it held a \\udcff no shell reads."""
    # Imported here: the workspace package loads the tools, which a listing's words never need.
    from ..workspace.names import shell_word

    return f" --store {shell_word(shown_store(store))}" if store else ""


def next_page_flags(status: Sequence[str], tags: Sequence[str], batch: str | None, limit: int, after: str) -> str:
    """The flags after the store of the command that lists the next page of runs (``runs``,
    ``%agent_runs``): the filters and page size given, or it would list other runs, and the
    cursor of the page's last run (``RunSummary.cursor``)."""
    given = [*(("--status", s) for s in status), *(("--tag", t) for t in tags)]
    if batch is not None:
        given.append(("--batch", batch))
    if limit != RUNS_PAGE:
        given.append(("--limit", str(limit)))
    return "".join(f" {flag} {shlex.quote(value)}" for flag, value in given) + f" --after {after}"


def listed_name(run_id: str, depth: int, child_of: str | None) -> str:
    """A run's name in a listing (``runs``, ``%agent_runs``): a child drawn under its parent listed
    above it (``└``, indented by ``depth``), or, its parent not listed there (on another page, or
    filtered out), saying whose child it is, or it would read as a run of its own."""
    if depth:
        return "  " * depth + "└ " + run_id
    return f"↳ {run_id} (child of {child_of})" if child_of is not None else run_id


def listed_task(task: str, width: int = 40) -> str:
    """A run's task in a listing's row (``runs``, ``%agent_runs``): inert (``terminal_text``), on
    one line, its first ``width`` characters (40 where a terminal shows it)."""
    return " ".join(terminal_text(task).split())[:width]


def priority_column(listed: Sequence[RunSummary]) -> bool:
    """Whether a listing has a priority column: while a run it lists waits for a worker with a
    priority other than the default 0, where it decides when a worker takes it; not a column of
    blanks for every run that ended, nor of zeros for every run a person resumes."""
    return any(s.waits_for_worker and s.priority for s in listed)


def priority_cell(summary: RunSummary) -> str:
    """A run's priority in a listing's column: said only of a run waiting for a worker."""
    return str(summary.priority) if summary.waits_for_worker else "-"


def claim_order_words(listed: Sequence[RunSummary], more: bool, *, shown: int = 10) -> str:
    """The order workers will take the listed runs waiting for one, for a listing filtered by
    status (``--status queued``), which is ordered by update, the newest first; '' if none waits.
    ``more``: the listing has more pages, so this is the order of this page's runs."""
    waiting = sorted((s for s in listed if s.waits_for_worker), key=lambda s: s.claim_key)
    if not waiting:
        return ""
    names = ", ".join(s.run_id for s in waiting[:shown]) + (f" and {len(waiting) - shown} more" if len(waiting) > shown else "")
    runs = "this page's runs" if more else "these runs"
    return f"workers take {runs} highest priority first, then the oldest: {names}"


def page_start(offset: int, after: str) -> str:
    """Where a page of runs was asked to start, in words for a listing that found none there:
    `` past the first 20`` (``--offset``), `` after r7`` (``--after``: the run its cursor names)."""
    return f" past the first {offset}" if offset else f" after {after}" if after else ""


def step_words(step_id: str, s: str = "s") -> str:
    """An agent step's id as a person reads it: ``model turn 3``, ``tool call 1 of turn 2``."""
    try:
        words = StepId.parse(step_id).words()
    except ValueError:
        return f"{s}tep {step_id!r}"
    return words[0].upper() + words[1:] if s == "S" else words


_UNWRITABLE = re.compile(r"\bPass root= a folder you can write\b")
"""A runs folder's refusal to be written, which names the Python argument."""


def in_words_of(interface: Interface, message: str, store: str | None = None, written: str = "--store") -> str:
    """``message`` with Python spellings replaced by the flags and commands of ``interface``;
    ``store``: the one a terminal command was given (``--store``), named in the commands about a
    run it is told to type (show, resume); ``written``: how the command names the store it writes,
    told to name another when that one refuses (``--store``, fork's ``--to``, copy's ``the
    destination``)."""
    for pattern, words in _WORDS:
        message = re.sub(pattern, functools.partial(_say, words, interface, store), message)
    other = f"Pass {written}" if written.startswith("--") else f"Give as {written}"
    return _UNWRITABLE.sub(f"{other} a folder you can write", message)


def _say(
    words: Callable[[re.Match[str], Interface, str | None], str], interface: Interface, store: str | None, match: re.Match[str]
) -> str:
    return words(match, interface, store)
