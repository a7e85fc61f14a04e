"""The file tools cannot be raced out of the workspace by a folder swapped for a symlink.

A second process swaps the workspace folder ``sub`` for a symlink to a folder outside, as fast
as it can, while write_file writes ``sub/note.txt`` again and again: the outside folder must
never receive a file. Each write either lands inside or is refused with a clear error. So with
read_file and list_dir: they must never show what the outside folder holds.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from nb_durable.agent.workspace.files import list_entries, read_text, write_text
from nb_durable.errors import ToolError

SWAPPER = """
import ctypes, os, sys, time
ws, outside = sys.argv[1], sys.argv[2]
os.chdir(ws)
os.symlink(outside, "link")
libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD, RENAME_EXCHANGE = -100, 2
end = time.monotonic() + float(sys.argv[3])
print("swapping", flush=True)
while time.monotonic() < end:
    # sub and link trade places in one step: sub is always a folder or a symlink out, never missing.
    if libc.renameat2(AT_FDCWD, b"sub", AT_FDCWD, b"link", RENAME_EXCHANGE) != 0:
        raise OSError(ctypes.get_errno(), "renameat2")
"""


LINUX_ONLY = pytest.mark.skipif(sys.platform != "linux", reason="the swapper uses Linux's renameat2(RENAME_EXCHANGE)")


@LINUX_ONLY
def test_a_folder_swapped_for_a_symlink_never_lets_a_write_out(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    swapper = subprocess.Popen([sys.executable, "-c", SWAPPER, str(ws), str(outside), "4"], stdout=subprocess.PIPE, text=True)
    wrote = refused = 0
    try:
        assert swapper.stdout is not None and swapper.stdout.readline().strip() == "swapping"
        end = time.monotonic() + 3.5
        while time.monotonic() < end:
            try:
                write_text(ws, "sub/note.txt", "inside only\n")
                wrote += 1
            except ToolError:
                refused += 1  # WorkspaceError included: the path led out when it was resolved
            assert not any(outside.iterdir()), f"a write escaped the workspace: {sorted(outside.iterdir())}"
    finally:
        swapper.wait(timeout=30)
        swapper.stdout.close()  # type: ignore[union-attr]
    assert wrote and refused, (wrote, refused)  # the race really ran both ways


@LINUX_ONLY
def test_a_folder_swapped_for_a_symlink_never_lets_a_read_or_a_listing_out(tmp_path: Path) -> None:
    """They opened the path checked by name: the swap between the check and the open read the
    outside file (about one read in thirty) and listed the outside folder."""
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    (ws / "sub" / "note.txt").write_text("inside\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "note.txt").write_text("outside data\n")
    (outside / "secret.txt").write_text("outside data\n")
    swapper = subprocess.Popen([sys.executable, "-c", SWAPPER, str(ws), str(outside), "4"], stdout=subprocess.PIPE, text=True)
    shown = refused = 0
    try:
        assert swapper.stdout is not None and swapper.stdout.readline().strip() == "swapping"
        end = time.monotonic() + 3.5
        while time.monotonic() < end:
            for tool in (lambda: read_text(ws, "sub/note.txt", limit=100), lambda: list_entries(ws, "sub", limit=100)):
                try:
                    assert tool() in ("inside\n", "note.txt"), "read_file or list_dir showed the folder outside"
                    shown += 1
                except ToolError:
                    refused += 1
    finally:
        swapper.wait(timeout=30)
        swapper.stdout.close()  # type: ignore[union-attr]
    assert shown and refused, (shown, refused)  # the race really ran both ways
