"""The id of an agent step: ``StepId`` owns its format (``model:3``, ``tool:3:0:toolu_x``,
``approval:3:0:toolu_x``, ``delegate:3:1:toolu_y``, and at a point that took more than one
change or follow-up, ``settings:3:1``): nothing else formats or splits those strings, and
``words`` is the one wording every front end uses for a step."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

__all__ = ["StepId", "StepKind"]

StepKind = Literal["model", "tool", "approval", "settings", "user", "delegate", "compact"]
_KINDS: tuple[StepKind, ...] = get_args(StepKind)
_TURN_KINDS: tuple[StepKind, ...] = ("model", "settings", "user", "compact")
"""Kinds whose id is just ``kind:turn``: a model call, and the settings change, follow-up
message or compaction recorded before the model call of that turn."""
_PAID_KINDS: tuple[StepKind, ...] = ("model", "compact")
"""Kinds that are a call to the model, so paid for: a turn's model call, and a compaction's
summarising call."""
_REPEATED_KINDS: tuple[StepKind, ...] = ("settings", "user")
"""Kinds a point may hold more than once (a second resume, or a second follow-up, before the
model call of the same turn): the ``index``-th after the first is ``kind:turn:index``."""


@dataclass(frozen=True, slots=True)
class StepId:
    """The id of an agent step: the model call of a turn, or a tool call (or its approval)."""

    kind: StepKind
    turn: int
    index: int = 0
    tool_use_id: str = ""

    @classmethod
    def model(cls, turn: int) -> StepId:
        """The model call of ``turn``."""
        return cls("model", turn)

    @classmethod
    def tool(cls, turn: int, index: int, tool_use_id: str) -> StepId:
        """The ``index``-th tool call of ``turn``."""
        return cls("tool", turn, index, tool_use_id)

    @classmethod
    def approval(cls, turn: int, index: int, tool_use_id: str) -> StepId:
        """The person's approval of the ``index``-th tool call of ``turn``."""
        return cls("approval", turn, index, tool_use_id)

    @classmethod
    def delegate(cls, turn: int, index: int, tool_use_id: str) -> StepId:
        """The start of the child run the ``index``-th tool call of ``turn`` delegates to."""
        return cls("delegate", turn, index, tool_use_id)

    @classmethod
    def settings(cls, turn: int, index: int = 0) -> StepId:
        """The ``index``-th change of the run's settings (a resume's new model, limit or budget) before ``turn``."""
        return cls("settings", turn, index)

    @classmethod
    def user(cls, turn: int, index: int = 0) -> StepId:
        """The ``index``-th follow-up message from the person before the model call of ``turn``."""
        return cls("user", turn, index)

    @classmethod
    def compact(cls, turn: int) -> StepId:
        """The compaction of the conversation before the model call of ``turn``."""
        return cls("compact", turn)

    @classmethod
    def parse(cls, text: str) -> StepId:
        """The id a string spells; ValueError if it is not an agent step's id."""
        kind, _, rest = text.partition(":")
        parts = rest.split(":", 2)
        if kind not in _KINDS or not parts[0].isdigit():
            raise ValueError(f"{text!r} is not an agent step id")
        if kind in _REPEATED_KINDS and len(parts) == 2 and parts[1].isdigit() and parts[1][0] != "0":
            return cls(kind, int(parts[0]), int(parts[1]))
        if kind in _TURN_KINDS:
            if len(parts) != 1:
                raise ValueError(f"{text!r} is not an agent step id")
            return cls(kind, int(parts[0]))
        if len(parts) != 3 or not parts[1].isdigit() or not parts[2]:
            raise ValueError(f"{text!r} is not an agent step id")
        return cls(kind, int(parts[0]), int(parts[1]), parts[2])

    @classmethod
    def is_agent_step(cls, text: str) -> bool:
        """Whether a recorded step id is one of the agent's."""
        try:
            cls.parse(text)
        except ValueError:
            return False
        return True

    @classmethod
    def is_paid(cls, text: str) -> bool:
        """Whether a recorded step id is a model call (a turn's, or a compaction's): a step its usage was paid for."""
        try:
            return cls.parse(text).kind in _PAID_KINDS
        except ValueError:
            return False

    def words(self, *, changed: bool = True) -> str:
        """The step as a person reads it, the one wording every front end uses: ``model turn 3``,
        ``tool call 1 of turn 2``, ``settings change before turn 3`` (``resume before turn 3``
        for a settings step that changed nothing: a resume's mark, a worker's)."""
        if self.kind == "model":
            return f"model turn {self.turn}"
        nth = f" {self.index + 1}" if self.index else ""
        if self.kind == "settings":
            return f"{'settings change' if changed else 'resume'}{nth} before turn {self.turn}"
        if self.kind == "user":
            return f"follow-up{nth} before turn {self.turn}"
        if self.kind == "compact":
            return f"compaction before turn {self.turn}"
        call = f"tool call {self.index + 1} of turn {self.turn}"
        if self.kind == "delegate":
            return f"child run of {call}"
        return call if self.kind == "tool" else f"approval of {call}"

    def __str__(self) -> str:
        if self.kind in _TURN_KINDS:
            return f"{self.kind}:{self.turn}:{self.index}" if self.index else f"{self.kind}:{self.turn}"
        return f"{self.kind}:{self.turn}:{self.index}:{self.tool_use_id}"
