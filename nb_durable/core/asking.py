"""What a run's writer waits on while it asks a person: a live mark on its lease, never a record.

A run waits for a person (an approval of a tool call, a decision on a step in doubt) while its
writer holds the lease, so waiting is a state of the writer, not a fact of the log: the writer
marks its lease with an ``Asking`` as it asks and clears the mark when the answer comes
(``StoreWriter.mark_asking``; each store keeps the mark where it keeps the lease's holder, under
the key ``asking``). A reader in any process then reports ``waiting``, not ``running``, for that
run (``core.runs``). The mark lives and dies with the lease: a holder that dies, even by SIGKILL,
takes it along, and the next writer's lease starts without one, so a stale "waiting" cannot
outlive its asker. Replay and the log are untouched: nothing about waiting is ever recorded.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

__all__ = ["ASKING", "Asking", "AskingKind", "asking_of"]

AskingKind = Literal["approval", "in_doubt"]
"""approval: may a tool call run? in_doubt: what to do with a step whose outcome is unknown."""

ASKING = "asking"
"""The key of a lease holder's description (pid, host, since) that carries its ``Asking``."""


@dataclass(frozen=True, slots=True)
class Asking:
    """What a writer asks a person: the step, the kind of question, the tool, since when."""

    step_id: str
    kind: AskingKind
    tool: str = ""
    since: float = 0.0

    @classmethod
    def now(cls, step_id: str, kind: AskingKind, tool: str = "") -> Asking:
        """The question asked from now on."""
        return cls(step_id, kind, tool, round(time.time(), 3))

    def to_json(self) -> dict[str, Any]:
        """The mark as the lease keeps it."""
        return {"step": self.step_id, "kind": self.kind, "tool": self.tool, "since": self.since}

    def __str__(self) -> str:
        tool = f" ({self.tool})" if self.tool else ""
        if self.kind == "approval":
            return f"approval of step {self.step_id}{tool}"
        return f"a decision on step {self.step_id}{tool}, in doubt"

    def in_words(self) -> str:
        """'waiting since 12:04:05 for approval of step approval:1:0:t1 (run_bash)'."""
        when = datetime.fromtimestamp(self.since).strftime("%H:%M:%S") if self.since else ""
        return f"waiting{f' since {when}' if when else ''} for {self}"


def asking_of(holder: Mapping[str, Any] | None) -> Asking | None:
    """The question a lease's holder is waiting on, if it marked one (anything malformed is none)."""
    mark = (holder or {}).get(ASKING)
    if not isinstance(mark, Mapping):
        return None
    step, kind, tool, since = mark.get("step"), mark.get("kind"), mark.get("tool", ""), mark.get("since", 0.0)
    if not isinstance(step, str) or kind not in ("approval", "in_doubt"):
        return None
    return Asking(
        step, kind, tool if isinstance(tool, str) else "", float(since) if isinstance(since, (int, float)) else 0.0
    )
