"""Which file system a path lives on, and whether that file system is on the network.

SQLite in WAL mode keeps its index in shared memory (``-shm``, mmap) and relies on POSIX
locks behaving exactly as on a local disk; over NFS, SMB/CIFS, Lustre, GPFS and their kin
neither holds, and two kernels (or two hosts) can corrupt the database. The SQLite store asks
here before it opens a file. On Linux the answer is the type of the mount that holds the path
in ``/proc/self/mountinfo`` (the longest mount point that contains the path's real location);
elsewhere, or when the table cannot be read, the type is unknown and nothing is refused.
Whether a mount is read-only (``mounted_read_only``) every store on files asks too: what it
holds is read as ever, and a write to it is refused in words rather than as an I/O error.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

__all__ = [
    "MOUNTED_READ_ONLY", "MOUNTINFO", "NETWORK_FILE_SYSTEMS", "filesystem_type", "is_network_file_system", "mounted_read_only",
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
    """Whether the file system holding ``folder`` is mounted read-only (False where that cannot be told)."""
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):  # no statvfs (Windows)
        return False
