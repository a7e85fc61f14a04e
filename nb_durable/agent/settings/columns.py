"""What a setting's declaration says: its ``Columns``, given to ``setting(...)`` in ``table``.

A declaration is data only: where the setting reaches (a flag of which ``Command``s, a
``%config`` trait, an environment variable), what a resume may do with it (``OnResume``),
and what its values may be. ``rows`` reads each declared field back as a ``Setting`` row,
resolving the defaults a declaration leaves out; nothing here reads a field or checks a value.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, get_args

__all__ = ["COMMANDS", "Columns", "Command", "OnResume", "Section", "setting"]

Command = Literal["run", "resume", "continue"]
"""The commands a setting can be a flag of, in the CLI and in the notebook alike: start (or
replay) a run (``nb-durable run``, ``%%agent``), resume one, give a finished one a follow-up."""
COMMANDS: tuple[Command, ...] = get_args(Command)

OnResume = Literal["no", "recorded", "session"]
"""What a resume (or a follow-up) may do with a recorded setting: nothing (``no``: it is part of
what the run is), change it from the run's next point on as a recorded decision (``recorded``),
or change it for this session only, unrecorded (``session``: a limit on this session's turns,
how this session's calls are cached)."""

Section = Literal["recorded", "session", "front end"]
"""Where a setting lives: recorded when a run starts (``AgentSettings``), an option of one
session that is never recorded (``SessionOptions``), or a front end's choice before a run
(``FrontEndOptions``: which store, the demo model, the notebook's tools)."""

_ROW = "nb_durable.setting"
"""The key of a field's metadata that holds its row's declaration."""

_UNSET: Any = object()
"""A declaration's default for what it leaves out (``setting``'s default, ``Columns.before``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Columns:
    """What a row declares besides its name, type and default: where the setting reaches.

    ``flag`` is the setting's flag (by default ``--`` and its name with dashes; ``None``: no
    flag), on the ``commands`` given (by default: ``run``, plus ``resume`` and ``continue``
    when a resume may change it or it is a session option); ``cli`` and ``notebook`` say which
    front ends have the flag, ``config`` whether it is a ``%config`` trait (by default: when it
    is a notebook flag of ``run``); ``group`` is where help shows it (``table.GROUPS``).
    ``minimum`` (whole numbers: the least; text: the fewest characters besides spaces),
    ``maximum`` (whole numbers: the most),
    ``unit`` (positive numbers: "dollars") and ``regex`` (text: a pattern ``re`` compiles) say
    what a value may be. ``identity``: whether a
    rerun must match it (recorded settings). ``on_resume``: what a resume may do with it.
    ``env``: the environment variable an unset value comes from. ``unset``: what an unset
    value means where a front end chooses it (the notebook's workspace). ``before``: what a
    log recorded before the setting existed meant.
    ``written_if``: the setting is written to the log only when that setting is truthy, so a
    run without it records exactly what it always did. ``cli_choices``: the choices a terminal
    offers, where it cannot serve them all. ``choice_help``: what each choice does, in the
    order of the type's choices; the help then lists those a front end offers (``help_for``).
    """

    help: str = ""
    flag: str | None = ""
    metavar: str | None = None
    commands: tuple[Command, ...] | None = None
    cli: bool = True
    notebook: bool = True
    config: bool | None = None
    group: str = ""
    minimum: int | None = None
    maximum: int | None = None
    unit: str = ""
    regex: bool = False
    identity: bool = True
    on_resume: OnResume = "no"
    env: str | None = None
    unset: str = ""
    before: Any = _UNSET
    written_if: str | None = None
    cli_choices: tuple[Any, ...] = ()
    choice_help: tuple[str, ...] = ()


def setting(default: Any = _UNSET, help: str = "", *, factory: Callable[[], Any] | None = None, **columns: Any) -> Any:
    """Declare one setting: a dataclass field whose metadata is its row's ``Columns``."""
    declared = Columns(help=help, **columns)
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata={_ROW: declared})
    if default is _UNSET:
        return dataclasses.field(metadata={_ROW: declared})
    return dataclasses.field(default=default, metadata={_ROW: declared})
