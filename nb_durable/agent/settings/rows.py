"""A row of the settings table, and what a settings value derives from its rows.

A setting is one field of a frozen dataclass in ``table``, declared with ``setting(...)``
(``columns``): its name and type are the field's, its default and help are the call's, and
so is where it reaches (a flag of which commands, a ``%config`` trait, an environment
variable) and what a resume may do with it. ``rows_of(cls)`` reads a class's fields as
``Setting`` rows; ``SettingsValue`` gives the class its checks, ``but``, ``to_json`` and
``from_json``, all derived from the rows. The kind of a value (a whole number, a choice, words, ...) is read
from the annotation (``kinds``), so the type is written once and checked the same way everywhere.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from ...errors import SettingError
from .columns import _ROW, _UNSET, COMMANDS, Columns, Command, OnResume, Section, setting
from .kinds import Kind, kind_of

__all__ = [
    "COMMANDS",
    "OFF",
    "Columns",
    "Command",
    "OnResume",
    "Section",
    "Setting",
    "SettingsValue",
    "rows_of",
    "setting",
    "sort_values",
]

V = TypeVar("V", bound="SettingsValue")


class _Off:
    __slots__ = ()

    def __repr__(self) -> str:
        return "off"


OFF: Any = _Off()
"""A setting turned off by a person (``--stall-timeout off``): its None, chosen over a default
that is a value. A front end cannot say it with None, which means "not given" there."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Setting(Columns):
    """One row of the settings table: its columns, with what its field says and its defaults resolved."""

    name: str
    section: Section
    kind: Kind
    default: Any
    """The value when unset (for a field with a factory, what the factory makes)."""
    required: bool
    optional: bool
    """Whether None is a value (it always means unset: no limit, the model's own default)."""
    choices: tuple[Any, ...]
    type: Any

    def reaches(self, command: Command) -> bool:
        """Whether the setting is a flag of ``command``."""
        return bool(self.flag) and command in (self.commands or ())

    @property
    def recorded(self) -> bool:
        """Whether the run's log records it (a field of ``AgentSettings``)."""
        return self.section == "recorded"

    @property
    def changeable(self) -> bool:
        """Whether a resume or a follow-up may change it (recorded, or for its session)."""
        return self.on_resume != "no"

    @property
    def can_be_off(self) -> bool:
        """Whether a person may turn it off (its default is a value, and None means none)."""
        return self.optional and self.default is not None

    @property
    def front_default(self) -> Any:
        """What a front end starts from: None where it chooses an unset value itself."""
        return None if self.unset else self.default

    def described_default(self) -> str:
        """The default as help text says it, or '' when there is nothing to say."""
        if self.unset:
            return self.unset
        if self.env:
            return f"${self.env}, else no limit" if self.default is None else f"${self.env}, else {self.default}"
        if self.default is None or self.kind in ("switch", "words") or self.default == "":
            return ""
        return str(self.default)

    def choices_for(self, front: str) -> tuple[Any, ...]:
        """The choices a front end offers (the CLI leaves out those it cannot serve)."""
        return self.cli_choices if front == "cli" and self.cli_choices else self.choices

    def help_for(self, front: str) -> str:
        """What the setting does, as a front end says it: only the choices it offers."""
        if not self.choice_help:
            return self.help
        said = dict(zip(self.choices, self.choice_help, strict=True))
        *first, last = (said[choice] for choice in self.choices_for(front))
        return f"{self.help}: {', '.join(first)}, or {last}" if first else f"{self.help}: {last}"

    # -- values ------------------------------------------------------------------------------

    def coerce(self, value: Any) -> Any:
        """A value as a caller may hand it (a path for text, a list for words) as the row holds it."""
        if self.kind == "text" and isinstance(value, os.PathLike):
            return os.fspath(value)
        if self.kind == "text" and value == "" and (self.optional or self.unset):
            return None  # no text: unset, as a front end spells it (%config AgentMagics.store = "")
        if self.kind in ("words", "items") and isinstance(value, list):
            return tuple(value)
        if self.kind == "words" and isinstance(value, str) and value.strip():
            return (value,)  # one word, not its letters (tags="nightly")
        return value

    def problem(self, value: Any) -> str:
        """What is wrong with ``value`` for this setting ('' if nothing is)."""
        if value is None:
            return "" if self.optional else "must be given (leave it out for its default)"
        kind = self.kind
        if kind == "switch":
            return "" if isinstance(value, bool) else "must be True or False"
        if kind == "whole":
            if isinstance(value, bool) or not isinstance(value, int):
                return "must be a whole number"
            if self.minimum is not None and value < self.minimum:
                return f"must be at least {self.minimum}"
            if self.maximum is not None and value > self.maximum:
                return f"must be at most {self.maximum}"
            return ""
        if kind == "number":
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                return "must be a number"
            if self.unit and not value > 0:
                return f"must be a positive number of {self.unit}"
            if not math.isfinite(value):  # a log holds JSON, which has no infinity
                unset = " (for no limit, leave it unset)" if self.optional and self.default is None else ""
                return f"must be a finite number{f' of {self.unit}' if self.unit else ''}{unset}"
            return ""
        if kind == "text":
            if not isinstance(value, str):
                return "must be text"
            if self.minimum is not None and len(value.strip()) < self.minimum:
                return f"must say {self.help} (it is {'empty' if not value.strip() else 'too short'})"
            return _regex_problem(value) if self.regex else ""
        if kind == "choice":
            return "" if value in self.choices else "must be one of " + ", ".join(map(str, self.choices))
        if kind == "words":
            ok = isinstance(value, tuple) and all(isinstance(w, str) and w.strip() for w in value)
            return "" if ok else "must be non-empty strings"
        if kind == "object" and not isinstance(value, self.type):
            # Taken unchecked, a dict given for a RetryPolicy failed later, inside the run,
            # with an AttributeError naming neither the setting nor the fix.
            name = self.type.__name__
            return f"must be a {name} (such as {name}())"
        if kind == "mapping" and not isinstance(value, Mapping):
            return "must be a mapping (a dict)"
        return ""

    def check(self, value: Any, spelled: str = "") -> Any:
        """``value`` as the row holds it (``coerce``) if this setting may take it, else
        ``SettingError`` in the caller's words, showing the value as it was given."""
        coerced = self.coerce(value)
        why = self.problem(coerced)
        if why:
            shown: object = list(value) if isinstance(value, tuple) else value
            raise SettingError(setting=self.name, value=shown, reason=why, spelled=spelled)
        return coerced

    def parse(self, text: str, spelled: str = "") -> Any:
        """The value a piece of text (an environment variable) spells, checked."""
        try:
            value: Any = int(text) if self.kind == "whole" else float(text) if self.kind == "number" else text
        except ValueError:
            noun = "whole number" if self.kind == "whole" else "number"
            raise SettingError(setting=self.name, value=text, reason=f"must be a {noun}", spelled=spelled) from None
        return self.check(value, spelled)

    def to_json(self, value: Any) -> Any:
        """The value as the log records it."""
        if value is None:
            return None
        if self.kind == "object":
            return value.to_json()
        if self.kind in ("words", "items"):
            return list(value)
        if self.kind == "mapping":
            return {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in value.items()}
        return value

    def from_json(self, raw: Any) -> Any:
        """The value a log recorded (None or missing: the default, or what ``before`` says)."""
        if raw is None:
            if self.optional:
                return None
            return self.default
        kind = self.kind
        if kind == "object":
            return self.type.from_json(raw or {})
        if kind == "words":
            return tuple(str(w) for w in raw)
        if kind == "items":
            return tuple(raw)
        if kind == "mapping":
            return {str(k): (dict(v) if isinstance(v, Mapping) else str(v)) for k, v in dict(raw).items()}
        if kind == "whole":
            return int(raw)
        if kind == "number":
            return float(raw)
        if kind == "text":
            return str(raw)
        if kind == "switch":
            return bool(raw)
        return raw


