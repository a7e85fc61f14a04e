"""How much step detail a timeline's saved form holds (``DETAIL_BUDGET``), which rows keep theirs,
and what the rows left out say.

A cell's output is saved in the notebook, and a long run's every row with its input, output and
thinking made a 1,000-step run a 14 MB notebook, which JupyterLab opens slowly and git cannot
diff. Past the budget, every row still shows its one-line summary (state, title, timing, tokens),
so the page tells the whole run; the first and the last steps keep their detail, the middle's is
left out, and a note says how to see it from the log, which still holds it all.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["DETAIL_BUDGET", "gap", "gap_note", "row_note", "turns_text"]

DETAIL_BUDGET = 200_000
"""Characters of step detail (thinking, input, output, error, a child's timeline) one timeline's
saved form holds; past it, the middle steps' detail is left out."""

_WHOLE = "%agent_show {run_id} --turns {turns}"


def gap(sizes: Sequence[int], budget: int | None = DETAIL_BUDGET) -> tuple[int, int]:
    """The rows ``[start, end)`` whose detail is left out, by the size of each row's detail; an
    empty range when all fit. The first and the last rows always keep theirs; then rows from
    either end in turn, while they fit, so what is left out is one run of steps in the middle."""
    count = len(sizes)
    if budget is None or count <= 2 or sum(sizes) <= budget:
        return count, count
    head, tail = 1, count - 1
    room = budget - sizes[0] - sizes[-1]
    while head < tail:
        took = False
        if sizes[head] <= room:
            room -= sizes[head]
            head, took = head + 1, True
        if head < tail and sizes[tail - 1] <= room:
            room -= sizes[tail - 1]
            tail, took = tail - 1, True
        if not took:
            break
    return head, tail


def turns_text(first: int, last: int) -> str:
    """A range of turns as ``%agent_show --turns`` takes it: ``7`` or ``7-93``."""
    return str(first) if first == last else f"{first}-{last}"


def row_note(run_id: str, turn: int) -> str:
    """What a row whose detail is left out says, opened."""
    return f"detail left out of this page: {_WHOLE.format(run_id=run_id, turns=turn)} shows it"


def gap_note(run_id: str, steps: int, first: int, last: int) -> str:
    """The line where the rows left out begin: how many, why, and how to see them whole."""
    turns = turns_text(first, last)
    return (
        f"{steps:,} steps (turn{'s' if first != last else ''} {turns}): detail left out to keep this notebook small (the log holds it whole); "
        f"see it with {_WHOLE.format(run_id=run_id, turns=turns)} (or fewer turns), or the whole run as a notebook "
        f"with nb-durable export {run_id}"
    )
