"""The magics' settings, derived from the settings table: their flags, their traits, their values.

``table_flags(command)`` puts the table's flags of a command on a magic (the argparse
builder the CLI uses, so both front ends offer the same flags with the same help), with the
magic's own arguments in the same groups. ``SettingTraits`` is a ``Configurable`` whose
traits are the table's ``%config`` settings, each checked as the table says, so
``%config AgentMagics.max_turns = 0`` is refused in the words the person used.
``values_of`` merges what ``%config`` set with what a cell's flags gave, flags first;
``not_taken`` is what ``%config`` set that a run going on keeps its recorded value over;
``going_on`` is both, for a resume or a follow-up, and ``button_resume`` the same for the
resume a timeline's Resume or Fork button starts (the magics found by ``shell_settings``).
``arguments_of`` reads a magic's line as a shell would: IPython's own parsing keeps the quotes
on POSIX systems, so ``--store "my runs"`` named a folder with quotes in its name, and the
commands the package prints (quoted by ``shlex.quote``) could not be typed back.
``variable_name`` is the type of ``-o``, whose name the magic binds in the notebook's namespace.
``user_mistakes`` turns what a magic's call refuses as a mistake in what was asked into a
``UsageError``, in the notebook's words (``%agent_runs``, not ``list_runs()``).
"""

from __future__ import annotations

import argparse
import keyword
import shlex
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn, TypeVar

from IPython.core.error import UsageError
from IPython.core.magic import Magics
from IPython.core.magic_arguments import ArgDecorator
from IPython.utils.process import arg_split  # type: ignore[attr-defined]  # re-exported per platform, not in __all__
from traitlets import Bool, Enum, Float, Int, List, TraitError, TraitType, Unicode, validate

from ..agent.models.base import MODEL_CHOICES
from ..agent.settings import TABLE, Setting
from ..agent.settings.flags import Argument, Front, add_flags, add_listing_flags, given, rows_for
from ..agent.settings.rows import OFF, Command
from ..errors import NbDurableError, SettingError

__all__ = [
    "CONFIG",
    "SettingTraits",
    "arguments_of",
    "button_resume",
    "flags_and_words",
    "going_on",
    "listing_flags",
    "not_taken",
    "shell_settings",
    "table_flags",
    "taken_by",
    "user_mistakes",
    "values_of",
    "variable_name",
]

T = TypeVar("T")

FRONT: Front = "notebook"

CONFIG: tuple[Setting, ...] = tuple(row for row in TABLE if row.config)
"""The settings ``%config AgentMagics.<name>`` sets: the defaults of every cell."""


class listing_flags(ArgDecorator):
    """``@listing_flags()``: a run listing's filters and page, as ``nb-durable runs`` takes them."""

    def add_to_parser(self, parser: argparse.ArgumentParser, group: Any) -> None:
        add_listing_flags(parser)


class table_flags(ArgDecorator):
    """``@table_flags(command, own)``: the table's flags of ``command``, and the magic's own."""

    def __init__(self, command: Command, own: Mapping[str, Sequence[Argument]] | None = None) -> None:
        self.command: Command = command
        self.own = own

    def add_to_parser(self, parser: argparse.ArgumentParser, group: Any) -> None:
        add_flags(parser, self.command, FRONT, self.own)


class _Worded(TraitType[Any, Any]):
    """A trait that refuses a value of the wrong type as the settings table does, in its words
    (traitlets' own: "The 'max_turns' trait of an AgentMagics instance expected an int")."""

    def error(self, obj: Any, value: Any, error: Exception | None = None, info: str | None = None) -> NoReturn:
        row = _ROWS.get(self.name or "")  # an element's trait has no name: its list says it
        why = row.problem(row.coerce(value)) if row is not None else ""
        if row is None or not why:
            super().error(obj, value, error, info)
        raise TraitError(str(SettingError(setting=row.name, value=value, reason=why, spelled=f"AgentMagics.{row.name}")))


def _worded(base: type[TraitType[Any, Any]]) -> Any:
    """``base`` refusing as the table does, under its own name (``%config AgentMagics`` shows it)."""
    return type(base.__name__, (_Worded, base), {})


_Bool, _Int, _Float, _Enum, _Unicode, _List = (_worded(t) for t in (Bool, Int, Float, Enum, Unicode, List))


def _no_bool(self: Any, obj: Any, value: Any) -> Any:
    # traitlets' Float reads True as 1.0 (a $1 budget, a 1 s stall timeout) before the table's
    # check can see it; every other front end refuses a bool for a number.
    if isinstance(value, bool):
        self.error(obj, value)
    return _Float.validate(self, obj, value)


_Number = type("Float", (_Float,), {"validate": _no_bool})


