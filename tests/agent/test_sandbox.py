"""The workspace confinement and the command runner, on real files, symlinks and processes."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from nb_durable.agent.secrets import Redactor
from nb_durable.agent.workspace import resolve_in_workspace, run_command
from nb_durable.errors import ToolError, WorkspaceError
from tests.conftest import subprocess_env


def living(marker: str) -> list[int]:
    """Pids of processes (zombies excluded) whose command line contains ``marker``.

    ``sleep D`` also matches the runner, supervisor and shells whose arguments hold that text.
    """
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = Path(f"/proc/{name}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmdline and state not in (b"Z", b"X"):
            found.append(int(name))
    return found


def wait_until_gone(marker: str, seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    while (left := living(marker)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


@pytest.fixture
def duration() -> str:
    """A sleep duration no other process on the machine uses, to find this test's sleeps."""
    return f"97.{random.randrange(10**6):06d}"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


# --- paths -----------------------------------------------------------------------------------


def test_paths_inside_resolve(ws: Path) -> None:
    (ws / "a").mkdir()
    real = ws.resolve()
    assert resolve_in_workspace(ws, "a/b.txt") == real / "a" / "b.txt"
    assert resolve_in_workspace(ws, ".") == real
    assert resolve_in_workspace(ws, "a/../c") == real / "c"
    assert resolve_in_workspace(ws, "./a//b") == real / "a" / "b"


def test_symlink_pointing_inside_is_allowed(ws: Path) -> None:
    (ws / "real").mkdir()
    (ws / "alias").symlink_to(ws / "real")
    assert resolve_in_workspace(ws, "alias/x") == ws.resolve() / "real" / "x"


@pytest.mark.parametrize("path", ["..", "../x", "a/../../x", "a/b/../../../etc/passwd"])
def test_dotdot_escapes_are_refused(ws: Path, path: str) -> None:
    with pytest.raises(WorkspaceError, match=r"leaves the workspace through '\.\.'"):
        resolve_in_workspace(ws, path)


def test_absolute_paths_are_refused_even_inside(ws: Path) -> None:
    with pytest.raises(WorkspaceError, match="absolute path"):
        resolve_in_workspace(ws, "/etc/passwd")
    with pytest.raises(WorkspaceError, match="relative to the workspace"):
        resolve_in_workspace(ws, str(ws / "x"))


