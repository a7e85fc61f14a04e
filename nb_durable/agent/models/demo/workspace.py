"""The bundled demo project, and ``prepare_demo_workspace``, which puts it where a run can work on it.

The project (``workspace_files/``: a small module with a bug and the unittest cases that find
it) ships inside the package and is read through ``importlib.resources``, so it works from a
wheel as from a checkout. Preparing never overwrites: a folder that already holds the project
keeps its state (the fix an earlier run made, the regression test the delegating demo's child
wrote), and a folder holding anything else is refused.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from .delegating import TEST_PATH

if TYPE_CHECKING:
    from importlib.abc import Traversable

__all__ = ["prepare_demo_workspace"]

_SKIP = {"__pycache__", ".pytest_cache"}
_WRITTEN_BY_DEMO = {TEST_PATH.split("/")[0]}
"""What the demo's own runs add to the project: the same run again, or a resume, finds it there."""


def _bundled() -> Traversable:
    """The demo project as the installed package holds it."""
    return resources.files("nb_durable.agent.models.demo").joinpath("workspace_files")


def _bundled_files(root: Traversable | None = None, prefix: str = "") -> dict[str, bytes]:
    """The demo project's files by relative path (caches left out)."""
    root = _bundled() if root is None else root
    files: dict[str, bytes] = {}
    for entry in sorted(root.iterdir(), key=lambda e: e.name):
        if entry.name in _SKIP or entry.name.endswith(".pyc"):
            continue
        if entry.is_dir():
            files.update(_bundled_files(entry, f"{prefix}{entry.name}/"))
        else:
            files[prefix + entry.name] = entry.read_bytes()
    return files


def prepare_demo_workspace(dest: str | os.PathLike[str], *, reset: bool = False) -> Path:
    """Copy the demo project into ``dest`` (missing or empty) and return it; never overwrite.

    A folder that already holds the demo project keeps its files as they are (with the fix,
    if an earlier run made it) and gets only the missing ones; ``reset=True`` restores the
    bundled versions. A folder with anything else in it is refused, untouched.
    """
    dest = Path(dest)
    files = _bundled_files()
    if dest.exists() and not dest.is_dir():
        raise FileExistsError(f"cannot prepare the demo workspace at {dest}: it is a file, not a folder")
    present = sorted(p.name for p in dest.iterdir()) if dest.exists() else []
    top_level = {name.split("/")[0] for name in files}
    strangers = [name for name in present if name not in top_level | _SKIP | _WRITTEN_BY_DEMO]
    if strangers:
        shown = ", ".join(strangers[:5]) + (", ..." if len(strangers) > 5 else "")
        raise FileExistsError(
            f"cannot prepare the demo workspace in {dest}: the folder holds other files ({shown}), "
            f"and the demo agent edits files. Choose a new or empty folder."
        )
    for relative, data in files.items():
        target = dest / relative
        # An existing copy keeps its state (the fix an earlier run made) unless reset is asked.
        if reset or not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
    return dest
