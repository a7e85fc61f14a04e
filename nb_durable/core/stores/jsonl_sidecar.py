"""The layout of the JSONL store's sidecar (``jsonl_index``): its rows as written and as read back.

Version 3 (a sidecar of any other version or shape is rebuilt from the logs, as a missing one is)::

    {"version": 3,
     "columns": ["size", "mtime", "lines", "status", ..., "rule"],   a log's size and mtime (ns), then
                                                                     IndexRow's fields after run_id
     "parts": [[name, value], ...],        each distinct setting of the runs, once
     "runs": [run_id, ...],
     "values": [[size, ...], [mtime, ...], ...]}    a list per column, a value per run; a run's
                                                    settings are the places of its parts ("0,1,5"),
                                                    its output and figures JSON texts

A run's settings are most of its row (the system prompt, every tool's schema), and the runs of
a notebook or a batch share all of them but the task: version 2 held each run's settings whole
(12.8 MB at 10,000 runs), and a fresh listing of 100,000 runs spent 8 s parsing 108 MB and making
every row of it. Here a run's settings are the places of its parts (``Parts``), and the values are
by column: the JSON parses to few objects (none per run but its tags), and a row is made only when
asked for (``Stored.row``), a listing filtering and ordering the runs by their columns first
(``Stored.peeks``).

A row's settings are made from the parts only when read (``Settings``), each row its own copy:
a caller changing one run's settings changes no other run's, nor the parts.
"""

from __future__ import annotations

import json
import operator
import threading
from collections.abc import Iterator, Mapping
from dataclasses import fields
from itertools import repeat
from typing import Any, NamedTuple

from ..index.rows import IndexRow
from ..steps import RUN_STATUSES, RunStatus

__all__ = ["COLUMNS", "VERSION", "Entry", "Parts", "Peek", "Settings", "Stored", "data_of"]

VERSION = 3
"""The sidecar's layout. A sidecar of another (an older nb_durable's) is rebuilt from the logs."""

FIELDS = tuple(f.name for f in fields(IndexRow))[1:]
COLUMNS = ("size", "mtime", *FIELDS)
"""A stored run's values: its log's size and mtime in ns, then its row's fields after its run_id."""

Entry = tuple[int, int, IndexRow | int]
"""The (size, mtime) of a run's log and its row made from it, or the row's place in the ``Stored`` read."""

_SETTINGS, _TAGS, _OUTPUT, _FIGURES = (2 + FIELDS.index(name) for name in ("settings", "tags", "output", "figures"))
_values = operator.attrgetter(*FIELDS)

_NUMBER = (int, float)
_TYPES: dict[str, Any] = {
    "lines": int, "status": str, "ended": bool, "pending": bool, "steps": int, "completed_steps": int,
    "priority": int, "tags": list, "settings": str, "output": str, "figures": str, "child": bool, "rule": str,
    "started_at": (*_NUMBER, type(None)), "updated_at": (*_NUMBER, type(None)), "queued_at": (*_NUMBER, type(None)),
    "batch": (str, type(None)), "parent": (str, type(None)), "resumed_by": (str, type(None)), "error": (str, type(None)),
    "open_decision": (str, type(None)),
    "unfinished_starts": int,
}  # fmt: skip
_KINDS = (int, int, *(_TYPES[name] for name in FIELDS))
"""The type of each value of a stored row: what ``row_of`` gives it (a hand edit may give another)."""

_SCALARS = (str, int, float, bool, type(None))
_encode = json.JSONEncoder(separators=(",", ":")).encode


def _copy(value: Any) -> Any:
    """A copy of a setting's value, its dicts and lists new. By a stack, not by recursion: a
    value nested some 500 deep (a tool's schema) exceeded Python's recursion limit, and made
    every listing of the folder fail, where JSON writes and reads it (the log holds it)."""
    if not isinstance(value, (dict, list)):
        return value
    top: Any = {} if isinstance(value, dict) else []
    todo: list[tuple[Any, Any]] = [(value, top)]
    while todo:
        source, made = todo.pop()
        for key, item in source.items() if isinstance(source, dict) else enumerate(source):
            copied = item
            if isinstance(item, (dict, list)):
                copied = {} if isinstance(item, dict) else []
                todo.append((item, copied))
            if isinstance(made, dict):
                made[key] = copied
            else:
                made.append(copied)
    return top


