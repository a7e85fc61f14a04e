"""The supervisor of one bash command: it owns the command's whole process tree, and ends it.

``bash.run_command`` starts this file as a script, ``python -I -S _supervisor.py TIMEOUT
OUT_FD PARENT_PID COMMAND``, with the control pipe on stdin and a pipe for its one-line JSON
report on stdout; isolated, without site, and by path, so it never imports nb_durable (or
anything but the standard library) and starts fast for every command. It forks
``bash -c COMMAND`` into a process group of its own, with OUT_FD as its stdout and stderr.

Invariant: no process of the command outlives the supervisor's watch. It is a child
subreaper (Linux), so descendants that double-fork or ``setsid`` away from the group are
re-parented to it rather than to init, and it kills every process below it (the group, then
each descendant found in /proc, until none is left) when the timeout passes, when bash exits
(background processes never outlive their command), when it is signalled (SIGTERM, SIGHUP;
SIGINT is its parent's to act on, see ``_CAUGHT``), and when its
parent dies: the control pipe's only writer is the parent, so its death, even by SIGKILL, is
an EOF seen at once (PR_SET_PDEATHSIG backs this up).
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
import time
from types import FrameType
from typing import NoReturn

# try/except/pass rather than contextlib.suppress throughout: under -S contextlib costs some
# 7 ms to import, and every command pays the supervisor's start-up.

_CAUGHT = (signal.SIGTERM, signal.SIGHUP)
# SIGINT is ignored: it is a person's interrupt of the *parent* (the kernel's interrupt button,
# which ipykernel forwards to every child in its process group, or Ctrl-C in a terminal), and
# the parent decides what it stops. In the foreground its KeyboardInterrupt closes the control
# pipe, which ends the command; a run going on in another thread of that kernel, or in a
# worker, must not have its command killed under it and recorded as a result.
_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36


def descendants(root: int) -> list[int]:
    """Every process below ``root``, from the parent links in /proc (empty without /proc)."""
    kids: dict[int, list[int]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                data = f.read()
            # The command name may hold spaces and parentheses: the fields follow the last ')'.
            ppid = int(data[data.rindex(b")") + 2 :].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        kids.setdefault(ppid, []).append(int(name))
    out: list[int] = []
    todo = [root]
    while todo:
        for pid in kids.get(todo.pop(), ()):
            out.append(pid)
            todo.append(pid)
    return out


class Tree:
    """The command's process tree: bash's process group, and every process below this one."""

    def __init__(self) -> None:
        self.group = 0
        """bash's pid, which is its group's id; 0 before the fork and once the group is killed."""

    def kill(self) -> set[int]:
        """Kill every process of the tree and reap it; return the pids found below this process."""
        # One killpg, while bash is unreaped, so the group id cannot name another group yet;
        # then every descendant found in /proc (as subreaper this process is the ancestor of
        # all of them) until no child is left to reap.
        seen: set[int] = set()
        me = os.getpid()
        if self.group:
            try:  # noqa: SIM105
                os.killpg(self.group, signal.SIGKILL)
            except OSError:
                pass
            self.group = 0
        for _ in range(1000):
            for pid in descendants(me):
                seen.add(pid)
                try:  # noqa: SIM105
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            while True:
                try:
                    pid, _status = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    return seen
                if pid == 0:
                    break
            time.sleep(0.002)
        return seen


def report(**fields: object) -> None:
    """Write the one-line JSON report to stdout; a parent that is gone no longer wants it."""
    try:  # noqa: SIM105
        os.write(1, (json.dumps(fields) + "\n").encode())
    except OSError:
        pass


def _arm(tree: Tree) -> None:
    """Stop the tree on SIGTERM and SIGHUP, ignore SIGINT; become subreaper; die with the parent."""

    def on_signal(signum: int, frame: FrameType | None) -> None:
        tree.kill()
        report(exit=None, cancelled=True, signal=signum)
        os._exit(1)

    for s in _CAUGHT:
        signal.signal(s, on_signal)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _CAUGHT)  # a mask inherited from the caller's thread
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)  # orphans of the command come here
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)  # a second line behind the pipe
    except Exception:
        pass


def _exec_bash(command: str, out_fd: int) -> NoReturn:
    """In the forked child: a group of its own, default signals, no stdin; becomes bash."""
    try:
        os.setpgid(0, 0)
        for s in (*_CAUGHT, signal.SIGINT):
            signal.signal(s, signal.SIG_DFL)
        # Python ignores these; exec keeps ignored signals, and `yes | head` needs SIGPIPE.
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out_fd, 1)
        os.dup2(out_fd, 2)
        for fd in {null, out_fd} - {0, 1, 2}:
            os.close(fd)
        os.execvp("bash", ["bash", "-c", command])
    except BaseException as e:
        try:
            os.write(2, f"cannot start bash: {e}\n".encode())
        finally:
            os._exit(127)


def main(argv: list[str]) -> None:
    """Run ``argv`` = [TIMEOUT, OUT_FD, PARENT_PID, COMMAND] to its end, then report how it went."""
    timeout, out_fd, parent, command = float(argv[0]), int(argv[1]), int(argv[2]), argv[3]
    tree = Tree()
    _arm(tree)
    if os.getppid() != parent:  # the parent died before the death signal was armed
        report(exit=None, cancelled=True)
        return
    # Blocked across the fork, so a signal cannot land between the fork and `tree.group = pid`.
    signal.pthread_sigmask(signal.SIG_BLOCK, _CAUGHT)
    pid = os.fork()
    if pid == 0:
        _exec_bash(command, out_fd)
    tree.group = pid
    try:  # noqa: SIM105
        os.setpgid(pid, pid)  # also here: whichever of the two runs first makes the group
    except OSError:
        pass
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _CAUGHT)
    os.close(out_fd)
    try:
        pidfd: int | None = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = None
    deadline = time.monotonic() + timeout
    status: int | None = None
    why: str | None = None
    while status is None and why is None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            why = "timed_out"
            break
        fds = [0] if pidfd is None else [0, pidfd]
        # Without a pidfd, bash's exit wakes nothing: poll for it.
        ready = select.select(fds, [], [], remaining if pidfd is not None else min(remaining, 0.01))[0]
        if 0 in ready and not os.read(0, 4096):
            why = "cancelled"  # EOF: the parent died or gave up
        # WNOWAIT: bash stays a zombie, holding its pid (the group id) until the kill is done.
        done = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        if done is not None and done.si_pid:
            status = done.si_status if done.si_code == os.CLD_EXITED else -done.si_status
    leftovers = tree.kill()
    leftovers.discard(pid)
    report(
        exit=status,
        timed_out=why == "timed_out",
        cancelled=why == "cancelled",
        leftovers=len(leftovers) if status is not None else 0,
    )


if __name__ == "__main__":
    main(sys.argv[1:])
