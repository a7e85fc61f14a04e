"""The keeper of one stdio MCP server: the server's process tree ends when the run's process does.

``connection`` starts this file as a script, ``python -I -S _keeper.py PARENT_PID COMMAND
[ARGS...]``, in place of the server's own command; isolated, without site, and by path, so it
imports nothing but the standard library, ``_supervisor``'s ``Tree`` (the one owner of "kill
a process tree") and ``_capped``. The server inherits its stdin, which the MCP client writes
to, so the keeper cannot watch a control pipe as ``run_bash``'s supervisor does. Instead it
asks the kernel for SIGTERM when its parent dies (``PR_SET_PDEATHSIG``), becomes a child
subreaper, and watches its parent between reads: when the parent is gone, or is signalled,
the keeper kills every process below it. The MCP SDK starts a stdio server in a session of
its own, so killing the parent's process group would never reach it; this is what does.

The server's stdout comes through the keeper, a piece at a time, with every JSON string cut
at ``_capped.STRING_LIMIT`` bytes, so a huge answer never reaches the run's process whole.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import sys
from types import FrameType

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(os.path.dirname(os.path.dirname(_HERE)), "workspace"), _HERE]

from _capped import JsonLineCapper  # type: ignore[import-not-found]  # noqa: E402
from _supervisor import Tree  # type: ignore[import-not-found]  # noqa: E402

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
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.setpgid(0, 0)
            os.dup2(write_end, 1)
            os.close(read_end)
            os.close(write_end)
            for s in _CAUGHT:
                signal.signal(s, signal.SIG_DFL)
            signal.signal(signal.SIGPIPE, signal.SIG_DFL)
            os.execvp(command[0], command)
        except BaseException as e:
            os.write(2, f"cannot start the MCP server {command[0]!r}: {_why(command[0], e)}\n".encode())
            os._exit(127)
    tree.group = pid
    os.close(write_end)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # a client gone is a BrokenPipeError, not a silent death
    status = 1
    relay: _Relay | None = _Relay(read_end)
    while True:
        if relay is not None and not relay.step(0.05):
            relay = None  # the server closed its stdout (or the client stopped reading)
        elif relay is None:
            select.select([], [], [], 0.05)
        try:
            done, code = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            tree.group = 0
            break
        if done:
            # Reaped: its pid (the group id) may name another group now, so only descendants remain.
            tree.group = 0
            status = os.waitstatus_to_exitcode(code)
            while relay is not None and relay.step(0):
                pass  # what it wrote before it exited still goes to the client
            break
        if os.getppid() != parent:
            break  # the run's process is gone (the death signal backs this up)
    tree.kill()
    return status if status >= 0 else 128 - status


def _why(program: str, error: BaseException) -> str:
    """Why ``program`` did not start, and what to do: the config's command is the usual cause."""
    if isinstance(error, FileNotFoundError) and os.sep not in program and shutil.which(program) is None:
        return f"it is not on PATH ({os.environ.get('PATH', '')}); give its full path as the command, or install it"
    if isinstance(error, FileNotFoundError) and not os.path.lexists(program):
        return (f"no such file in the server's working directory {os.getcwd()}; give an absolute path "
                "as the command, or the folder it is relative to as cwd")  # fmt: skip
    if isinstance(error, FileNotFoundError):
        return f"{error.strerror}: the interpreter its #! line names is missing"
    if isinstance(error, PermissionError):
        return f'{error.strerror}: make it executable (chmod +x), or run it with its interpreter ("command": "python", "args": [...])'
    return str(error)


class _Relay:
    """The server's stdout to ours, through the capper."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.capper = JsonLineCapper()

    def step(self, timeout: float) -> bool:
        """Pass on what the server wrote within ``timeout``; False once there is no more."""
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return timeout > 0  # a drain (timeout 0) ends when nothing is left
        data = os.read(self.fd, 1 << 16)
        try:
            if data:
                out = memoryview(self.capper.feed(data))
                while out:
                    out = out[os.write(1, out) :]
                return True
        except BrokenPipeError:
            pass  # the client stopped reading: so does the keeper, and the server's writes fail
        os.close(self.fd)
        return False


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
