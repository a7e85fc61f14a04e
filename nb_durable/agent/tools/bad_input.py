"""Bad tool input: strict schemas for the package's own tools, and a count of invalid calls.

The package's own tools (``Tool.strict``: the built-ins, the notebook's) go to the API with
``strict: true`` (GA: the model's input then matches the schema), their ``input_schema`` in
the subset strict mode accepts: the keywords it cannot enforce (``maximum``,
``exclusiveMinimum``, ``default``, ...) are moved into the field's description, as the SDK's
own ``transform_schema`` does, so the model still reads them. Both happen at send time only:
the recorded schemas and every step's request hash stay as they were, and old runs replay.

Whatever strict mode lets through, the registry still checks each call against the whole
schema and sends a violation back to the model as an error result (it corrects itself).
``InvalidCalls`` counts those calls per tool over the run, from the recorded replies (so
replay counts the same), and names the tool that reached the run's limit.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from .registry import ToolRegistry
from .schema import schema_errors

__all__ = ["STRICT_KEYWORDS", "InvalidCalls", "strict_schema", "strict_tools"]

STRICT_KEYWORDS = frozenset(
    {"type", "properties", "required", "additionalProperties", "items", "enum", "const", "anyOf", "allOf",
     "$ref", "$defs", "description", "title", "format", "minItems"}
)  # fmt: skip
"""The JSON-schema keywords strict tool use accepts (the SDK's ``transform_schema``)."""


def strict_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """``schema`` in the subset strict mode accepts; what it cannot enforce is said in the description."""
    out: dict[str, Any] = {}
    said: list[str] = []
    for key, value in schema.items():
        if key == "properties" and isinstance(value, Mapping):
            out[key] = {name: strict_schema(sub) for name, sub in value.items()}
        elif key == "items" and isinstance(value, Mapping):
            out[key] = strict_schema(value)
        elif key in ("anyOf", "allOf") and isinstance(value, list):
            out[key] = [strict_schema(v) for v in value]
        elif key == "minItems" and value not in (0, 1):
            said.append(f"{key}: {value}")
        elif key in STRICT_KEYWORDS:
            out[key] = value
        else:
            said.append(f"{key}: {value}")
    if out.get("type") == "object":
        out["additionalProperties"] = False
    if said:
        description = out.get("description")
        out["description"] = (f"{description}\n\n" if description else "") + "{" + ", ".join(said) + "}"
    return out


def strict_tools(tools: Sequence[Mapping[str, Any]], strict: frozenset[str]) -> list[dict[str, Any]]:
    """The request's ``tools``: those named in ``strict`` marked ``strict: true``, in strict form."""
    return [
        {**t, "strict": True, "input_schema": strict_schema(t.get("input_schema") or {})} if t.get("name") in strict else dict(t)
        for t in tools
    ]


class InvalidCalls:
    """Calls whose input breaks their tool's schema, counted per tool over one run."""

    def __init__(self, registry: ToolRegistry) -> None:
        self.registry = registry
        self.counts: Counter[str] = Counter()

    def saw(self, name: str, tool_input: Any) -> None:
        """Count the call if its input is invalid for a tool the registry has."""
        tool = self.registry.get(name)
        if tool is not None and schema_errors({} if tool_input is None else tool_input, tool.input_schema):
            self.counts[name] += 1

    def over(self, limit: int) -> tuple[str, int] | None:
        """The tool (and its count) whose invalid calls reached ``limit``, if one did."""
        for name, count in sorted(self.counts.items()):
            if count >= limit:
                return name, count
        return None

    def clear(self) -> None:
        """Start counting again (a resume went on past the stop)."""
        self.counts.clear()
