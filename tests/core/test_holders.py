"""Whether a lease's recorded holder lives: a process of this host is looked at, a zombie is dead."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from nb_durable.core.holders import holder_is_alive, lives_here
from tests.waiting import wait_until


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="a zombie is told apart by /proc")
def test_a_killed_holder_not_yet_waited_for_is_dead_though_signalling_it_succeeds() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    holder = {"pid": child.pid, "host": socket.gethostname(), "since": 0.0}
    try:
        assert lives_here(holder) and holder_is_alive(holder)
        child.send_signal(signal.SIGKILL)
        # A zombie until its parent (this test) waits for it: os.kill(pid, 0) still succeeds.
        wait_until(lambda: Path(f"/proc/{child.pid}/stat").read_bytes().rpartition(b") ")[2][:1] == b"Z", "the child to be a zombie")
        os.kill(child.pid, 0)
        assert not lives_here(holder) and not holder_is_alive(holder)
    finally:
        child.kill()
        child.wait()
    assert not lives_here(holder)


def test_this_process_and_a_holder_on_another_host_do_not_live_here() -> None:
    assert not lives_here({"pid": os.getpid(), "host": socket.gethostname()})
    elsewhere = {"pid": os.getpid(), "host": "elsewhere.example"}
    assert not lives_here(elsewhere) and holder_is_alive(elsewhere)  # assumed alive: nothing here can tell
    assert not lives_here(None) and not lives_here({})
