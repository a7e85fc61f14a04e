"""SQLite on a network file system is refused with the alternatives named, unless overridden.

The mount table is a real file the test writes, in /proc/self/mountinfo's format, naming the
test's folder as an NFS, SMB or Lustre mount; the real table of this machine must refuse nothing.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from nb_durable import EventLog, run_step
from nb_durable.core.stores.mounts import filesystem_type
from nb_durable.core.stores.sqlite import NETWORK_FS_ENV, SqliteStore
from nb_durable.errors import NetworkFileSystemError, StoreError


def mount_table(tmp_path: Path, fs_type: str, mount_point: Path) -> Path:
    escaped = str(mount_point).replace(" ", "\\040")
    table = tmp_path / "mountinfo"
    table.write_text(
        "22 27 0:21 / /proc rw,relatime - proc proc rw\n"
        "27 1 252:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n"
        f"90 27 0:51 / {escaped} rw,relatime shared:40 master:3 - {fs_type} server:/export rw,vers=4.2\n"
    )
    return table


@pytest.mark.parametrize("fs_type", ["nfs4", "nfs", "cifs", "smb3", "lustre", "gpfs", "fuse.sshfs"])
def test_sqlite_on_a_network_file_system_is_refused(tmp_path: Path, fs_type: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(NETWORK_FS_ENV, raising=False)
    home = tmp_path / "home dir"  # a space, as mountinfo escapes it
    home.mkdir()
    table = mount_table(tmp_path, fs_type, home)
    assert filesystem_type(home / "runs.db", table) == fs_type
    assert filesystem_type(tmp_path / "elsewhere.db", table) == "ext4"
    with pytest.raises(NetworkFileSystemError) as info:
        SqliteStore(home / "runs.db", mountinfo=table)
    message = str(info.value)
    assert fs_type in message and "JSONL" in message and "PostgreSQL" in message and NETWORK_FS_ENV in message
    assert isinstance(info.value, StoreError) and info.value.exit_code == 2
    assert not (home / "runs.db").exists()  # refused before SQLite created anything
    SqliteStore(tmp_path / "local.db", mountinfo=table).close()  # beside it, on ext4: fine
    SqliteStore(home / "runs.db", mountinfo=table, allow_network_fs=True).close()
    monkeypatch.setenv(NETWORK_FS_ENV, "1")
    SqliteStore(home / "runs.db", mountinfo=table).close()


def test_this_machines_local_file_systems_are_not_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(NETWORK_FS_ENV, raising=False)
    assert filesystem_type(tmp_path) not in (None, "nfs", "nfs4", "cifs")
    with EventLog("local", f"sqlite:///{tmp_path / 'runs.db'}") as log:
        assert run_step(log, "a", lambda: 1) == 1
    disk = tmp_path / "tmpfs"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(disk)], check=False, capture_output=True).returncode:
        return  # not root: the real table's own type was checked above
    try:
        assert filesystem_type(disk / "runs.db") == "tmpfs"
        with EventLog("local", f"sqlite:///{disk / 'runs.db'}") as log:
            assert run_step(log, "a", lambda: 1) == 1
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=True)
    assert os.path.exists(tmp_path / "runs.db")