class Parts:
    """The distinct settings of a sidecar's runs, each one (name, value) once, which rows refer to."""

    def __init__(self, values: list[Any] | None = None) -> None:
        self.values: list[Any] = [] if values is None else values
        self._places: dict[tuple[str, type, Any], int] | None = None
        self._lock = threading.Lock()  # a worker's threads index runs into one store's parts

    def refs(self, settings: Mapping[str, Any]) -> list[int]:
        """The places of the settings' parts, each added if it is new."""
        if isinstance(settings, Settings) and settings.parts is self:
            return settings.refs
        out = []
        with self._lock:
            if self._places is None:
                self._places = {_key(name, value): at for at, (name, value) in enumerate(self.values)}
            for name, value in settings.items():
                key = _key(name, value)
                at = self._places.get(key)
                if at is None:
                    at = self._places[key] = len(self.values)
                    self.values.append((name, _copy(value)))  # the caller's objects stay the caller's
                out.append(at)
        return out


def _key(name: str, value: Any) -> tuple[str, type, Any]:
    # The type too: True, 1 and 1.0 are equal keys of a dict, yet other settings.
    return (name, type(value), value) if isinstance(value, _SCALARS) else (name, type(value), _encode(value))


class Settings(Mapping[str, Any]):
    """A run's settings as its row keeps them: places in the sidecar's parts, made a dict when first read."""

    __slots__ = ("_made", "parts", "refs")

    def __init__(self, parts: Parts, refs: list[int]) -> None:
        self.parts = parts
        self.refs = refs
        self._made: dict[str, Any] | None = None

    def _dict(self) -> dict[str, Any]:
        made = self._made
        if made is None:
            values = self.parts.values
            made = self._made = {name: _copy(value) for name, value in (values[at] for at in self.refs)}
        return made

    def __getitem__(self, name: str) -> Any:
        return self._dict()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._dict())

    def __len__(self) -> int:
        return len(self._dict())

    def __repr__(self) -> str:
        return repr(self._dict())

    def __reduce__(self) -> tuple[Any, ...]:
        # Copied or pickled as the dict it is, not with every run's parts (and their lock).
        return (dict, (self._dict(),))


class Peek(NamedTuple):
    """What a listing filters and orders a stored run by (``index.listing.Listed``), its row unmade."""

    run_id: str
    status: RunStatus
    ended: bool
    tags: tuple[str, ...]
    batch: str | None
    parent: str | None
    updated_at: float | None


_PEEKED = [2 + FIELDS.index(name) for name in Peek._fields[1:]]


class Stored:
    """A sidecar as read: its runs' values by column, checked by column (``read``); a run's row is
    made when asked for, and checked then for what was not (its settings' parts, its figures)."""

    def __init__(self, parts: Parts | None = None, run_ids: list[str] | None = None, columns: list[list[Any]] | None = None) -> None:
        self.parts = Parts() if parts is None else parts
        self.run_ids: list[str] = [] if run_ids is None else run_ids
        self.columns: list[list[Any]] = [[] for _ in COLUMNS] if columns is None else columns
        self.rules = set(self.columns[-1])
        """The rules that made the rows (one, unless nb_durable or its counter changed meanwhile)."""

    @classmethod
    def read(cls, data: Any) -> Stored:
        """The sidecar a JSON value holds; ValueError if it is of another layout, or any value
        is not of the type ``row_of`` gives it (a hand edit, another program): it is rebuilt."""
        if not isinstance(data, dict) or data.get("version") != VERSION or data.get("columns") != list(COLUMNS):
            raise ValueError("a sidecar of another layout")
        values, run_ids, columns = data["parts"], data["runs"], data["values"]
        if not (isinstance(values, list) and isinstance(run_ids, list) and isinstance(columns, list) and len(columns) == len(COLUMNS)):
            raise ValueError("a damaged sidecar")
        if not all(type(part) is list and len(part) == 2 and type(part[0]) is str for part in values):
            raise ValueError("damaged parts")
        count = len(run_ids)
        if not all(map(isinstance, run_ids, repeat(str))):
            raise ValueError("a damaged run id")
        for column, kind in zip(columns, _KINDS, strict=True):
            if not isinstance(column, list) or len(column) != count or not all(map(isinstance, column, repeat(kind))):
                raise ValueError("a damaged column")
        if not set(columns[2 + FIELDS.index("status")]) <= set(RUN_STATUSES):
            raise ValueError("a status there is not")
        if not all(type(tag) is str for tags in columns[_TAGS] for tag in tags):
            raise ValueError("a damaged tag")
        columns[_TAGS] = list(map(tuple, columns[_TAGS]))
        return cls(Parts(values), run_ids, columns)

    def entries(self) -> dict[str, Entry]:
        """Each stored run's entry: its log's size and mtime, and its place here."""
        sizes, mtimes = self.columns[0], self.columns[1]
        return dict(zip(self.run_ids, zip(sizes, mtimes, range(len(sizes)), strict=True), strict=True))

    def key(self, at: int) -> tuple[int, int]:
        """The (size, mtime) of the log the row at ``at`` was made from."""
        return self.columns[0][at], self.columns[1][at]

    def rule(self, at: int) -> str:
        """The rule that made the row at ``at`` (``IndexRow.rule``)."""
        rule: str = self.columns[-1][at]
        return rule

    def peeks(self, places: list[tuple[str, int]]) -> list[tuple[Peek, int]]:
        """The listed values of the rows at these places, each with its place."""
        status, ended, tags, batch, parent, updated_at = (self.columns[column] for column in _PEEKED)
        return [(Peek(run_id, status[at], ended[at], tags[at], batch[at], parent[at], updated_at[at]), at) for run_id, at in places]

    def refs(self, at: int) -> list[int] | None:
        """The places of the settings of the row at ``at`` in ``parts``, or None if one is not there."""
        try:
            refs = [int(ref) for ref in self.columns[_SETTINGS][at].split(",")] if self.columns[_SETTINGS][at] else []
        except ValueError:
            return None
        count = len(self.parts.values)
        return refs if all(0 <= ref < count for ref in refs) else None

    def row(self, run_id: str, at: int) -> IndexRow | None:
        """The row at ``at``, or None if its settings' parts, output or figures are damaged (made from its log then)."""
        refs = self.refs(at)
        values = [column[at] for column in self.columns]
        try:
            values[_OUTPUT], values[_FIGURES] = json.loads(values[_OUTPUT]), json.loads(values[_FIGURES])
        except ValueError:
            return None
        figures = values[_FIGURES]
        if refs is None or not isinstance(figures, dict) or not all(isinstance(v, _NUMBER) for v in figures.values()):
            return None
        values[_SETTINGS] = Settings(self.parts, refs)
        return IndexRow(run_id, *values[2:])


def data_of(entries: Mapping[str, Entry], stored: Stored) -> dict[str, Any]:
    """The sidecar's JSON for these runs (a row made, or one still unmade in ``stored``), with
    only the parts they refer to, each once: those of runs deleted since are left behind."""
    parts: list[Any] = []
    places: dict[int, list[int]] = {}  # per parts (by id): each part's place in the new ones, -1 until used

    def renumbered(table: Parts, refs: list[int]) -> str:
        place = places.get(id(table))
        if place is None or len(place) < len(table.values):  # another thread may add parts meanwhile
            place = places[id(table)] = (place or []) + [-1] * (len(table.values) - len(place or []))
        out = []
        for ref in refs:
            new = place[ref]
            if new < 0:
                new = place[ref] = len(parts)
                parts.append(table.values[ref])
            out.append(new)
        return ",".join(map(str, out))

    run_ids: list[str] = []
    rows: list[list[Any]] = []
    for run_id, (size, mtime, row) in entries.items():
        if isinstance(row, int):
            refs = stored.refs(row)
            if refs is None:
                continue  # a damaged stored row is made from its log by the next reader
            values = [column[row] for column in stored.columns]
            values[_SETTINGS] = renumbered(stored.parts, refs)
        else:
            values = [size, mtime, *_values(row)]
            values[_OUTPUT], values[_FIGURES] = _encode(values[_OUTPUT]), _encode(values[_FIGURES])
            settings = row.settings
            if not isinstance(settings, Settings):
                settings = Settings(stored.parts, stored.parts.refs(settings))
            values[_SETTINGS] = renumbered(settings.parts, settings.refs)
        run_ids.append(run_id)
        rows.append(values)
    columns = [list(column) for column in zip(*rows, strict=True)] if rows else [[] for _ in COLUMNS]
    return {"version": VERSION, "columns": COLUMNS, "parts": parts, "runs": run_ids, "values": columns}
