"""The tutorial notebooks: what a test needs to run them and read what they printed."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

from tests.conftest import REPO

NOTEBOOKS = sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
RAISES = "raises-exception"


def tags(cell: Any) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def cell_text(cell: Any) -> str:
    """Everything a code cell showed: streams, the text/plain of displays and results, errors."""
    parts = []
    for out in cell.get("outputs", []):
        kind = out["output_type"]
        if kind == "stream":
            parts.append(out["text"])
        elif kind in ("display_data", "execute_result"):
            parts.append(str(out["data"].get("text/plain", "")))
        elif kind == "error":
            parts.append(f"{out['ename']}: {out['evalue']}")
    return "\n".join(parts)


def errors(cell: Any) -> list[str]:
    """The names of the errors a cell raised (at most one, as a kernel reports them)."""
    return [out["ename"] for out in cell.get("outputs", []) if out["output_type"] == "error"]


def cli_shim(folder: Path, python: str) -> Path:
    """A folder holding an ``nb-durable`` command that runs this checkout's CLI with ``python``.

    The notebooks call ``nb-durable`` as an installed package provides it; a test run from a
    checkout may not have it installed, so the shim stands in (PYTHONPATH finds the package).
    """
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "nb-durable"
    script.write_text(f'#!/bin/sh\nexec "{python}" -m nb_durable.cli "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return folder


def with_path(env: dict[str, str], *folders: str | Path) -> dict[str, str]:
    """``env`` with ``folders`` first on PATH."""
    out = dict(env)
    out["PATH"] = os.pathsep.join([*map(str, folders), env.get("PATH") or os.defpath])
    return out