def _trait(row: Setting) -> Any:
    flag = f" ({row.flag})" if row.flag and row.notebook else ""
    said = row.described_default()
    text = f"{row.help_for(FRONT)}{flag}" + (f"; unset: {said}" if row.front_default is None and said else "")
    default = row.front_default
    # None is let in for every trait: the table's check refuses it where a setting needs a value.
    if row.kind == "switch":
        return _Bool(default, help=text).tag(config=True)
    if row.kind == "whole":
        return _Int(default, allow_none=True, help=text).tag(config=True)
    if row.kind == "number":
        return _Number(default, allow_none=True, help=text).tag(config=True)
    if row.kind == "choice":
        return _Enum(list(row.choices), default, allow_none=True, help=text).tag(config=True)
    if row.kind == "text":
        return _Unicode(default, allow_none=True, help=text).tag(config=True)
    if row.kind == "words":
        return _List(Unicode(), default_value=list(default or ()), allow_none=True, help=text).tag(config=True)
    raise TypeError(f"{row.name} ({row.kind}) cannot be a %config setting")


_ROWS = {row.name: row for row in CONFIG}


class SettingTraits(Magics):
    """The ``%config`` settings of the magics: one checked trait per row of the settings table."""

    # A class body's namespace is the class's own (PEP 667 keeps it so), and the traitlets
    # metaclass makes a trait of each entry, exactly as if each had been written out here.
    locals().update({row.name: _trait(row) for row in CONFIG})

    @validate(*_ROWS)
    def _checked(self, proposal: Any) -> Any:
        row = _ROWS[proposal["trait"].name]
        if row.front_default is None and row.coerce(proposal["value"]) is None:
            return None  # unset, as it started: the front end chooses (the workspace: the demo's, or here)
        try:
            return row.check(proposal["value"], spelled=f"AgentMagics.{row.name}")
        except SettingError as e:
            raise TraitError(str(e)) from None

    def setting(self, name: str) -> Any:
        """The value ``%config`` gave setting ``name`` (its default if none)."""
        return getattr(self, name)

    def configured(self, name: str) -> bool:
        """Whether ``%config`` gave setting ``name`` a value (its default is not one)."""
        return any(name in self.config.get(cls.__name__, {}) for cls in type(self).__mro__)


def values_of(magics: SettingTraits, args: argparse.Namespace, command: Command, *, new_run: bool) -> dict[str, Any]:
    """The settings of one magic call: what ``%config`` set, then the flags given.

    A run that goes on (a resume, a follow-up: not ``new_run``) keeps what it recorded, so
    ``%config`` gives it only a session's and the front end's settings, and the values it set
    of those a resume may change for its session (``max_turns``, ``cache_ttl``). ``--foreground``
    unsets ``background``; the two together are a mistake.
    """
    values: dict[str, Any] = {}
    for row in CONFIG:
        value = magics.setting(row.name)
        if value is None and row.can_be_off and magics.configured(row.name):
            value = OFF  # %config set it to None: off, not "not set" (which would be its default)
        if value is not None and _taken(magics, row, new_run=new_run):
            values[row.name] = value
    try:
        values.update(given(args, command, FRONT))
    except SettingError as e:
        raise UsageError(str(e)) from None
    if values.get("demo"):  # a %config model is for real runs: a demo asked for on the line wins
        for name in MODEL_CHOICES:
            if getattr(args, name, None) is None:
                values.pop(name, None)
    if getattr(args, "foreground", False):
        if getattr(args, "background", None):
            raise UsageError("--background and --foreground contradict each other: give one")
        values["background"] = False
    return values


def _taken(magics: SettingTraits, row: Setting, *, new_run: bool) -> bool:
    """Whether a call takes ``row``'s ``%config`` value: a new run takes every one; a run that
    goes on keeps what it recorded, so only a session's and the front end's, and those a resume
    may change for its session that ``%config`` set."""
    return new_run or not row.recorded or (row.on_resume == "session" and magics.configured(row.name))


def not_taken(magics: SettingTraits, args: argparse.Namespace) -> dict[str, Any]:
    """The values ``%config`` set that a run going on does not take (``_taken``), by name, but
    those the call's line gives; an unset one the front end would choose is no value."""
    values = {}
    for row in CONFIG:
        value = magics.setting(row.name)
        if not magics.configured(row.name) or _taken(magics, row, new_run=False) or getattr(args, row.name, None) is not None:
            continue
        if value is not None or not row.unset:
            values[row.name] = value
    return values


def going_on(magics: SettingTraits, args: argparse.Namespace, command: Command) -> tuple[dict[str, Any], dict[str, Any]]:
    """A run that goes on (``command``: a resume, a follow-up): the values it takes (``values_of``),
    and the ``%config`` values it keeps its recorded ones over (``not_taken``), for it to say."""
    return values_of(magics, args, command, new_run=False), not_taken(magics, args)