def test_symlinks_out_are_refused_and_named(ws: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (ws / "out").symlink_to(outside)
    (ws / "file_link").symlink_to(outside / "f.txt")
    (ws / "deep").mkdir()
    (ws / "deep" / "up").symlink_to("../../outside")
    for path in ["out", "out/x", "out/sub/new.txt", "file_link", "deep/up/x"]:
        with pytest.raises(WorkspaceError, match="through the symlink") as e:
            resolve_in_workspace(ws, path)
        assert "leads outside the workspace" in str(e.value)


def test_empty_and_nul_paths_are_refused(ws: Path) -> None:
    for path in ["", "  ", "a\0b"]:
        with pytest.raises(WorkspaceError):
            resolve_in_workspace(ws, path)


def test_missing_workspace_is_reported(tmp_path: Path) -> None:
    with pytest.raises(WorkspaceError, match="not an existing folder"):
        resolve_in_workspace(tmp_path / "nope", "x")


# --- commands --------------------------------------------------------------------------------


def test_output_is_interleaved_with_the_exit_status(ws: Path) -> None:
    done = run_command("echo out; echo err >&2; echo out2; exit 3", cwd=ws, timeout=10, output_limit=1000)
    assert done.output == "out\nerr\nout2\n"
    assert done.exit_status == 3
    assert not done.timed_out


def test_runs_in_the_workspace_with_the_given_env_and_no_stdin(ws: Path) -> None:
    done = run_command('pwd; echo "$GREETING"; cat; echo end', cwd=ws, env={"GREETING": "hello", "PATH": os.environ["PATH"]}, timeout=10, output_limit=1000)
    assert done.output == f"{ws.resolve()}\nhello\nend\n"


def test_killed_by_a_signal_is_a_negative_status(ws: Path) -> None:
    assert run_command("kill -9 $$", cwd=ws, timeout=10, output_limit=100).exit_status == -9


def test_sigpipe_behaves_as_in_a_shell(ws: Path) -> None:
    # Python ignores SIGPIPE; a child that inherited that would see `yes | head` differently.
    done = run_command('yes | head -c 4 >/dev/null; echo "${PIPESTATUS[@]}"', cwd=ws, timeout=10, output_limit=100)
    assert done.output == "141 0\n"


def test_timeout_kills_the_whole_process_tree(ws: Path, duration: str) -> None:
    started = time.monotonic()
    done = run_command(f"sleep {duration} & sleep {duration}", cwd=ws, timeout=1, output_limit=100)
    assert done.timed_out and done.exit_status is None
    assert time.monotonic() - started < 5
    assert living(f"sleep {duration}") == []


def test_processes_that_leave_the_group_die_too(ws: Path, duration: str) -> None:
    # setsid and a double fork escape a process group; the subreaper supervisor still owns them.
    done = run_command(f"setsid sleep {duration} & (sleep {duration} &); sleep 30", cwd=ws, timeout=1, output_limit=100)
    assert done.timed_out
    assert wait_until_gone(f"sleep {duration}", 1) == []


def test_background_processes_do_not_outlive_the_command(ws: Path, duration: str) -> None:
    started = time.monotonic()
    done = run_command(f"sleep {duration} & setsid sleep {duration} & echo started", cwd=ws, timeout=30, output_limit=100)
    assert done.output == "started\n" and done.exit_status == 0
    assert done.leftovers == 2
    assert time.monotonic() - started < 5  # the leftovers held the output pipe: they did not block us
    assert living(f"sleep {duration}") == []


def _sleeping(duration: str) -> list[int]:
    """The live processes that are exactly ``sleep <duration>``."""
    found = []
    for pid in living(duration):
        try:
            if Path(f"/proc/{pid}/cmdline").read_bytes() == f"sleep\0{duration}\0".encode():
                found.append(pid)
        except OSError:
            pass  # gone between the listing and the read
    return found


def _spawn_runner(ws: Path, duration: str, catch_interrupt: bool = False) -> subprocess.Popen[bytes]:
    """A Python process that runs three sleeps through run_command and writes their pids."""
    command = (
        f"sleep {duration} & echo $! >> pids; setsid sleep {duration} & echo $! >> pids; "
        f"(sleep {duration} & echo $! >> pids; wait) & wait"
    )
    code = textwrap.dedent(f"""
        import signal
        from nb_durable.agent.workspace import run_command
        # A shell starts background jobs with SIGINT ignored; Python then never raises KeyboardInterrupt.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            run_command({command!r}, cwd={str(ws)!r}, timeout=60, output_limit=100)
        except KeyboardInterrupt:
            print("interrupted", flush=True)
    """)
    child = subprocess.Popen([sys.executable, "-c", code], env=subprocess_env(), stdout=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 15
        while len((ws / "pids").read_text().split() if (ws / "pids").exists() else []) < 3:
            assert time.monotonic() < deadline, "the runner never started its sleeps"
            assert child.poll() is None, "the runner died early"
            time.sleep(0.02)
        # A pid is written as soon as its job forks; it becomes "sleep" only once it has exec'd.
        while len(_sleeping(duration)) < 3:
            assert time.monotonic() < deadline, f"only {_sleeping(duration)} became sleeps"
            time.sleep(0.02)
    except BaseException:
        child.kill()
        child.communicate(timeout=30)  # reaped, and its stdout pipe closed
        raise
    return child


def test_sigkilled_parent_takes_the_command_with_it(ws: Path, duration: str) -> None:
    child = _spawn_runner(ws, duration)
    child.kill()  # SIGKILL: no handler, no finally, no atexit runs in the parent
    child.wait()
    child.stdout.close()  # type: ignore[union-attr]  # not read to its end: a command that outlived the parent would hold it open
    assert wait_until_gone(f"sleep {duration}", 2) == []
    assert wait_until_gone(duration, 2) == []  # the supervisor (its argv holds the command) too


def test_keyboard_interrupt_stops_the_command(ws: Path, duration: str) -> None:
    child = _spawn_runner(ws, duration)
    try:
        child.send_signal(signal.SIGINT)
        out, _ = child.communicate(timeout=10)
    finally:
        child.kill()  # never leave the runner behind, even when the test fails
    assert out == b"interrupted\n"
    assert wait_until_gone(duration, 2) == []


def test_output_cap_keeps_head_and_tail(ws: Path) -> None:
    command = "echo START; for i in $(seq 1 20000); do echo line $i; done; echo END"
    done = run_command(command, cwd=ws, timeout=20, output_limit=1000)
    assert done.output.startswith("START\nline 1\n")
    assert done.output.endswith("line 20000\nEND\n")
    assert done.omitted > 100_000
    assert f"[... {done.omitted} characters of output omitted ...]" in done.output
    assert len(done.output) < 1100


@pytest.mark.slow(10)
def test_huge_output_is_drained_without_blocking(ws: Path) -> None:
    # The timeout is a ceiling, not a wait: drained, the command ends in seconds (20 s were not
    # enough for its 50 MB on a loaded machine); blocked on a full pipe, it would never end.
    done = run_command("head -c 50000000 /dev/zero | tr '\\0' a; echo", cwd=ws, timeout=120, output_limit=100)
    assert done.exit_status == 0
    assert done.omitted == 50_000_001 - 100


def test_output_is_redacted_across_reads_and_the_cap(ws: Path) -> None:
    secret = "tok-" + "x1y2z3" * 5
    r = Redactor({"SERVICE_TOKEN": secret})
    # The secret straddles the head's end and, later, a 64 KiB read boundary.
    command = f"printf '%.0sa' $(seq 1 47); printf '{secret}'; head -c 65530 /dev/zero | tr '\\0' b; printf '{secret}'; echo"
    done = run_command(command, cwd=ws, timeout=20, output_limit=100, redactor=r)
    assert secret[:4] not in done.output
    full = run_command(command, cwd=ws, timeout=20, output_limit=200_000, redactor=r)
    assert full.output.count("[REDACTED:SERVICE_TOKEN]") == 2
    assert secret[:4] not in full.output


def test_invalid_output_bytes_are_replaced(ws: Path) -> None:
    done = run_command("printf 'ok \\377\\376 done'", cwd=ws, timeout=10, output_limit=100)
    assert done.output == "ok \ufffd\ufffd done"


def test_overlong_and_nul_commands_are_refused_before_running(ws: Path) -> None:
    with pytest.raises(ToolError, match="write a script"):
        run_command("echo " + "x" * 200_000 + " > made", cwd=ws, timeout=10, output_limit=100)
    with pytest.raises(ToolError, match="NUL"):
        run_command("touch made\0", cwd=ws, timeout=10, output_limit=100)
    assert not (ws / "made").exists()


def test_a_command_stopped_midway_leaves_no_pipe_open(ws: Path) -> None:
    """A command stopped before its output was collected (a run stopped, a Ctrl-C) left the
    supervisor's stdout and stderr open until the garbage collector found them: two descriptors
    a call, in a kernel that lives for days."""
    import gc
    import threading
    import warnings

    from nb_durable.agent.run.stopping import RunStopped, StopSignal

    stop = StopSignal()
    threading.Timer(0.3, stop.request).start()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        with pytest.raises(RunStopped):
            run_command("sleep 30", cwd=ws, timeout=60, output_limit=1000, stop=stop)
        gc.collect()
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []
