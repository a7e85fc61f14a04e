"""The settings as flags: one argparse builder for the CLI's commands and the magics alike.

``add_flags`` adds the table's flags of a command (``run``, ``resume``, ``continue``) for
a front end (``cli`` or ``notebook``), in the table's groups, each with its help and its
default said; a front end adds its own arguments (a run id, ``--new``) to the same groups.
Every flag defaults to None ("not given"), so ``given`` can tell what a person typed
from what a default supplies; it checks each value as the table says and raises
``SettingError`` in the flag's own words (``--max-turns must be at least 1, not 0``).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any, Literal

from ...core.index.cursor import Cursor
from ...core.runs import RUNS_PAGE
from ...core.steps import RUN_STATUSES
from ...core.whole_runs.retention import parse_duration
from ...errors import SettingError
from .rows import OFF, Command, Setting
from .table import GROUPS, TABLE

__all__ = [
    "Argument",
    "Front",
    "add_flags",
    "add_listing_flags",
    "duration",
    "flag_help",
    "given",
    "number",
    "number_from_zero",
    "positive_number",
    "positive_whole_number",
    "rows_for",
    "run_cursor",
    "run_status",
    "seconds_problem",
    "settings_table",
    "status_among",
    "whole_number",
    "whole_number_from_zero",
]

Front = Literal["cli", "notebook"]

Argument = tuple[tuple[str, ...], dict[str, Any]]
"""A front end's own argument: ``add_argument``'s positional and keyword arguments."""


def whole_number(text: str) -> int:
    """An argparse type: a whole number, or the one message every whole-number flag gives."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number (such as 3), not {text!r}") from None


