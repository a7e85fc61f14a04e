"""JSON schemas for tools: derived from a function's type hints, and checked against input.

The validator covers the subset tool schemas use (type, with integer apart from number and
bool apart from both; required; properties; additionalProperties false; enum; items;
minimum/maximum), so no jsonschema dependency is needed. Its messages name the field and
say what was expected, because they go back to the model as an is_error tool_result.
"""

from __future__ import annotations

import json
import math
import re
import types
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal, Union, get_args, get_origin

__all__ = ["allows_none", "parse_docstring", "schema_errors", "schema_of"]

# --- JSON schema: validation -----------------------------------------------------------------

_JSON_NAMES = {"string": "a string", "integer": "an integer", "number": "a number", "boolean": "a boolean",
               "array": "an array", "object": "an object", "null": "null"}  # fmt: skip


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _is(value: Any, kind: str) -> bool:
    actual = _json_type(value)
    return actual == kind or (kind == "number" and actual == "integer")


def _show(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return f"{_json_type(value)} {text if len(text) <= 60 else text[:57] + '...'}"


def _same(a: Any, b: Any) -> bool:
    # In Python True == 1; in JSON a boolean is never a number.
    return isinstance(a, bool) == isinstance(b, bool) and a == b


_BOUNDS: tuple[tuple[str, Callable[[float, float], bool], str], ...] = (
    ("minimum", lambda v, m: v < m, "below the minimum"),
    ("maximum", lambda v, m: v > m, "above the maximum"),
    ("exclusiveMinimum", lambda v, m: v <= m, "not above"),
    ("exclusiveMaximum", lambda v, m: v >= m, "not below"),
)


def schema_errors(value: Any, schema: Mapping[str, Any], where: str = "input") -> list[str]:
    """Why ``value`` fails ``schema`` (a JSON Schema subset), one message per problem; [] if valid.

    Supported: type (one or a list), enum, const, anyOf, minimum, maximum, exclusiveMinimum,
    exclusiveMaximum, minLength, maxLength, items, minItems, maxItems, properties, required,
    additionalProperties (false or a schema). Other keywords are ignored.
    """
    kinds = schema.get("type")
    if kinds is not None:
        kinds = [kinds] if isinstance(kinds, str) else list(kinds)
        if not any(_is(value, k) for k in kinds):
            return [f"{where}: expected {' or '.join(_JSON_NAMES.get(k, k) for k in kinds)}, got {_show(value)}"]
    if "enum" in schema and not any(_same(value, e) for e in schema["enum"]):
        allowed = ", ".join(json.dumps(e) for e in schema["enum"])
        return [f"{where}: {_show(value)} is not one of the allowed values: {allowed}"]
    if "const" in schema and not _same(value, schema["const"]):
        return [f"{where}: must be {json.dumps(schema['const'])}, got {_show(value)}"]
    if "anyOf" in schema:
        options = [schema_errors(value, s, where) for s in schema["anyOf"]]
        if all(options):
            return [f"{where}: matches none of the allowed forms ({'; or '.join(o[0] for o in options)})"]
    errors: list[str] = []
    if _is(value, "number"):
        for key, fails, says in _BOUNDS:
            if key in schema and fails(value, schema[key]):
                errors.append(f"{where}: {value} is {says} {schema[key]}")
        if isinstance(value, float) and not math.isfinite(value):
            errors.append(f"{where}: {value} is not a finite number")
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            errors.append(f"{where}: must have at least {schema['minLength']} characters, got {len(value)}")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            errors.append(f"{where}: must have at most {schema['maxLength']} characters, got {len(value)}")
    if isinstance(value, (list, tuple)):
        if len(value) < schema.get("minItems", 0):
            errors.append(f"{where}: must have at least {schema['minItems']} items, got {len(value)}")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            errors.append(f"{where}: must have at most {schema['maxItems']} items, got {len(value)}")
        if isinstance(schema.get("items"), Mapping):
            for i, item in enumerate(value):
                errors += schema_errors(item, schema["items"], f"{where}[{i}]")
    if isinstance(value, dict):
        props: Mapping[str, Any] = schema.get("properties") or {}
        for name in schema.get("required") or ():
            if name not in value:
                errors.append(f"{where}: missing required field {name!r}")
        extra = schema.get("additionalProperties", True)
        for name, item in value.items():
            if name in props:
                errors += schema_errors(item, props[name], f"{where}.{name}")
            elif extra is False:
                known = ", ".join(sorted(props)) or "none"
                errors.append(f"{where}: unexpected field {name!r} (the fields are: {known})")
            elif isinstance(extra, Mapping):
                errors += schema_errors(item, extra, f"{where}.{name}")
    return errors


# --- JSON schema: derivation from type hints -------------------------------------------------

_SCALARS: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}


def schema_of(hint: Any, where: str) -> dict[str, Any]:
    """The JSON schema of one parameter's type hint."""
    origin, args = get_origin(hint), get_args(hint)
    if hint is Any:
        return {}
    if hint in _SCALARS:
        return {"type": _SCALARS[hint]}
    if origin is Annotated:
        out = schema_of(args[0], where)
        notes = [a for a in args[1:] if isinstance(a, str)]
        if notes:
            out["description"] = " ".join(notes)
        return out
    if origin is Literal:
        if not all(isinstance(a, (str, int, float, bool)) or a is None for a in args):
            raise TypeError(f"{where}: Literal values must be JSON scalars, not {args!r}")
        kinds = {_json_type(a) for a in args}
        return {"type": kinds.pop(), "enum": list(args)} if len(kinds) == 1 else {"enum": list(args)}
    if origin is Union or (hasattr(types, "UnionType") and origin is types.UnionType):
        options = [a for a in args if a is not type(None)]
        if len(options) == 1:
            return schema_of(options[0], where)  # Optional[X]: X, and not required
        return {"anyOf": [schema_of(a, where) for a in options]}
    if hint is list or origin is list:
        return {"type": "array", "items": schema_of(args[0], where)} if args else {"type": "array"}
    if hint is dict or origin is dict:
        if args and args[0] is not str:
            raise TypeError(f"{where}: JSON object keys are strings; use dict[str, ...]")
        return {"type": "object", "additionalProperties": schema_of(args[1], where)} if args else {"type": "object"}
    raise TypeError(
        f"{where}: the type {hint!r} has no JSON schema here; use str, int, float, bool, list[...], "
        "dict[str, ...], Literal[...], Optional[...] or Annotated[..., 'description']"
    )


_ARG_LINE = re.compile(r"^(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_SPHINX_LINE = re.compile(r"^:param\s+(?:[^:]*\s)?(\w+)\s*:\s*(.*)$")


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The first paragraph, and parameter descriptions from an ``Args:`` section or ``:param x:``."""
    text = doc.strip()
    summary = " ".join(line.strip() for line in re.split(r"\n\s*\n", text, maxsplit=1)[0].splitlines()) if text else ""
    params: dict[str, str] = {}
    in_args, entry_indent, current = False, -1, ""
    for line in text.splitlines():
        stripped, indent = line.strip(), len(line) - len(line.lstrip())
        sphinx = _SPHINX_LINE.match(stripped)
        if sphinx:
            params[sphinx.group(1)] = sphinx.group(2).strip()
        elif stripped in ("Args:", "Arguments:", "Parameters:"):
            in_args, entry_indent, current = True, -1, ""
        elif in_args:
            entry = _ARG_LINE.match(stripped)
            if entry and (entry_indent < 0 or indent <= entry_indent):
                entry_indent, current = indent, entry.group(1)
                params[current] = entry.group(2).strip()
            elif current and stripped and indent > entry_indent:
                params[current] = f"{params[current]} {stripped}".strip()
            else:
                in_args = False  # a blank line or the next section ends the entries
    return summary, params


def allows_none(hint: Any) -> bool:
    """Whether the hint admits None (``Optional[X]``, ``X | None``, also inside ``Annotated``)."""
    if get_origin(hint) is Annotated:
        return allows_none(get_args(hint)[0])
    return type(None) in get_args(hint)
