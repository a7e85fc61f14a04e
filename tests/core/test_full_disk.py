"""A full disk is a clear error; nothing recorded is lost, no lease leaks, and the same process
goes on once space is freed. On a real 1 MB tmpfs when this runs as root (mounting needs it);
under RLIMIT_FSIZE (the same refusal, EFBIG, for any user) in a child process as well. An
export the disk cannot hold leaves the file at its path as it was, and says so; a fork leaves
no run, and says to fork again."""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import sys
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from nb_durable import EventLog, list_runs, read_run, run_step
from nb_durable.errors import StoreFullError
from tests.conftest import subprocess_env


@contextlib.contextmanager
def mounted(where: Path, mount: list[str], cannot: str) -> Iterator[Path]:
    """``where`` with a file system mounted on it by ``mount`` (its arguments), unmounted after;
    skipped, saying ``cannot`` and why, where this machine cannot mount (not root)."""
    done = subprocess.run(["mount", *mount, str(where)], check=False, capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"{cannot}: {done.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=True)


@contextlib.contextmanager
def small_disk(where: Path) -> Iterator[Path]:
    where.mkdir()
    with mounted(where, ["-t", "tmpfs", "-o", "size=1m", "tmpfs"], "cannot mount a tmpfs here (needs root; the RLIMIT_FSIZE test covers this)"):
        yield where


def fill(disk: Path) -> Path:
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError as e:
        assert e.errno == errno.ENOSPC
    finally:
        os.close(fd)
    return filler


BIG = "x" * 300_000


def test_a_sqlite_store_on_a_read_only_mount_is_said_to_be_read_only_not_full(tmp_path: Path) -> None:
    """A read-only mount with little free space (a small disk, or one that, read-only, says it has
    no free bytes) was said to be full: "free some space", which nothing there could do. A store
    that is there is read (tests/core/test_read_only_store.py); a new one cannot be made there."""
    with small_disk(tmp_path / "disk") as disk:
        subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
        done = subprocess.run(
            [sys.executable, "-m", "nb_durable.cli", "run", "--demo", "--store", f"sqlite:///{disk / 'runs.db'}", "x"],
            check=False, capture_output=True, text=True, env=subprocess_env(), timeout=60,
        )  # fmt: skip
        assert done.returncode == 2, done.stdout + done.stderr  # as a folder that cannot be written: usage
        assert "is full" not in done.stderr, done.stderr
        assert done.stderr.startswith("nb-durable: cannot write run "), done.stderr
        assert done.stderr.endswith(
            f"the store {disk / 'runs.db'} does not exist, and cannot be made there (the file system holding it is "
            "mounted read-only), so nothing was written. Point the store at a disk you can write, or make that one "
            "writable.\n"
        ), done.stderr


@pytest.mark.parametrize("store_kind", ["jsonl", "sqlite"])
def test_a_full_disk_is_a_clear_error_and_the_same_log_goes_on_after(tmp_path: Path, store_kind: str) -> None:
    with small_disk(tmp_path / "disk") as disk:
        store = str(disk / "runs") if store_kind == "jsonl" else f"sqlite:///{disk / 'runs.db'}"
        log = EventLog("full", store)
        assert run_step(log, "small", lambda: "kept") == "kept"
        filler = fill(disk)
        with pytest.raises(StoreFullError) as info:
            run_step(log, "big", lambda: BIG)
        message = str(info.value)
        assert "full" in message and str(disk) in message and "Free some space" in message
        assert info.value.exit_code == 1
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no torn line: the refused write was undone
            assert [s.result for s in read_run("full", store).steps] == ["kept"]
        # Another run opened on the full disk: its lease must not leak when it cannot write.
        with pytest.raises(StoreFullError):
            with EventLog("other", store) as other:
                run_step(other, "a", lambda: BIG)
        filler.unlink()
        assert run_step(log, "big", lambda: BIG) == BIG  # the same EventLog, once space is back
        log.close()
        with EventLog("full", store) as again:
            assert run_step(again, "small", lambda: "not run") == "kept"
            assert run_step(again, "big", lambda: "not run") == BIG
        with EventLog("other", store) as other:  # not RunLockedError: nothing leaked
            assert run_step(other, "a", lambda: "ok") == "ok"


def test_a_sqlite_store_closed_before_its_disk_filled_says_so_when_opened_and_opens_after(tmp_path: Path) -> None:
    # WAL mode makes its shared-memory file on the first open: on a full disk that open failed
    # with "disk I/O error. Check that the folder exists and is writable and that the file is a
    # SQLite database", for every reader too (a listing), as if the store were damaged.
    with small_disk(tmp_path / "disk") as disk:
        store = f"sqlite:///{disk / 'runs.db'}"
        with EventLog("kept", store) as log:
            run_step(log, "a", lambda: "kept")
        filler = fill(disk)
        with pytest.raises(StoreFullError) as info:
            list_runs(store)
        message = str(info.value)
        assert f"cannot open the SQLite store {disk / 'runs.db'}: the file system holding it is full" in message, message
        assert message.endswith("Free some space (or raise the quota, or point the store at another disk), then open it again: its runs are all there.")
        with pytest.raises(StoreFullError):
            EventLog("kept", store)
        filler.unlink()
        assert [s.run_id for s in list_runs(store)] == ["kept"]
        with EventLog("kept", store) as log:
            assert run_step(log, "a", lambda: "not run") == "kept"


RLIMITED = """
import resource, signal, sys
from nb_durable import EventLog, run_step, read_run
from nb_durable.errors import StoreFullError
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit then fails with EFBIG
log = EventLog("capped", sys.argv[1])
run_step(log, "small", lambda: "kept")
size = __import__("os").path.getsize(sys.argv[1] + "/capped.jsonl")
resource.setrlimit(resource.RLIMIT_FSIZE, (size + 1000, resource.RLIM_INFINITY))
try:
    run_step(log, "big", lambda: "x" * 100_000)
except StoreFullError as e:
    print("refused:", e)
assert [s.result for s in read_run("capped", sys.argv[1]).steps] == ["kept"]
resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
print("then:", len(run_step(log, "big", lambda: "x" * 100_000)))
"""


@pytest.mark.skipif(os.name == "nt", reason="RLIMIT_FSIZE is POSIX; Windows has no file size limit to set")
def test_a_file_size_limit_is_the_same_clear_error(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-W", "error", "-c", RLIMITED, str(tmp_path / "runs")],
        check=False, capture_output=True, text=True, env=subprocess_env(), timeout=60,
    )
    assert done.returncode == 0, done.stderr
    refused, then = done.stdout.splitlines()
    assert refused.startswith("refused: cannot append to") and "File too large" in refused
    assert then == "then: 100000"


def _capped(limit: int) -> None:
    """In the child, before it runs: files it writes may not pass ``limit`` bytes (EFBIG, not SIGXFSZ)."""
    import resource
    import signal

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # ignored stays ignored across exec
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))


@pytest.mark.skipif(os.name == "nt", reason="RLIMIT_FSIZE is POSIX; Windows has no file size limit to set")
def test_a_copy_cut_short_by_a_full_disk_says_which_runs_it_copied(tmp_path: Path) -> None:
    source, destination = tmp_path / "runs", tmp_path / "copies"
    for run_id, result in (("a-small", "s"), ("b-big", "x" * 200_000), ("c-small", "s")):
        with EventLog(run_id, source) as log:
            run_step(log, "a", lambda result=result: result)  # type: ignore[misc]  # mypy cannot infer a lambda with a default argument
    done = subprocess.run(
        [sys.executable, "-m", "nb_durable.cli", "copy", str(source), str(destination), "a-small", "b-big", "c-small"],
        check=False, capture_output=True, text=True, env=subprocess_env(), timeout=60, preexec_fn=lambda: _capped(100_000),
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout == "copied a-small\n", done.stdout
    assert "1 run(s) above were copied whole before the error below, and no other" in done.stderr, done.stderr
    assert "File too large" in done.stderr and "b-big" in done.stderr, done.stderr
    # Said as a copy's, not a run's ("then go on: the same log keeps writing, or resume the run"),
    # and with no empty log left for check-index to list as a run with nothing recorded.
    assert f"nb-durable: cannot copy run 'b-big' into {destination}: the file system holding it is full" in done.stderr
    assert "then copy again: the runs already copied are passed over (run 'b-big' was not copied, and no empty run " \
        "of it was left there)." in done.stderr and "resume" not in done.stderr, done.stderr
    assert sorted(p.name for p in destination.glob("*.jsonl")) == ["a-small.jsonl"]
    assert read_run("a-small", str(destination)).steps[0].result == "s"
    assert "copy again: the runs already copied are passed over, and the rest copied" in done.stderr, done.stderr
    again = subprocess.run(  # as the message advises, once there is room: the same command, no names to pick
        [sys.executable, "-m", "nb_durable.cli", "copy", str(source), str(destination), "a-small", "b-big", "c-small"],
        check=False, capture_output=True, text=True, env=subprocess_env(), timeout=60,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines() == [  # the one copied whole is no clash
        "already there, the same: a-small",
        "copied b-big",
        "copied c-small",
        f"2 run(s) copied from {source} to {destination} (1 more already there, the same)",
    ], again.stdout
    assert [s.result for s in read_run("b-big", str(destination)).steps] == ["x" * 200_000]


@pytest.mark.skipif(os.name == "nt", reason="RLIMIT_FSIZE is POSIX; Windows has no file size limit to set")
def test_an_export_the_disk_cannot_hold_leaves_the_file_there_whole_and_says_what_to_do(tmp_path: Path) -> None:
    """It cut the notebook off (invalid JSON, or 0 bytes) and said only "[Errno 28] No space left
    on device"; once space was freed, the retry was refused: the cut-off file was no export."""
    import json

    with EventLog("big", tmp_path / "runs") as log:
        log.start_run({"task": "t"})
        run_step(log, "a", lambda: "x" * 20_000)

    def export(name: str, limit: int | None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "nb_durable.cli", "export", "big", "-o", name], cwd=tmp_path, check=False,
            capture_output=True, text=True, env=subprocess_env(), timeout=60,
            preexec_fn=None if limit is None else lambda: _capped(limit),
        )  # fmt: skip

    assert export("kept.ipynb", None).returncode == 0
    before = (tmp_path / "kept.ipynb").read_bytes()
    for name, kept in (("kept.ipynb", "the file already there was left as it was"), ("new.ipynb", "no file was written")):
        refused = export(name, len(before) // 2)
        assert refused.returncode == 1, refused.stdout + refused.stderr
        assert refused.stderr == (
            f"nb-durable: cannot export run 'big' to {name}: the file system holding it is full (File too large). "
            "Nothing recorded was lost and the write that failed was undone. Free some space (or raise the quota, "
            f"or name a file on another disk with -o), then export again ({kept}).\n"
        )
    assert (tmp_path / "kept.ipynb").read_bytes() == before and not (tmp_path / "new.ipynb").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept.ipynb", "runs"], "no temporary file is left"
    again = export("new.ipynb", None)  # once there is room: not refused as a file that is no export
    assert again.returncode == 0, again.stderr
    assert json.loads((tmp_path / "new.ipynb").read_bytes())["metadata"]["nb_durable"]["run_id"] == "big"


@pytest.mark.skipif(os.name == "nt", reason="RLIMIT_FSIZE is POSIX; Windows has no file size limit to set")
def test_a_fork_the_disk_cannot_hold_leaves_no_run_and_says_to_fork_again(tmp_path: Path) -> None:
    """It left an empty log, which resume then called a run created with nothing recorded, and
    said "the same log keeps writing, or resume the run" of a fork that was never made."""
    with EventLog("big", tmp_path / "runs") as log:
        log.start_run({"task": "t"})
        run_step(log, "a", lambda: "x" * 200_000)

    def fork(limit: int | None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "nb_durable.cli", "fork", "big", "F", "--at", "1"], cwd=tmp_path, check=False,
            capture_output=True, text=True, env=subprocess_env(), timeout=60,
            preexec_fn=None if limit is None else lambda: _capped(limit),
        )  # fmt: skip

    refused = fork(100_000)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert refused.stderr.startswith("nb-durable: cannot fork run 'big' into 'F': the file system holding it is full"), refused.stderr
    assert refused.stderr.endswith("then fork again: the fork was not made, and no run 'F' was left.\n"), refused.stderr
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == [".leases", "big.jsonl"]
    again = fork(None)  # once there is room, as the message says
    assert again.returncode == 0, again.stderr
    assert [s.result for s in read_run("F", tmp_path / "runs").steps] == ["x" * 200_000]


def test_a_fork_whose_unfinished_log_cannot_be_removed_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its message said no run was left even when removing the unfinished log had failed."""
    from nb_durable.core.whole_runs.fork import fork
    from nb_durable.core.writing.writer import RunWriter
    from nb_durable.errors import StoreError

    with EventLog("src", tmp_path) as log:
        log.start_run({"task": "t"})
        run_step(log, "a", lambda: 1)

    def full(self: RunWriter, lines: object) -> None:
        raise StoreFullError(doing="cannot append", path=str(tmp_path / "F.jsonl"), code=errno.ENOSPC)

    def stuck(self: RunWriter) -> None:
        raise StoreError("the folder is read-only")

    monkeypatch.setattr(RunWriter, "append_lines", full)
    monkeypatch.setattr(RunWriter, "delete", stuck)
    with pytest.raises(StoreFullError) as raised:
        fork("src", "F", at=1, root=tmp_path)
    said = str(raised.value)
    assert "the fork was not made; its unfinished log could not be removed (the folder is read-only)" in said, said
    assert "delete run 'F' first" in said and "no run 'F' was left" not in said


EFFECT_REFUSED = """
import os, resource, signal, sys
from nb_durable import EventLog, run_step, read_run
from nb_durable.errors import InDoubtError, StoreFullError
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
runs, effects = sys.argv[1], sys.argv[2]

def send():
    with open(effects, "a") as f:
        f.write("sent\\n")
    return "x" * 100_000

log = EventLog("capped", runs)
run_step(log, "small", lambda: "kept")
resource.setrlimit(resource.RLIMIT_FSIZE, (os.path.getsize(runs + "/capped.jsonl") + 1000, resource.RLIM_INFINITY))
try:
    run_step(log, "send", send, effect=sys.argv[3])
except StoreFullError as e:
    print("refused:", e)
resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
print("then:", len(run_step(log, "send", send, effect=sys.argv[3])))
log.close()
with EventLog("capped", runs) as again:
    run_step(again, "small", lambda: "not run")
    print("replayed:", len(run_step(again, "send", send, effect=sys.argv[3])))
"""


@pytest.mark.skipif(os.name == "nt", reason="RLIMIT_FSIZE is POSIX; Windows has no file size limit to set")
@pytest.mark.parametrize("effect", ["external", "idempotent"])
def test_a_result_the_disk_refused_is_recorded_when_the_step_runs_again_not_its_effect(tmp_path: Path, effect: str) -> None:
    """The refused result of a step with an effect was forgotten: running the step again with
    the same log, as the message advised, found it in doubt ("its process died") or ran it twice."""
    effects = tmp_path / "effects.txt"
    done = subprocess.run(
        [sys.executable, "-W", "error", "-c", EFFECT_REFUSED, str(tmp_path / "runs"), str(effects), effect],
        check=False, capture_output=True, text=True, env=subprocess_env(), timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    refused, then, replayed = done.stdout.splitlines()
    assert refused.startswith("refused: cannot record the result of step 'send' of run 'capped' in "), refused
    assert "File too large" in refused and f"the result its {effect} effect returned is kept" in refused, refused
    assert (then, replayed) == ("then: 100000", "replayed: 100000")
    assert effects.read_text() == "sent\n", "the effect ran once"


def test_a_fork_cut_short_leaves_no_copy_of_a_grandchild(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the fork's own children were removed: the copy of a child's child hung on, below
    a parent that was never made, and took the id the next fork's copy needed."""
    from nb_durable.core.stores import open_store
    from nb_durable.core.whole_runs.children import child_id, start_child
    from nb_durable.core.whole_runs.fork import fork
    from nb_durable.core.writing.writer import RunWriter

    with EventLog("src", tmp_path) as log:
        log.start_run({"task": "t"})
        start_child(log, "spawn", child_id("src", "spawn"), {})
    with EventLog(child_id("src", "spawn"), tmp_path) as log:
        start_child(log, "sub", child_id("src.spawn", "sub"), {})
    append_lines = RunWriter.append_lines

    def full_for_the_fork(self: RunWriter, lines: Sequence[bytes]) -> None:
        if self.run_id == "F":  # its children's copies are written, then the fork's own start is refused
            raise StoreFullError(doing="cannot append", path=str(tmp_path / "F.jsonl"), code=errno.ENOSPC)
        append_lines(self, lines)

    monkeypatch.setattr(RunWriter, "append_lines", full_for_the_fork)
    with pytest.raises(StoreFullError) as raised:
        fork("src", "F", at=1, root=tmp_path)
    assert "no run 'F' was left" in str(raised.value)
    with open_store(tmp_path) as store:
        assert sorted(store.run_ids()) == ["src", "src.spawn", "src.spawn.sub"]
    monkeypatch.undo()
    fork("src", "F", at=1, root=tmp_path).close()  # as the message says: fork again
    with open_store(tmp_path) as store:
        assert sorted(store.run_ids()) == ["F", "F.spawn", "F.spawn.sub", "src", "src.spawn", "src.spawn.sub"]


def test_a_worker_s_one_pass_on_a_full_disk_exits_2_as_for_a_store_it_cannot_reach(tmp_path: Path) -> None:
    """``worker --once`` exited 1, a failed run's code (and a refused key's, which a service keeps
    from restarting), where its help and docs say a store that stops the pass exits 2: no run
    failed, the store needs a person."""
    from nb_durable.agent.fleet.batch import submit

    with small_disk(tmp_path / "disk") as disk:
        store = f"sqlite:///{disk / 'runs.db'}"
        submit("say hello", store=store, run_id="q", workspace=str(tmp_path), demo=True)
        filler = fill(disk)
        done = subprocess.run(
            [sys.executable, "-m", "nb_durable.cli", "worker", "--once", "--store", store],
            check=False, capture_output=True, text=True, env=subprocess_env(NB_DURABLE_DEMO_LATENCY="0"), timeout=60,
        )  # fmt: skip
        assert done.returncode == 2, done.stdout + done.stderr
        assert "the file system holding it is full" in done.stderr and "Free some space" in done.stderr, done.stderr
        filler.unlink()
        assert read_run("q", store).summary.status == "queued", "nothing taken, nothing lost"