def _regex_problem(pattern: str) -> str:
    # Checked where the pattern is given: it is compiled only when a run builds its tools, so
    # a bad one was taken silently and failed every run after it with re's traceback.
    try:
        re.compile(pattern)
    except re.error as e:
        return f"must be a regular expression ({e})"
    return ""


class SettingsValue:
    """What a settings class derives from its rows: checks, ``but``, and its JSON."""

    __slots__ = ()
    SECTION: ClassVar[Section]

    def __post_init__(self) -> None:
        for row in rows_of(type(self)):
            value = getattr(self, row.name)
            coerced = row.check(value)
            if coerced is not value:
                object.__setattr__(self, row.name, coerced)

    def but(self: V, **changes: Any) -> V:
        """This value with some settings changed (checked like any)."""
        if not changes:
            return self  # frozen and checked already: asked before every model call, mostly with nothing
        return dataclasses.replace(self, **changes)  # type: ignore[type-var]

    def to_json(self) -> dict[str, Any]:
        """The settings as a run's log records them, in the table's order."""
        return {
            row.name: row.to_json(getattr(self, row.name))
            for row in rows_of(type(self))
            if row.recorded and (row.written_if is None or getattr(self, row.written_if))
        }

    @classmethod
    def from_json(cls: type[V], data: Mapping[str, Any]) -> V:
        """The settings a log recorded; ValueError if one it must hold is missing."""
        values = {}
        for row in rows_of(cls):
            if row.name in data:
                values[row.name] = row.from_json(data[row.name])
            elif row.required:
                raise ValueError(f"these settings have no {row.name}: the run was not started by run_agent")
            elif row.before is not _UNSET:
                values[row.name] = row.before
        return cls(**values)

    def with_environment(self: V, environ: Mapping[str, str] | None = None) -> V:
        """These settings with each unset one that names an environment variable read from it."""
        env = os.environ if environ is None else environ
        found = {}
        for row in rows_of(type(self)):
            text = env.get(row.env, "") if row.env else ""
            if text.strip() and getattr(self, row.name) is None:
                found[row.name] = row.parse(text.strip(), spelled=str(row.env))
        return self.but(**found) if found else self

    def identity(self) -> dict[str, Any]:
        """What must match for a run to be replayed with these settings."""
        names = {row.name for row in rows_of(type(self)) if row.identity}
        return {k: v for k, v in self.to_json().items() if k in names}


