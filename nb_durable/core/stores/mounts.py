"""Which file system a path lives on, and whether that file system is on the network.

SQLite in WAL mode keeps its index in shared memory (``-shm``, mmap) and relies on POSIX
locks behaving exactly as on a local disk; over NFS, SMB/CIFS, Lustre, GPFS and their kin
neither holds, and two kernels (or two hosts) can corrupt the database. The SQLite store asks
here before it opens a file. On Linux the answer is the type of the mount that holds the path
in ``/proc/self/mountinfo`` (the longest mount point that contains the path's real location);
elsewhere, or when the table cannot be read, the type is unknown and nothing is refused.
Whether a mount is read-only (``mounted_read_only``) every store on files asks too: what it
holds is read as ever, and a write to it is refused in words rather than as an I/O error. A
file system can also turn read-only under a process that has its files open (``writes_refused``,
asked once a write has failed).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import tempfile
from pathlib import Path

from ...errors import StoreReadOnlyError

__all__ = [
    "MOUNTED_READ_ONLY", "MOUNTINFO", "NETWORK_FILE_SYSTEMS", "filesystem_type", "is_network_file_system", "mounted_read_only",
    "turned_read_only", "writes_refused",
]  # fmt: skip

MOUNTINFO = "/proc/self/mountinfo"

NETWORK_FILE_SYSTEMS = frozenset(
    {
        "nfs", "nfs4", "cifs", "smb3", "smbfs", "lustre", "gpfs", "afs", "ceph", "glusterfs",
        "beegfs", "9p", "ncpfs", "coda", "panfs", "wekafs", "orangefs", "pvfs2", "davfs",
        "fuse.sshfs", "fuse.glusterfs", "fuse.ceph", "fuse.s3fs", "fuse.gcsfuse", "fuse.rclone",
        "fuse.juicefs", "fuse.davfs2", "fuse.cvmfs",
    }
)  # fmt: skip
"""Mount types where SQLite's WAL mode is unsafe (the kernel's names, as mountinfo gives them)."""

_OCTAL = re.compile(r"\\([0-7]{3})")


def _unescape(field: str) -> str:
    # mountinfo writes space, tab, newline and backslash in a mount point as \040 and so on.
    return _OCTAL.sub(lambda m: chr(int(m.group(1), 8)), field)


def filesystem_type(path: str | os.PathLike[str], mountinfo: str | os.PathLike[str] = MOUNTINFO) -> str | None:
    """The type of the file system that holds ``path`` (which need not exist yet), or None."""
    try:
        table = Path(mountinfo).read_text(encoding="utf-8", errors="surrogateescape")
    except OSError:
        return None
    where = os.path.realpath(path)
    best, found = -1, None
    for line in table.splitlines():
        fields = line.split()
        try:
            mount_point = _unescape(fields[4])
            fs_type = fields[fields.index("-", 6) + 1]
        except (IndexError, ValueError):
            continue
        inside = where == mount_point or where.startswith(mount_point.rstrip("/") + "/")
        # The last of equally long mount points wins: it was mounted over the others.
        if inside and len(mount_point) >= best:
            best, found = len(mount_point), fs_type
    return found


def is_network_file_system(fs_type: str | None) -> bool:
    """Whether a mount type is one where SQLite's WAL mode is unsafe."""
    return fs_type in NETWORK_FILE_SYSTEMS


MOUNTED_READ_ONLY = "the file system holding it is mounted read-only"
"""Why a store on a read-only mount can only be read, as ``StoreReadOnlyError.why`` says it."""


def mounted_read_only(folder: str | os.PathLike[str]) -> bool:
    """Whether the file system holding ``folder`` (that would hold it, if it is not there yet) is
    mounted read-only (False where that cannot be told)."""
    where = Path(folder).absolute()
    while True:
        try:
            return bool(os.statvfs(where).f_flag & os.ST_RDONLY)
        except FileNotFoundError:
            if where == where.parent:
                return False
            where = where.parent
        except (OSError, AttributeError):  # no statvfs (Windows)
            return False


def writes_refused(folder: str | os.PathLike[str]) -> bool:
    """Whether the file system holding ``folder`` refuses writes now, asked once a write there failed.

    Linux remounts a file system read-only only while no file on it is open for writing, except
    after an error (ext4's ``errors=remount-ro``), and on Linux 6.x that marks it ``emergency_ro``,
    which ``statvfs`` does not show: there only a write tells, so a file is made there and removed.
    """
    if mounted_read_only(folder):
        return True
    try:
        fd, name = tempfile.mkstemp(prefix=".nb-durable-probe-", dir=folder)
    except OSError as e:
        return e.errno == errno.EROFS
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(name)
    return False


def turned_read_only(doing: str, store: str | os.PathLike[str], folder: str | os.PathLike[str]) -> StoreReadOnlyError | None:
    """The refusal of ``doing`` in ``store`` if the file system holding ``folder`` refuses writes
    now (``writes_refused``), asked once a write there failed; else None (the failure was another)."""
    if writes_refused(folder):
        return StoreReadOnlyError(doing=doing, path=str(store), why=MOUNTED_READ_ONLY)
    return None
