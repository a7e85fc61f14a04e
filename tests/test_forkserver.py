"""A forked child is what a fresh interpreter would have been (``tests/forkserver.py``).

Each command runs twice, once by ``subprocess`` (a fresh interpreter) and once by the fork
server, and what a test can observe must agree: exit codes (``SystemExit``, an exception, an
uncaught ``KeyboardInterrupt``, a signal), the bytes on stdout and stderr, stdin, ``sys.argv``,
``sys.path[0]``, the environment, the working folder, ``atexit`` and non-daemon threads at exit.
A forked child is its own process: it holds a store's lease under its own pid, and a SIGKILL of
it frees the run for the next writer exactly as a fresh interpreter's death does. Commands it
cannot run faithfully are refused, never run differently.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from nb_durable import EventLog, RunLockedError
from tests import forkserver
from tests.conftest import subprocess_env
from tests.waiting import wait_until

PY = sys.executable

PROGRAMS = {
    "exit code": "import sys; print('out'); print('err', file=sys.stderr); sys.exit(7)",
    "exception": "raise ValueError('the program fell over')",
    "keyboard interrupt": "raise KeyboardInterrupt",
    "exit message": "import sys; sys.exit('gone: a message')",
    "argv and path": "import sys, json; print(json.dumps([sys.argv, sys.path[0]]))",
    "stdin": "import sys; data = sys.stdin.read(); print(len(data), data.upper())",
    "environment and folder": "import os; print(os.environ.get('FORKED_PROBE'), os.getcwd())",
    "atexit and threads": textwrap.dedent(
        """
        import atexit, threading, time
        atexit.register(lambda: print('atexit ran', flush=True))
        def later():
            time.sleep(0.2)
            print('thread finished', flush=True)
        threading.Thread(target=later).start()
        print('main done', flush=True)
        """
    ),
    "signal": "import os, signal; os.kill(os.getpid(), signal.SIGTERM)",
    "unbuffered stderr, buffered stdout": "import sys, os; print('a'); sys.stderr.write('b\\n'); os._exit(3)",
}


def _both(
    argv: list[str], cwd: Path, **kwargs: Any
) -> tuple[subprocess.CompletedProcess[str], subprocess.CompletedProcess[str]]:
    env = subprocess_env(FORKED_PROBE="probe-value")
    fresh = subprocess.run(
        argv, check=False, cwd=cwd, env=env, capture_output=True, text=True, timeout=60, **kwargs
    )
    forked = forkserver.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=60, **kwargs)
    return fresh, forked


def _comparable(stderr: str, where: Path) -> str:
    # A traceback names the same file and line in both; only the temporary folder may differ.
    return stderr.replace(str(where), "<cwd>")


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_a_forked_child_behaves_as_a_fresh_interpreter(tmp_path: Path, name: str) -> None:
    kwargs = {"input": "some input\n"} if name == "stdin" else {}
    fresh, forked = _both([PY, "-c", PROGRAMS[name], "an argument"], tmp_path, **kwargs)
    assert (forked.returncode, forked.stdout, _comparable(forked.stderr, tmp_path)) == (
        fresh.returncode, fresh.stdout, _comparable(fresh.stderr, tmp_path)
    ), name  # fmt: skip


def test_a_script_and_a_module_start_as_they_would(tmp_path: Path) -> None:
    script = tmp_path / "tool.py"
    script.write_text("import sys, json\nprint(json.dumps([sys.argv, sys.path[0], __name__, __file__]))\n")
    (tmp_path / "probe_module.py").write_text(
        "import sys, json\nprint(json.dumps([sys.argv[1:], __name__]))\n"
    )
    for argv in ([PY, str(script), "x", "y"], [PY, "-m", "probe_module", "--flag"]):
        fresh, forked = _both(argv, tmp_path)
        assert (forked.returncode, forked.stdout, forked.stderr) == (
            fresh.returncode,
            fresh.stdout,
            fresh.stderr,
        ), argv


def test_a_forked_child_is_its_own_process_and_a_sigkill_ends_only_it(tmp_path: Path) -> None:
    child = forkserver.Popen([PY, "-c", "import os, time; print(os.getpid(), os.getpgid(0), flush=True); time.sleep(60)"],
                             stdout=subprocess.PIPE, text=True, start_new_session=True, env=subprocess_env())  # fmt: skip
    assert child.stdout is not None
    pid, group = map(int, child.stdout.readline().split())
    assert pid == child.pid and pid != os.getpid() and group == pid, "its own pid and, asked, its own session"
    os.kill(child.pid, signal.SIGKILL)
    assert child.wait(30) == -signal.SIGKILL
    child.stdout.close()
    after = forkserver.run(
        [PY, "-c", "print('the server still forks')"], capture_output=True, text=True, env=subprocess_env()
    )
    assert after.stdout == "the server still forks\n"


def test_a_timeout_kills_the_child_as_subprocess_does(tmp_path: Path) -> None:
    with pytest.raises(subprocess.TimeoutExpired):
        forkserver.run([PY, "-c", "import time; time.sleep(60)"], timeout=0.5, env=subprocess_env())


def test_a_forked_writers_lease_is_its_own_and_its_death_frees_the_run(tmp_path: Path) -> None:
    # The child opens a run for writing and holds it; while it lives, this process cannot write
    # the run; once it is SIGKILLed, this process can, as after a fresh interpreter's death.
    store = tmp_path / "runs"
    holder = textwrap.dedent(
        f"""
        import time
        from nb_durable.core.log import EventLog
        log = EventLog("held", {str(store)!r})
        print("holding", flush=True)
        time.sleep(60)
        """
    )
    child = forkserver.Popen([PY, "-c", holder], stdout=subprocess.PIPE, text=True, env=subprocess_env())
    assert child.stdout is not None
    assert child.stdout.readline() == "holding\n"
    with pytest.raises(RunLockedError):
        EventLog("held", str(store))
    os.kill(child.pid, signal.SIGKILL)
    child.wait(30)
    child.stdout.close()
    wait_until(lambda: _opens(store), "the run free for the next writer after the holder's death", 30)


def _opens(store: Path) -> bool:
    try:
        EventLog("held", str(store)).close()
    except RunLockedError:
        return False
    return True


@pytest.mark.parametrize(
    "argv, env, why",
    [
        ([PY, "-W", "error", "-c", "pass"], {}, "interpreter options"),
        (["/bin/sh", "-c", "true"], {}, "is not this interpreter"),
        ([PY, "-c", "pass"], {"PYTHONIOENCODING": "latin-1"}, "PYTHONIOENCODING"),
        ([PY, "-c", "pass"], {"PYTHONPATH": "/somewhere/else"}, "PYTHONPATH entries"),
    ],
)
def test_what_the_server_cannot_run_faithfully_is_refused(
    argv: list[str], env: dict[str, str], why: str
) -> None:
    with pytest.raises(ValueError, match=why):
        forkserver.run(argv, env=subprocess_env(**env))