def positive_whole_number(text: str) -> int:
    """An argparse type: a whole number from 1 up (a step, a count)."""
    value = whole_number(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def whole_number_from_zero(text: str) -> int:
    """An argparse type: a whole number from 0 up (a page's size or offset)."""
    value = whole_number(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {value}")
    return value


def status_among(statuses: Sequence[str]) -> Callable[[str], str]:
    """An argparse type: one of ``statuses``, refused in the one wording every --status flag
    gives (argparse's own ``choices`` says "invalid choice" and lists them in another form)."""

    def status(text: str) -> str:
        if text not in statuses:
            raise argparse.ArgumentTypeError(f"must be one of {', '.join(statuses)}, not {text!r}")
        return text

    return status


run_status = status_among(RUN_STATUSES)
"""An argparse type: one of a run's statuses (``core.steps.RUN_STATUSES``)."""


def duration(text: str) -> float:
    """An argparse type: an age such as 30d (``core.whole_runs.retention.parse_duration``)."""
    try:
        return parse_duration(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_listing_flags(parser: argparse.ArgumentParser) -> None:
    """The filters and the page of a run listing: ``nb-durable runs`` and ``%agent_runs`` take the same
    flags in the same words, so a user reads one help in both (``core.index.cursor`` says what a page
    by cursor shows while runs are written)."""
    parser.add_argument(
        "--status", action="append", type=run_status, metavar="STATUS",
        help="only runs in this status (repeat for any of several): queued, running, waiting (for a person's answer), completed, ...",
    )  # fmt: skip
    parser.add_argument("--tag", action="append", metavar="TAG", help="only runs started with this tag (repeat: runs with every one)")
    parser.add_argument("--batch", metavar="FILE_OR_ID", help="only the runs of this batch: its file (as given to run --batch) or its id")
    parser.add_argument(
        "--limit", type=whole_number_from_zero, default=RUNS_PAGE,
        help=f"show at most this many runs, newest first (default {RUNS_PAGE}; 0 for all)",
    )  # fmt: skip
    page = parser.add_mutually_exclusive_group()
    page.add_argument(
        "--after", type=run_cursor, metavar="CURSOR",
        help="list the runs after this cursor: the next page, as the line after a page cut short names it "
        "(a run written between pages is shown at most once, every other run exactly once)",
    )  # fmt: skip
    page.add_argument(  # kept for older scripts
        "--offset", type=whole_number_from_zero, default=0,
        help="skip this many runs first, counted afresh (a run written between pages may be shown twice or skipped: --after is not)",
    )  # fmt: skip


def run_cursor(text: str) -> Cursor:
    """An argparse type: a listing's cursor (``--after``), refused as ``Cursor.parse`` says."""
    try:
        return Cursor.parse(text)
    except SettingError as e:
        raise argparse.ArgumentTypeError(f"{e.reason}, not {text!r}") from None


def number(text: str) -> float:
    """An argparse type: a number (seconds, a scale), or the one message every number flag gives."""
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number (such as 2.5), not {text!r}") from None


def seconds_problem(value: object, *, zero: bool = False) -> str:
    """What is wrong with ``value`` as seconds to wait (a timeout, a poll) or a scale, '' if nothing;
    ``zero``: 0 is one (a timeout: look once). The one rule of the CLI's flags and Python's waits."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "must be a number (such as 2.5)"
    if not (value >= 0 if zero else value > 0):  # NaN too
        return "must be 0 or more" if zero else "must be more than 0"
    if math.isinf(value):  # a poll of inf never looks again; a timeout of inf is no timeout
        return "must be a finite number"
    return ""


def number_from_zero(text: str) -> float:
    """An argparse type: a finite number from 0 up (a timeout, a scale)."""
    value = number(text)
    why = seconds_problem(value, zero=True)
    if why:
        raise argparse.ArgumentTypeError(f"{why}, not {text}")
    return value


def positive_number(text: str) -> float:
    """An argparse type: a finite number above 0 (seconds between two looks)."""
    value = number(text)
    why = seconds_problem(value)
    if why:
        raise argparse.ArgumentTypeError(f"{why}, not {text}")
    return value


def rows_for(command: Command, front: Front) -> tuple[Setting, ...]:
    """The settings that are flags of ``command`` in ``front``, in the table's order."""
    return tuple(
        row for row in TABLE if row.reaches(command) and (row.cli if front == "cli" else row.notebook)
    )


def flag_help(row: Setting, command: Command, front: Front) -> str:
    """A flag's help: what it does, its default on a new run, what a change does on a resume."""
    said = row.help_for(front)
    if command == "run":
        default = row.described_default()
        return f"{said} (default: {default})" if default else said
    if row.on_resume == "recorded":
        return f"{said}; changed from here on, recorded as a decision"
    if row.on_resume == "session":
        return f"{said}; for this session"
    if row.recorded:
        return f"{said}; the run's own, as it recorded it (given again, it must be the same)"
    return said


def _kwargs(row: Setting, command: Command, front: Front) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"dest": row.name, "default": None, "help": flag_help(row, command, front)}
    if row.kind == "switch":
        return {**kwargs, "action": "store_true"}
    if row.metavar:
        kwargs["metavar"] = row.metavar
    if row.kind == "choice":
        return {**kwargs, "choices": row.choices_for(front)}
    if row.kind == "words":
        return {**kwargs, "action": "append"}
    parse: Callable[[str], Any] = {"whole": whole_number, "number": number}.get(row.kind, str)
    return {**kwargs, "type": _or_off(parse) if row.can_be_off else parse}


def _or_off(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """``parse``, or ``OFF`` for the word off: how every flag turns something off (--cache-ttl off)."""

    def parsed(text: str) -> Any:
        if text.strip().lower() == "off":
            return OFF
        try:
            return parse(text)
        except argparse.ArgumentTypeError as e:
            raise argparse.ArgumentTypeError(f"{e} (or off)") from None

    parsed.__name__ = parse.__name__  # argparse names the type in some messages
    return parsed


def add_flags(
    parser: argparse.ArgumentParser,
    command: Command,
    front: Front,
    own: Mapping[str, Sequence[Argument]] | None = None,
    *,
    only: Collection[str] | None = None,
    leave_out: Collection[str] = (),
) -> None:
    """Add ``command``'s flags for ``front`` to ``parser``, group by group.

    ``own`` holds the front end's own arguments by group key (``GROUPS``), added first in
    their group; a key of their own makes a group of its own, after the table's. ``only``
    and ``leave_out`` name settings to add alone, or to leave to another parser.
    """
    own = own or {}
    rows = tuple(
        r for r in rows_for(command, front) if r.name not in leave_out and (only is None or r.name in only)
    )
    if only is not None:
        for row in rows:  # a parent parser's flags, shown with every command's own
            assert row.flag is not None
            parser.add_argument(row.flag, **_kwargs(row, command, front))
        return
    keys = [key for key in GROUPS if key in own or any(r.group == key for r in rows)]
    keys += [key for key in own if key not in GROUPS]
    for key in keys:
        group = parser.add_argument_group(GROUPS.get(key, key))
        for args, kwargs in own.get(key, ()):
            group.add_argument(*args, **kwargs)
        for row in rows:
            if row.group == key:
                assert row.flag is not None
                group.add_argument(row.flag, **_kwargs(row, command, front))


def given(args: argparse.Namespace, command: Command, front: Front, *, rows: Iterable[Setting] | None = None) -> dict[str, Any]:
    """The settings ``args`` were given (not the ones left unset), each checked; ``rows``: only these."""
    values = {}
    wanted = None if rows is None else {row.name for row in rows}
    for row in rows_for(command, front):
        if wanted is not None and row.name not in wanted:
            continue
        value = getattr(args, row.name, None)
        if value is OFF:
            values[row.name] = OFF
        elif value is not None:
            values[row.name] = row.check(value, spelled=row.flag or row.name)
    return values


_ON_RESUME = {"recorded": "changes the run from there (recorded)", "session": "for that session only", "no": "kept"}


def settings_table() -> str:
    """Every setting a person can give, as the Markdown table of docs/configuration.md."""
    lines = ["| Setting | Flag | `%config AgentMagics.` | Default | On resume | What |", "|---|---|---|---|---|---|"]
    for row in TABLE:
        if not row.flag and not row.config:
            continue
        where = "" if row.cli and row.notebook else " (CLI)" if row.cli else " (notebook)"
        notebook_only = [str(c) for c in row.choices if c not in row.choices_for("cli")] if row.cli and row.notebook else []
        where += f" ({', '.join(notebook_only)}: notebook only)" if notebook_only else ""
        value = row.metavar or ("\\|".join(map(str, row.choices)) if row.kind == "choice" else "")
        flag = f"`{row.flag}{' ' + value if value else ''}`{where}" if row.flag else ""
        config = f"`{row.name}`" if row.config else ""
        resume = "each session its own" if row.section != "recorded" else _ON_RESUME[row.on_resume]
        said = row.described_default() or ("off" if row.kind == "switch" else "unset")
        default, what = (text.replace("|", "\\|") for text in (said, row.help_for("notebook")))
        lines.append(f"| `{row.name}` | {flag} | {config} | {default} | {resume} | {what} |")
    return "\n".join(lines) + "\n"
