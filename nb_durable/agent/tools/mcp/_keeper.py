"""The keeper of one stdio MCP server: the server's process tree ends when the run's process does.

``connection`` starts this file as a script, ``python -I -S _keeper.py PARENT_PID COMMAND
[ARGS...]``, in place of the server's own command; isolated, without site, and by path, so it
imports nothing but the standard library and ``_supervisor``'s ``Tree`` (the one owner of
"kill a process tree"). The server inherits its stdin and stdout, which the MCP client
speaks over, so the keeper cannot watch a control pipe as ``run_bash``'s supervisor does.
Instead it asks the kernel for SIGTERM when its parent dies (``PR_SET_PDEATHSIG``), becomes a
child subreaper, and polls its parent: when the parent is gone, or is signalled, the keeper
kills every process below it. The MCP SDK starts a stdio server in a session of its own, so
killing the parent's process group would never reach it; this is what does.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from types import FrameType

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "workspace"))

from _supervisor import Tree  # type: ignore[import-not-found]

_CAUGHT = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


def main(argv: list[str]) -> int:
    """Run ``argv`` = [PARENT_PID, COMMAND, ARGS...] until it exits or the parent dies."""
    parent, command = int(argv[0]), argv[1:]
    tree = Tree()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        tree.kill()
        os._exit(128 + signum)

    for s in _CAUGHT:
        signal.signal(s, on_signal)
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: orphans of the server come here
        libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
    except Exception:
        pass
    if os.getppid() != parent:
        return 1  # the parent died before the death signal was armed
    pid = os.fork()
    if pid == 0:
        try:
            os.setpgid(0, 0)
            for s in _CAUGHT:
                signal.signal(s, signal.SIG_DFL)
            signal.signal(signal.SIGPIPE, signal.SIG_DFL)
            os.execvp(command[0], command)
        except BaseException as e:
            os.write(2, f"cannot start the MCP server {command[0]!r}: {e}\n".encode())
            os._exit(127)
    tree.group = pid
    status = 1
    while True:
        try:
            done, code = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            tree.group = 0
            break
        if done:
            # Reaped: its pid (the group id) may name another group now, so only descendants remain.
            tree.group = 0
            status = os.waitstatus_to_exitcode(code)
            break
        if os.getppid() != parent:
            break  # the run's process is gone (the death signal backs this up)
        time.sleep(0.05)
    tree.kill()
    return status if status >= 0 else 128 - status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