_ROWS: dict[type[Any], tuple[Setting, ...]] = {}


def rows_of(cls: type[SettingsValue]) -> tuple[Setting, ...]:
    """The rows a settings class declares, in its fields' order."""
    known = _ROWS.get(cls)
    if known is not None:
        return known
    hints = typing.get_type_hints(cls)
    rows = []
    for field in dataclasses.fields(cls):  # type: ignore[arg-type]
        declared = field.metadata.get(_ROW)
        if declared is None:
            raise TypeError(f"{cls.__name__}.{field.name} is not declared with setting(...)")
        rows.append(_row(cls, field, declared, hints[field.name]))
    _ROWS[cls] = tuple(rows)
    return _ROWS[cls]


def _row(cls: type[SettingsValue], field: dataclasses.Field[Any], declared: Columns, hint: Any) -> Setting:
    row: dict[str, Any] = {f.name: getattr(declared, f.name) for f in dataclasses.fields(Columns)}
    row.update(kind_of(hint), name=field.name, section=cls.SECTION, default=None, required=False)
    if field.default is not dataclasses.MISSING:
        row["default"] = field.default
    elif field.default_factory is not dataclasses.MISSING:
        row["default"] = field.default_factory()
    else:
        row["required"] = True
    flag = "--" + field.name.replace("_", "-") if declared.flag == "" else declared.flag
    commands: tuple[Command, ...] = declared.commands or (
        ("run", "resume", "continue") if declared.on_resume != "no" or cls.SECTION == "session" else ("run",)
    )
    config = declared.config
    if config is None:
        config = bool(flag) and declared.notebook and "run" in commands
    row.update(flag=flag, commands=commands if flag else (), config=config)
    row.update(identity=declared.identity and cls.SECTION == "recorded")
    return Setting(**row)


def sort_values(call: str, values: Mapping[str, Any], *classes: type[SettingsValue]) -> list[dict[str, Any]]:
    """Keywords named after settings, sorted by the class that holds each (None: unset, left out;
    ``OFF``: None, given).

    A name no class holds is a ``TypeError``, as Python says of an unknown keyword argument.
    """
    sorted_: list[dict[str, Any]] = [{} for _ in classes]
    names = [{row.name for row in rows_of(cls)} for cls in classes]
    for name, value in values.items():
        for held, out in zip(names, sorted_, strict=True):
            if name in held:
                if value is not None:
                    out[name] = None if value is OFF else value
                break
        else:
            raise TypeError(f"{call}() got an unexpected keyword argument {name!r}, which names no setting it takes")
    return sorted_
