"""An export the disk cannot hold is the typed full-disk error, and leaves no notebook cut off.

On a real 1 MB tmpfs, filled (as tests/core/test_full_disk.py does; the CLI's export under a
file size limit is tested there too): ``export_notebook`` wrote the notebook in place, so a
full disk left a cut-off file at the path and raised a bare ``OSError`` (``[Errno 28] No space
left on device``), which said neither which run nor what to do.
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

from nb_durable import EventLog, read_run, run_step
from nb_durable.agent.display.export import export_notebook
from nb_durable.errors import StoreFullError
from tests.core.test_full_disk import fill, small_disk


def test_an_export_the_disk_cannot_hold_is_a_store_full_error_and_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    with EventLog("big", tmp_path / "runs") as log:
        log.start_run({"task": "t"})
        run_step(log, "a", lambda: "x" * 200_000)
    record = read_run("big", tmp_path / "runs")
    with small_disk(tmp_path / "disk") as disk:
        kept = export_notebook(record, disk / "kept.ipynb")
        before = kept.read_bytes()
        filler = fill(disk)
        for name, said in (("new.ipynb", "no file was written"), ("kept.ipynb", "the file already there was left as it was")):
            with pytest.raises(StoreFullError) as raised:
                export_notebook(record, disk / name)
            assert str(raised.value) == (
                f"cannot export run 'big' to {disk / name}: the file system holding it is full "
                f"({os.strerror(errno.ENOSPC)}). Nothing recorded was lost and the "
                "write that failed was undone. Free some space (or raise the quota, or write it to a file on another "
                f"disk), then export again ({said})."
            )
            assert raised.value.errno == errno.ENOSPC and raised.value.path == str(disk / name)
            assert raised.value.exit_code == 1
        assert kept.read_bytes() == before
        assert sorted(p.name for p in disk.iterdir()) == ["filler", "kept.ipynb"], "no cut-off or temporary file"
        filler.unlink()
        again = export_notebook(record, disk / "new.ipynb")  # once there is room
        assert json.loads(again.read_bytes())["metadata"]["nb_durable"]["run_id"] == "big"


def test_an_export_to_a_pipe_or_device_is_written_through_it(tmp_path: Path) -> None:
    """Writing through a file renamed into place made ``export_notebook(record, "/dev/stdout")``
    (or a named pipe) fail: the temporary file went beside ``/proc/self/fd``, or a pipe was
    replaced by a regular file no reader ever saw."""
    import threading

    import nbformat

    with EventLog("r", tmp_path / "runs") as log:
        log.start_run({"task": "t"})
        run_step(log, "a", lambda: "hello")
    record = read_run("r", tmp_path / "runs")
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(pipe.read_bytes()))
    reader.start()
    export_notebook(record, pipe)
    reader.join(timeout=30)
    assert not reader.is_alive() and pipe.is_fifo()
    assert nbformat.reads(got[0].decode(), as_version=4).cells
    assert export_notebook(record, "/dev/null") == Path("/dev/null")
    assert list(tmp_path.glob(".*tmp")) == []


def test_an_export_that_cannot_be_written_names_the_path_given_not_its_temporary_file(tmp_path: Path) -> None:
    """It said "No such file or directory: .../.x.ipynb.nb-durable-write.tmp": a file nobody named."""
    with EventLog("r", tmp_path / "runs") as log:
        log.start_run({"task": "t"})
        run_step(log, "a", lambda: "x")
    link = tmp_path / "link.ipynb"
    link.symlink_to(tmp_path / "gone" / "x.ipynb")  # written through, into a folder that is not there
    with pytest.raises(FileNotFoundError) as raised:
        export_notebook(read_run("r", tmp_path / "runs"), link)
    assert raised.value.filename == f"{link} (a link to {tmp_path / 'gone' / 'x.ipynb'})", raised.value
    assert "nb-durable-write" not in str(raised.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.ipynb", "runs"]