def button_resume(magics: SettingTraits | None, store: str | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The values of the resume a timeline's Resume or Fork button starts, and those it keeps
    its recorded ones over: what ``%agent_resume RUN --background`` takes, on the store the run
    was shown from (the run is there, whatever ``%config`` names now). A step in doubt is asked
    by button unless ``%config`` set ``in_doubt``: the person who clicked is there to answer.
    Without the magics (a timeline drawn where none are loaded), only those."""
    values: dict[str, Any] = {"in_doubt": "ask"}
    kept: dict[str, Any] = {}
    if magics is not None:
        taken, kept = going_on(magics, argparse.Namespace(), "resume")  # a click gives no flags
        values = taken if magics.configured("in_doubt") else {**taken, **values}
    return {**values, "store": store, "background": True}, kept


def shell_settings() -> SettingTraits | None:
    """The magics ``%load_ext nb_durable`` registered with this shell (their ``%config``), if any."""
    from IPython import get_ipython

    shell = get_ipython()
    magics = shell.magics_manager.registry.get("AgentMagics") if shell is not None else None
    return magics if isinstance(magics, SettingTraits) else None


def taken_by(args: argparse.Namespace, given_as: Command, command: Command, own: Mapping[str, bool]) -> None:
    """Refuse the flags typed for ``given_as`` that ``command`` has no use for (``%%agent --continue``
    parses ``%%agent``'s flags): the table's rows ``command`` does not reach, and ``own``, a
    front end's own flags by how they are spelled, each with whether it was given."""
    unused = [row.flag for row in rows_for(given_as, FRONT) if not row.reaches(command) and getattr(args, row.name, None) is not None]
    unused += [flag for flag, was_given in own.items() if was_given]
    if unused:
        raise UsageError(
            f"--continue goes on with a finished run as it recorded it (its workspace, tools and model backend), "
            f"so it takes no {', '.join(str(flag) for flag in unused)}: name the run as --continue RUN, change "
            "the model, limits and budget with their flags, or leave out --continue to start a new run"
        )


def arguments_of(magic: Any, line: str) -> argparse.Namespace:
    """The arguments of ``line`` for ``magic`` (a method with ``@magic_arguments``), quotes removed
    as a shell would; a mistake names the help that lists them (``%agent_show?``)."""
    parsed, _ = _parsed(magic, _words(line), known_only=False)
    return parsed


def flags_and_words(magic: Any, line: str) -> tuple[str, str]:
    """``line`` as the flags ``magic`` takes (checked, as a line to type back) and the words after them."""
    argv = _words(line)
    _, rest = _parsed(magic, argv, known_only=True)
    flags = argv[: len(argv) - len(rest)]
    if flags + rest != argv:  # words among the flags: no clean split, so all of it stays flags
        return line.strip(), ""
    return shlex.join(flags), " ".join(rest)


def _words(line: str) -> list[str]:
    try:
        words: list[str] = arg_split(line, posix=True)  # on Windows, IPython splits as Windows does, whatever posix says
    except ValueError as e:
        raise UsageError(f"cannot read the line {line.strip()!r}: {e} (a quote is not closed)") from None
    return words


def _parsed(magic: Any, argv: list[str], *, known_only: bool) -> tuple[argparse.Namespace, list[str]]:
    said = f"%{magic.__name__}? lists what it takes"
    try:
        if known_only:
            parsed, rest = magic.parser.parse_known_args(argv)
        else:
            parsed, rest = magic.parser.parse_args(argv), []
    except UsageError as e:  # IPython's parsers raise it with argparse's own message
        raise UsageError(f"{e} ({said})") from None
    unknown = [word for word in rest if word.startswith("-")]
    if unknown:
        raise UsageError(f"unrecognized arguments: {' '.join(unknown)} ({said})")
    return parsed, list(rest)


def turns(text: str) -> tuple[int, int]:
    """An argparse type: a turn or a range of turns, ``7`` or ``7-93``, as first and last."""
    ends = text.split("-")
    if len(ends) > 2 or not all(end.isdigit() for end in ends) or int(ends[-1]) < int(ends[0]):
        raise argparse.ArgumentTypeError(f"takes a turn or a range of turns, such as 7 or 7-93, not {text!r}")
    return int(ends[0]), int(ends[-1])


def variable_name(text: str) -> str:
    """An argparse type: a name ``-o`` can bind, refused before anything runs (the namespace
    took ``my-var`` or ``class``, which no cell could then read)."""
    if not text.isidentifier() or keyword.iskeyword(text):
        raise argparse.ArgumentTypeError(
            f"takes a variable name (letters, digits and _, not starting with a digit, not a keyword), not {text!r}"
        )
    return text


def user_mistakes(call: Callable[[], T]) -> T:
    """``call()``; a mistake in what was asked (an unknown, locked or diverged run, a bad store, no
    such background run) becomes a ``UsageError``. A run that failed (or is in doubt), or a log
    found damaged, is not a mistake in the cell: it keeps its own error, shown as its message."""
    from ..agent.display.words import in_words_of

    try:
        return call()
    except NbDurableError as e:
        if e.user_mistake:
            raise UsageError(in_words_of("notebook", str(e))) from None
        raise short_paragraph(e) from None


def short_paragraph(error: BaseException) -> BaseException:
    """Make IPython show the error's message alone: it is already the whole story."""
    from ..agent.display.words import in_words_of

    title = type(error).__name__
    error._render_traceback_ = lambda: [f"{title}: {in_words_of('notebook', str(error))}"]  # type: ignore[attr-defined]
    return error
