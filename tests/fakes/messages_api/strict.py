"""Strict tool use (GA), as the real API has it: ``strict: true`` on a tool.

* A strict tool's ``input_schema`` must stay inside the subset strict mode can enforce
  (``type``, ``properties``, ``required``, ``additionalProperties: false`` on every object,
  ``items``, ``enum``, ``const``, ``anyOf``, ``allOf``, ``$ref``/``$defs``, ``description``,
  ``title``, ``format``, ``minItems`` of 0 or 1): anything else (``maximum``, ``default``,
  ``minLength``, ...) is a 400, as is a ``strict`` that is not a boolean.
* The API then guarantees the model's input matches the schema, so a scripted reply whose
  tool input breaks a strict tool's schema is a mistake in the test: ``strict_violation``
  names it (the server answers it with a 400 that says so, as it does an unscripted turn).
"""

from __future__ import annotations

from typing import Any

ALLOWED = frozenset(
    {"type", "properties", "required", "additionalProperties", "items", "enum", "const", "anyOf", "allOf",
     "$ref", "$defs", "description", "title", "format", "minItems"}
)  # fmt: skip
_TYPES: dict[str, type | tuple[type, ...]] = {"string": str, "integer": int, "number": (int, float), "boolean": bool, "object": dict, "array": list}


def _schema_problem(schema: Any, where: str) -> str | None:
    if not isinstance(schema, dict):
        return f"{where}: Input should be a valid dictionary"
    for key in schema:
        if key not in ALLOWED:
            return f"{where}: `{key}` is not supported in strict mode"
    if schema.get("minItems") not in (None, 0, 1):
        return f"{where}: `minItems` other than 0 or 1 is not supported in strict mode"
    if schema.get("type") == "object" and schema.get("additionalProperties") is not False:
        return f"{where}: `additionalProperties` must be set to false in strict mode"
    for name, sub in (schema.get("properties") or {}).items():
        problem = _schema_problem(sub, f"{where}.properties.{name}")
        if problem:
            return problem
    if isinstance(schema.get("items"), dict):
        return _schema_problem(schema["items"], f"{where}.items")
    return None


def check_strict_tools(body: dict[str, Any]) -> str | None:
    """None if every tool's ``strict`` is a boolean and every strict schema is in the subset, else the 400."""
    tools = body.get("tools")
    for i, tool in enumerate(tools if isinstance(tools, list) else []):
        if not isinstance(tool, dict) or "strict" not in tool:
            continue
        if not isinstance(tool["strict"], bool):
            return f"tools.{i}.custom.strict: Input should be a valid boolean"
        if tool["strict"]:
            problem = _schema_problem(tool.get("input_schema"), f"tools.{i}.custom.input_schema")
            if problem:
                return problem
    return None


def _input_problem(value: Any, schema: dict[str, Any], where: str) -> str | None:
    kind = schema.get("type")
    expected = _TYPES.get(str(kind))
    if expected is not None and (not isinstance(value, expected) or (kind in ("integer", "number") and isinstance(value, bool))):
        return f"{where} is not {kind}"
    if "enum" in schema and value not in schema["enum"]:
        return f"{where} is not one of {schema['enum']}"
    if kind == "object" and isinstance(value, dict):
        properties = schema.get("properties") or {}
        for name in schema.get("required") or []:
            if name not in value:
                return f"{where} lacks {name}"
        for name, item in value.items():
            if name not in properties:
                return f"{where} has {name}, which the schema does not allow"
            problem = _input_problem(item, properties[name], f"{where}.{name}")
            if problem:
                return problem
    return None


def strict_violation(body: dict[str, Any], content: list[dict[str, Any]]) -> str | None:
    """What a scripted reply's tool call does that strict mode would never let the model do, if anything."""
    strict = {t.get("name"): t for t in body.get("tools") or [] if isinstance(t, dict) and t.get("strict") is True}
    for block in content:
        tool = strict.get(block.get("name")) if block.get("type") == "tool_use" else None
        if tool is not None:
            problem = _input_problem(block.get("input"), tool.get("input_schema") or {}, f"{block.get('name')} input")
            if problem:
                return f"the scripted reply breaks a strict tool's schema: {problem}"
    return None
