"""Workspace confinement, and the file operations behind read_file, write_file and list_dir.

A tool's path is relative to the workspace and is resolved (symlinks included, every parent
too) before anything is touched; a path that ends up outside the workspace raises
``WorkspaceError`` before any effect, whether it leaves through ``..``, is absolute, or
passes through a symlink that points out. The checked path is then used through folder
handles (``handles``), so a folder swapped for a symlink after the check cannot take a read,
a listing or a write out. A file with more than one name (a hard link: ``ln
/outside/secret x`` passes every path check) is not read, since its other names may be
outside; a write replaces it by a file of its own, as every write replaces its target, so no
write lands outside through one either. Reads are redacted and capped without ever cutting
a secret in half; a write is atomic (a temporary file renamed over the target) and reports
the same words whether the bytes were new or already there, so a write re-run after a crash
hands the model what the first run would have.

File names are shown and taken back as ``names`` says.
"""

from __future__ import annotations

import codecs
import contextlib
import errno
import hashlib
import os
import stat
from pathlib import Path
from typing import BinaryIO

from ...errors import ToolError, WorkspaceError
from ..secrets.redaction import Redactor
from .handles import HANDLES, changed, missing, open_folders, readable
from .names import from_shown, limit, not_too_long, shell_word, shown_name

__all__ = ["list_entries", "read_text", "replace_whole", "resolve_in_workspace", "write_text"]

_LIST_LIMIT = 1000  # entries per list_dir


def resolve_in_workspace(workspace: str | os.PathLike[str], path: str) -> Path:
    """The real path of ``path`` inside ``workspace``, or ``WorkspaceError`` if it leaves it."""
    root = Path(os.path.realpath(workspace))
    if not root.is_dir():
        raise WorkspaceError(f"the workspace {shown_name(root)!r} is not an existing folder; create it or choose another")
    if not isinstance(path, str) or not path.strip():
        raise WorkspaceError("the path is empty; give a path relative to the workspace, such as 'README.md' or '.'")
    if "\0" in path:
        raise WorkspaceError(f"the path {path!r} contains a NUL character; no file can have that name")
    if os.path.isabs(path):
        raise WorkspaceError(
            f"{path!r} is an absolute path; tools work inside the workspace only: "
            "give a path relative to the workspace root, such as 'src/main.py'"
        )
    path = from_shown(root, path)
    normal = os.path.normpath(path)
    if normal == os.pardir or normal.startswith(os.pardir + os.sep):
        raise WorkspaceError(f"{path!r} leaves the workspace through '..'; give a path inside the workspace")
    target = _realpath(root / path, path)
    if target != root and not target.is_relative_to(root):
        raise WorkspaceError(f"{path!r} leads outside the workspace {_through_symlink(root, path)}; give a path inside it")
    _no_loop(target, path)
    not_too_long(root, target, path)
    return target


def _no_loop(target: Path, path: str) -> None:
    # realpath stops where symlinks loop, leaving a path inside that no call can use.
    try:
        os.stat(target)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise ToolError(
                f"{path!r} is a loop of symlinks that never reaches a file or folder; list_dir shows where "
                "each points: remove or fix one with run_bash"
            ) from None


def _realpath(where: Path, path: str) -> Path:
    for _ in range(3):
        try:
            return Path(os.path.realpath(where))
        except OSError:
            continue  # a link became a folder between realpath's lstat and its readlink
    raise ToolError(f"{path!r} kept changing while it was resolved (a concurrent process is moving it); try again")


def _through_symlink(root: Path, path: str) -> str:
    """Name the symlink by which ``path`` leaves ``root``, for the error message."""
    here = root
    for part in Path(path).parts:
        here = here / part
        try:
            link = os.readlink(here)
        except OSError:
            continue  # not a symlink (or no longer one: the folder is changing under us)
        real = _realpath(here, path)
        if real != root and not real.is_relative_to(root):
            return f"through the symlink {shown_name(here.relative_to(root))!r} (-> {shown_name(link)})"
    return "through a symlink"


def _stat_existing(target: Path, path: str) -> os.stat_result:
    try:
        return target.stat()
    except FileNotFoundError:
        raise missing(path) from None


