"""The kind of a setting's value (a whole number, a choice, words, ...), read from its annotation,
so a setting's type is written once and checked the same way everywhere (``rows``)."""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from typing import Any, Literal, get_args, get_origin

__all__ = ["Kind", "kind_of"]

Kind = Literal["switch", "whole", "number", "text", "choice", "words", "items", "mapping", "object"]


def kind_of(hint: Any) -> dict[str, Any]:
    """A row's kind, whether None is allowed, its choices and its type, as an annotation says them."""
    kind, optional, choices, the_type = _kind_and_choices(hint)
    return {"kind": kind, "optional": optional, "choices": choices, "type": the_type}


def _kind_and_choices(hint: Any) -> tuple[Kind, bool, tuple[Any, ...], Any]:
    optional = False
    if get_origin(hint) in (typing.Union, types.UnionType):
        rest = [a for a in get_args(hint) if a is not type(None)]
        optional = len(rest) < len(get_args(hint))
        if len(rest) != 1:
            raise TypeError(f"a setting has one type (or it and None), not {hint}")
        hint = rest[0]
    origin = get_origin(hint)
    if origin is Literal:
        return "choice", optional, get_args(hint), hint
    simple: dict[Any, Kind] = {bool: "switch", int: "whole", float: "number", str: "text"}
    if hint in simple:
        return simple[hint], optional, (), hint
    if origin is tuple:
        return ("words" if get_args(hint) == (str, ...) else "items"), optional, (), hint
    if origin in (dict, Mapping) or hint in (dict, Mapping):
        return "mapping", optional, (), hint
    if hasattr(hint, "from_json") and hasattr(hint, "to_json"):
        return "object", optional, (), hint
    raise TypeError(f"no setting can have the type {hint}")
