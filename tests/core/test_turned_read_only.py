"""A store whose file system turns read-only under a running worker stops the worker, saying so.

Mounted read-only before it starts, a worker refuses to start (``test_read_only_store.py``).
Turned read-only under it, each SQLite claim that wrote failed as a plain "disk I/O error", warned
of at every poll for ever, and a worker on a runs folder went on idling in silence. Linux refuses to remount a
file system read-only while a file on it is open for writing (a SQLite store's connection), so
the SQLite case is the one that happens for real: ext4's ``errors=remount-ro`` after an error
(a loop-mounted image here, the error triggered through sysfs); on Linux 6.x that marks it
``emergency_ro``, which ``statvfs`` does not show, only the writes refused. An idle worker on a
runs folder holds nothing open (once its first look has written the folder's index), so that
folder's mount is remounted read-only as an admin would;
a runs folder on a failed ext4 image passes every check, and the first write refused is the
lease file of the run the worker takes. A run in flight whose own write is refused (its step's
reply held by the loopback Messages API until the disk has failed) stops the worker too.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from nb_durable.agent import submit
from nb_durable.core.runs import read_run, read_summary
from tests.conftest import subprocess_env
from tests.core.test_full_disk import mounted, small_disk
from tests.core.test_read_only_store import _refused, _two_runs
from tests.fakes import Delay, FunctionScenario, MessagesAPIServer, reply
from tests.waiting import wait_until


@contextlib.contextmanager
def ext4_disk(where: Path) -> Iterator[Path]:
    """A loop-mounted ext4 image that remounts itself read-only at its first error."""
    where.mkdir()
    image = where.with_suffix(".img")
    with image.open("wb") as f:
        f.truncate(8 << 20)
    cannot = "cannot mount an ext4 image here (needs root and loop devices)"
    made = subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], check=False, capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"{cannot}: {made.stderr.decode().strip()}")
    with mounted(where, ["-o", "loop,errors=remount-ro", str(image)], cannot):
        yield where


def fail_the_disk(disk: Path) -> None:
    """An ext4 error on ``disk``'s file system, which ``errors=remount-ro`` turns read-only."""
    device = subprocess.run(["findmnt", "-n", "-o", "SOURCE", str(disk)], check=True, capture_output=True, text=True)
    trigger = Path("/sys/fs/ext4") / Path(device.stdout.strip()).name / "trigger_fs_error"
    if not trigger.exists():
        pytest.skip(f"this kernel cannot be told to fail an ext4 file system ({trigger} is missing)")
    trigger.write_text("nb_durable test: turn read-only\n")


def _worker(store: str, *flags: str, **env: str) -> subprocess.Popen[str]:
    worker = subprocess.Popen(
        [sys.executable, "-m", "nb_durable.cli", "worker", "--poll", "0.2", *flags, "--store", store],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=subprocess_env(**env),
    )  # fmt: skip
    assert worker.stdout is not None
    banner = worker.stdout.readline()  # said once it can take runs
    assert "1 at a time" in banner, banner + worker.communicate(timeout=30)[1]
    return worker


def _stops(worker: subprocess.Popen[str], said: str) -> str:
    """What the worker printed (its runs' lines) once it exited 2 saying the store is read-only."""
    try:
        out, err = worker.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        worker.kill()
        out, err = worker.communicate()
        pytest.fail(f"the worker went on on a read-only store: {out}{err}")
    assert worker.returncode == 2, out + err
    assert err == f"nb-durable: {_refused(said, 'this worker cannot take runs')}\n", err
    return out


def test_a_worker_whose_sqlite_store_turns_read_only_says_so_and_exits_2(tmp_path: Path) -> None:
    with ext4_disk(tmp_path / "disk") as disk:
        url = f"sqlite:///{disk / 'runs.db'}"
        _two_runs(url)
        # Its claim is what writes: a queued run it may take only once the disk has failed.
        worker = _worker(url, "--older-than", "5s")
        submit("Look around.", store=url, run_id="queued", demo=True)
        fail_the_disk(disk)
        _stops(worker, str(disk / "runs.db"))
        assert read_summary("queued", url).status == "queued", "left as it was, for a worker where it can be written"


def test_a_worker_whose_sqlite_store_fails_under_a_run_in_flight_says_so_and_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run's own write finds it (its step's reply, held until the disk has failed): the
    worker stops as for a look or a claim, and the run is left with what it recorded."""
    release = threading.Event()
    with ext4_disk(tmp_path / "disk") as disk, MessagesAPIServer(
        FunctionScenario(lambda request: Delay(60.0, reply("Done."), until=release))
    ) as api:  # fmt: skip
        url = f"sqlite:///{disk / 'runs.db'}"
        api_env = {"ANTHROPIC_BASE_URL": api.url, "ANTHROPIC_API_KEY": "sk-test-read-only"}
        for name, value in api_env.items():
            monkeypatch.setenv(name, value)
        worker = _worker(url, **api_env)
        try:
            submit("Look around.", store=url, run_id="in-flight", workspace=str(tmp_path))
            api.wait_for_requests(1, timeout=30)  # its step's request is out: the run is in flight
            fail_the_disk(disk)
        finally:
            release.set()
        out = _stops(worker, str(disk / "runs.db"))
        said = f"cannot write run 'in-flight' to {disk / 'runs.db'}: the store {disk / 'runs.db'} can only be read"
        assert out.startswith("in-flight: passed over: ") and said in out, out  # its write, not a look or a claim
        # Nothing of the stop could be recorded: as a killed worker leaves it, its step started, not done.
        assert [(s.step_id, s.state) for s in read_run("in-flight", url).steps] == [("settings:0", "completed"), ("model:0", "interrupted")]
        assert read_summary("in-flight", url).error is None, "no stop recorded: it cannot be"


def remount_read_only(disk: Path) -> None:
    """``disk`` remounted read-only as an admin would, trying again while Linux says it is busy:
    a worker just started writes its first look's index file, and a file open for writing keeps
    the mount from turning read-only (on a loaded machine that first look is slower)."""

    def remounted() -> bool:
        done = subprocess.run(["mount", "-o", "remount,ro", str(disk)], capture_output=True, text=True, check=False)
        assert done.returncode == 0 or "busy" in done.stderr, done.stderr
        return done.returncode == 0

    wait_until(remounted, f"{disk} remounted read-only (busy while a file on it is open for writing)", timeout=30, every=0.1)


def test_a_worker_whose_runs_folder_turns_read_only_says_so_and_exits_2(tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk") as disk:
        _two_runs(str(disk / "runs"))
        worker = _worker(str(disk / "runs"))
        remount_read_only(disk)
        _stops(worker, str(disk / "runs"))


def test_a_worker_whose_runs_folder_fails_when_it_takes_a_run_says_so_and_exits_2(tmp_path: Path) -> None:
    """A failed ext4 folder passes every check (``statvfs`` does not show ``emergency_ro``) and a
    JSONL claim writes nothing, so the first write refused was the lease file of the run taken: a
    plain StoreError, the run passed over for a minute and the worker going on, unable to write."""
    with ext4_disk(tmp_path / "disk") as disk:
        runs = str(disk / "runs")
        _two_runs(runs)
        worker = _worker(runs, "--older-than", "5s")  # the queued run is taken only once the disk has failed
        submit("Look around.", store=runs, run_id="queued", demo=True)
        fail_the_disk(disk)
        _stops(worker, runs)
        assert read_summary("queued", runs).status == "queued", "left as it was, for a worker where it can be written"