def read_text(workspace: Path, path: str, *, limit: int, redactor: Redactor | None = None) -> str:
    """The UTF-8 text of a workspace file, redacted, capped at ``limit`` characters with a note."""
    root = Path(os.path.realpath(workspace))
    target = resolve_in_workspace(workspace, path)
    st = _stat_existing(target, path)
    if stat.S_ISDIR(st.st_mode):
        raise ToolError(f"{path!r} is a folder, not a file; use list_dir to see what it holds")
    if not stat.S_ISREG(st.st_mode):
        raise _not_a_file(path)  # before opening it: opening a device may do something
    if _names_a_folder(path):
        raise ToolError(f"{path!r} ends with '/', which names a folder, but it is a file; drop the '/' to read it")
    redactor = redactor or Redactor()
    # Enough bytes for `limit` characters of any UTF-8 plus a whole secret after them.
    want = 4 * (limit + redactor.longest) + 4
    f, st = _opened(root, target, path)
    with f:
        data = f.read(want + 1)
    truncated = len(data) > want
    data = data[:want]
    if b"\0" in data[:8192]:
        raise ToolError(f"{path!r} is a binary file ({st.st_size} bytes); read_file shows text only (try run_bash with `file` or `xxd | head`)")
    try:
        text = codecs.getincrementaldecoder("utf-8")().decode(data, final=not truncated)
    except UnicodeDecodeError as e:
        raise ToolError(
            f"{path!r} is not UTF-8 text (invalid byte at offset {e.start}); it may be binary "
            "or another encoding: inspect it with run_bash (`file`, `iconv`)"
        ) from None
    if not truncated:
        whole = redactor.redact(text)  # the whole file: no secret runs on past the cut
        if len(whole) <= limit:
            return whole
        shown = whole[:limit]
    else:
        # No flush: the held-back tail could be the start of a secret the cut would expose. The
        # bytes read are enough for the stream to give `limit` characters past what it holds back.
        shown = redactor.stream().feed(text)[:limit]
    lines = shown.count("\n")
    return (
        f"{shown}\n[read_file: showing the first {len(shown)} characters ({lines} lines) of {path!r}, "
        f"a {st.st_size}-byte file; read further with run_bash, e.g. sed -n '{lines + 1},{lines + 200}p' "
        f"{shell_word(target.relative_to(root))}]"
    )


def _names_a_folder(path: str) -> bool:
    return path.rstrip().endswith(tuple(sep for sep in (os.sep, os.altsep) if sep))


def _not_a_file(path: str) -> ToolError:
    return ToolError(f"{path!r} is not a regular file (a device, pipe or socket); read_file reads files only")


def _one_name(st: os.stat_result, path: str) -> None:
    """Refuse a file with other names: a hard link (``ln /outside/secret x``) passes every path
    check, and where its other names are cannot be known."""
    if st.st_nlink > 1:
        raise WorkspaceError(
            f"{path!r} is a file with {st.st_nlink} names (hard links), and the others may be outside "
            "the workspace: read_file reads only files with one name. If it is meant to be read, copy it "
            "to a file of its own (cp, with run_bash) and read the copy"
        )


_READ = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def _opened(root: Path, target: Path, path: str) -> tuple[BinaryIO, os.stat_result]:
    """``target`` open for reading through the folder handles from ``root``, checked on the open file (not its name,
    which another process may move meanwhile): a regular file with one name; and its status."""
    try:
        if HANDLES:
            parts = target.relative_to(root).parts
            folder = open_folders(root, parts[:-1], path, create=False)
            try:
                fd = os.open(parts[-1], _READ, dir_fd=folder)  # O_NONBLOCK: a pipe put there meanwhile must not block
            finally:
                os.close(folder)
        else:
            fd = os.open(target, _READ)
    except FileNotFoundError:
        raise missing(path) from None
    except OSError as e:
        if e.errno != errno.ELOOP:
            raise
        raise ToolError(f"{path!r} became a symlink while it was read (a concurrent process); try again") from None
    f = os.fdopen(fd, "rb")
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _not_a_file(path)
        _one_name(st, path)
    except BaseException:
        f.close()
        raise
    return f, st


def write_text(workspace: Path, path: str, content: str) -> str:
    """Write ``content`` (UTF-8) to a workspace file atomically; unchanged if it holds it already.

    The path is resolved and checked first, then walked again through folder handles
    (``handles``), and the file is written and renamed through the last folder's handle.
    """
    root = Path(os.path.realpath(workspace))
    target = resolve_in_workspace(workspace, path)
    if target == root:
        raise ToolError("the path names the workspace folder itself; give a file path such as 'notes.txt'")
    if _names_a_folder(path):
        # As the shell's `> new/` would: made a file named 'new', it turned 'new/notes.txt' away.
        raise ToolError(f"{path!r} ends with '/', which names a folder; write_file writes files: drop the '/', or name a file in it")
    parts = target.relative_to(root).parts
    data = content.encode("utf-8")
    if not HANDLES:
        return _write_by_path(target, path, content, data)
    folder = open_folders(root, parts[:-1], path, create=True)
    try:
        _write_in(folder, parts[-1], path, data)
    finally:
        os.close(folder)
    return _wrote(path, content, data)


def _write_in(folder: int, name: str, path: str, data: bytes) -> None:
    """Write ``data`` to ``name`` in the open ``folder``, atomically."""
    mode: int | None = None
    try:
        st: os.stat_result | None = os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        st = None
    if st is not None:
        if stat.S_ISLNK(st.st_mode):
            raise changed(path, name)  # resolved as a file, a symlink now
        if stat.S_ISDIR(st.st_mode):
            raise ToolError(f"{path!r} is a folder; write_file writes files (give a path inside it)")
        if not stat.S_ISREG(st.st_mode):
            raise ToolError(f"{path!r} is not a regular file; write_file will not replace it")
        mode = stat.S_IMODE(st.st_mode)
        if _holds(folder, name, data):
            return
    # Same folder, so the rename is atomic. The name is fixed per target: a write killed
    # before its rename leaves this file, and the write's re-run truncates and renames it away.
    tmp = _temp_name(name, folder)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666, dir_fd=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            if mode is not None:
                os.fchmod(f.fileno(), mode)
            os.fsync(f.fileno())
        os.replace(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=folder)
        raise


def _holds(folder: int, name: str, data: bytes) -> bool:
    """Whether ``name`` in ``folder`` is a file of its own holding ``data`` already. A file with
    other names (hard links, maybe outside the workspace) is never read: it is replaced by a
    file of its own, as a write always does, and the other names keep what they held."""
    try:
        fd = os.open(name, _READ, dir_fd=folder)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOENT):
            return False  # a symlink, or gone, meanwhile: replaced or created, never followed
        raise
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1 or st.st_size != len(data):
            return False
        return f.read(len(data) + 1) == data


def _write_by_path(target: Path, path: str, content: str, data: bytes) -> str:
    """write_text where the OS has no folder handles: the same checks, by path."""
    mode: int | None = None
    try:
        st = target.stat()
    except FileNotFoundError:
        st = None
    except NotADirectoryError:
        raise ToolError(f"a parent of {path!r} is a file, not a folder") from None
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise ToolError(f"{path!r} is a folder; write_file writes files (give a path inside it)")
        if not stat.S_ISREG(st.st_mode):
            raise ToolError(f"{path!r} is not a regular file; write_file will not replace it")
        mode = stat.S_IMODE(st.st_mode)
        if st.st_nlink == 1 and st.st_size == len(data) and target.read_bytes() == data:  # as _holds
            return _wrote(path, content, data)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise ToolError(f"a parent of {path!r} is a file, not a folder") from None
    replace_whole(target, data, mode)
    return _wrote(path, content, data)


def _temp_name(name: str, folder: Path | int) -> str:
    tmp = f".{name}.nb-durable-write.tmp"
    if len(os.fsencode(tmp)) <= limit(folder, "PC_NAME_MAX"):
        return tmp
    # A name near the limit has no room for the suffix: the temporary file is named by its hash.
    return f".nb-durable-write.{hashlib.sha256(os.fsencode(name)).hexdigest()[:32]}.tmp"


def replace_whole(target: Path, data: bytes, mode: int | None = None) -> None:
    """Write ``data`` at ``target`` through a synced file renamed into place (``mode``, if
    given, is the file's), so a write that fails (a full disk, a kill) leaves what was there whole."""
    tmp = target.parent / _temp_name(target.name, target.parent)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)  # umask applies to new files
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _wrote(path: str, content: str, data: bytes) -> str:
    # The same words whether the bytes were new or already there: a write re-run after a
    # crash must hand the model the result the first run would have (write_file is idempotent).
    lines = content.count("\n") + (1 if content and not content.endswith("\n") else 0)
    return f"Wrote {path} ({len(data)} bytes, {lines} line{'' if lines == 1 else 's'})"


def _listable(root: Path, target: Path, path: str) -> int:
    walked = open_folders(root, target.relative_to(root).parts, path, create=False)
    try:
        return readable(walked)
    finally:
        os.close(walked)


def _entry_line(e: os.DirEntry[str], folder: int | None, root: Path, here: Path) -> str:
    name = shown_name(e.name)
    if not e.is_symlink():
        return name + ("/" if e.is_dir() else "")
    # A link is marked as a folder only if it leads to one inside: what it points to outside is
    # not looked at (stat can hang on a dead mount), and list_dir would refuse it anyway.
    real = Path(os.path.realpath(here / e.name))
    into_folder = (real == root or real.is_relative_to(root)) and real.is_dir()  # False for a loop
    link = os.readlink(e.path) if folder is None else os.readlink(e.name, dir_fd=folder)
    return f"{name}{'/' if into_folder else ''} -> {shown_name(link)}"


def list_entries(workspace: Path, path: str, *, limit: int) -> str:
    """A workspace folder's entries, sorted, folders with a trailing '/', capped."""
    root = Path(os.path.realpath(workspace))
    target = resolve_in_workspace(workspace, path or ".")
    st = _stat_existing(target, path)
    if not stat.S_ISDIR(st.st_mode):
        raise ToolError(f"{path!r} is a file, not a folder; use read_file to read it")
    folder = _listable(root, target, path) if HANDLES else None
    try:
        with os.scandir(target if folder is None else folder) as it:
            entries = sorted(it, key=lambda e: e.name)
        lines = [_entry_line(e, folder, root, target) for e in entries]
    finally:
        if folder is not None:
            os.close(folder)
    if not lines:
        return f"{path or '.'} is an empty folder"
    shown, size = [], 0
    for line in lines[:_LIST_LIMIT]:
        size += len(line) + 1
        if size > limit:
            break
        shown.append(line)
    if len(shown) < len(lines):
        shown.append(
            f"[list_dir: showing {len(shown)} of {len(lines)} entries; narrow it with run_bash, "
            f"e.g. ls -a {shell_word(target.relative_to(root))} | grep PATTERN]"
        )
    return "\n".join(shown)
