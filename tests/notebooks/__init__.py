"""The tutorial notebooks: what a test needs to run them and read what they printed."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tests.conftest import REPO

NOTEBOOKS = sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
RAISES = "raises-exception"


def tags(cell: Any) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def cell_text(cell: Any) -> str:
    """Everything a code cell showed: streams, the text/plain of displays and results, errors."""
    parts: list[str] = []
    previous: Any = None
    for out in cell.get("outputs", []):
        kind = out["output_type"]
        if kind == "stream" and previous is not None and previous.get("name") == out["name"]:
            # One print can arrive in two stream messages (another thread's message between its
            # writes flushes the first part); front ends show them as one text, and so does this.
            parts[-1] += out["text"]
        elif kind == "stream":
            parts.append(out["text"])
        elif kind in ("display_data", "execute_result"):
            parts.append(str(out["data"].get("text/plain", "")))
        elif kind == "error":
            parts.append(f"{out['ename']}: {out['evalue']}")
        previous = out if kind == "stream" else None
    return "\n".join(parts)


def errors(cell: Any) -> list[str]:
    """The names of the errors a cell raised (at most one, as a kernel reports them).

    A magic's ``UsageError`` sends no error output: IPython prints it to stderr (and the
    cell still fails), so that is where it is found.
    """
    names = []
    for out in cell.get("outputs", []):
        if out["output_type"] == "error":
            names.append(out["ename"])
        elif out["output_type"] == "stream" and out["name"] == "stderr" and out["text"].startswith("UsageError: "):
            names.append("UsageError")
    return names


def with_path(env: dict[str, str], *folders: str | Path) -> dict[str, str]:
    """``env`` with ``folders`` first on PATH."""
    out = dict(env)
    out["PATH"] = os.pathsep.join([*map(str, folders), env.get("PATH") or os.defpath])
    return out
