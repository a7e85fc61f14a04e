"""A scripted model that calls ``before(request)`` first: to hold a model call in flight."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from nb_durable.agent.models.scripted import ScriptedModel

__all__ = ["Hooked"]


class Hooked(ScriptedModel):
    """A scripted model that calls ``before(request)`` first (to hold a call in flight)."""

    def __init__(self, replies: list[Any], before: Callable[[Mapping[str, Any]], object]) -> None:
        super().__init__(replies)
        self.before = before

    def create(
        self,
        request: Mapping[str, Any],
        on_text: Callable[[str], None] | None = None,
        on_thinking: Callable[[str], None] | None = None,
    ) -> dict[str, Any]:
        self.before(request)
        return super().create(request, on_text, on_thinking)
