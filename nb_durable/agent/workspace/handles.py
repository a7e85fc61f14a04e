"""Workspace folders opened one at a time through handles, never following a symlink.

A path checked by name can be changed by a concurrent process before it is used: a folder
swapped for a symlink to ``/etc`` after the check would take a read, a listing or a write out
of the workspace. So every file operation walks its checked path again from the workspace's
handle, each folder opened relative to the one before with ``O_NOFOLLOW | O_DIRECTORY``, and
works on the last folder's handle: a folder changed meanwhile makes the operation fail, never
leave the workspace.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path

from ...errors import ToolError

__all__ = ["HANDLES", "changed", "missing", "open_folders", "readable"]

# os.replace takes src_dir_fd too, but is listed under os.rename. Without them (Windows) the
# operations go by path.
HANDLES = {os.open, os.mkdir, os.stat, os.rename, os.unlink, os.readlink} <= os.supports_dir_fd and hasattr(os, "O_NOFOLLOW")
_FOLDER = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
# A handle to walk through needs no right to list the folder (O_PATH, Linux): with O_RDONLY, a
# folder one may pass through but not list (mode 711) refused every file inside it.
_WALK = (_FOLDER & ~os.O_RDONLY) | getattr(os, "O_PATH", os.O_RDONLY)


def changed(path: str, part: str) -> ToolError:
    return ToolError(
        f"{part!r} on the way to {path!r} changed while it was used (it is a symlink or a file now); "
        "nothing was read or written. Look at the folder with list_dir and try again."
    )


def missing(path: str) -> ToolError:
    return ToolError(f"{path!r} does not exist in the workspace; list_dir shows what is there")


def open_folders(root: Path, parts: tuple[str, ...], path: str, *, create: bool) -> int:
    """A handle on the folder ``root/parts``, each step opened relative to the last, never
    following a symlink; missing folders are made if ``create``, else the path is missing."""
    fd = os.open(root, _WALK)
    try:
        for part in parts:
            for _ in range(3):  # a folder removed or created meanwhile: look again
                try:
                    child = os.open(part, _WALK, dir_fd=fd)
                    break
                except FileNotFoundError:
                    if not create:
                        raise missing(path) from None
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(part, dir_fd=fd)
                except (NotADirectoryError, OSError) as e:
                    if isinstance(e, NotADirectoryError) or e.errno == errno.ELOOP:
                        st = os.stat(part, dir_fd=fd, follow_symlinks=False)
                        if stat.S_ISLNK(st.st_mode):
                            raise changed(path, part) from None
                        raise ToolError(f"a parent of {path!r} is a file, not a folder") from None
                    raise
            else:
                raise changed(path, part)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def readable(folder: int) -> int:
    """A handle that lists ``folder`` (one from ``open_folders``), the same folder whatever its name is now."""
    return os.open(os.curdir, _FOLDER, dir_fd=folder)
