"""The workspace: path confinement, the file operations and the bash runner behind the built-ins.

Paths: a tool's path is relative to the workspace and is resolved (symlinks included, every
parent too) before anything is touched; a path that ends up outside the workspace raises
``WorkspaceError`` before any effect, whether it leaves through ``..``, is absolute, or
passes through a symlink that points out.

Commands: ``run_command`` runs ``bash -c`` through a small supervisor process (standard
library Python, started with ``-I -S``) that owns the command's whole process tree:

    this process ──control pipe──▶ supervisor ──fork──▶ bash -c COMMAND (own process group)
         ▲                             │                       └─ children, grandchildren...
         └────── output pipe ──────────┼──────────────────────────┘ (stdout+stderr, interleaved)

The supervisor is a child subreaper (Linux), so descendants that double-fork or ``setsid``
away from the group are re-parented to it rather than to init, and it kills every process
below it (the group, then each descendant found in /proc, until none is left) when the
timeout passes, when bash exits (background processes never outlive their command), and
when this process dies: the control pipe's only writer is this process, so its death, even
by SIGKILL, is an EOF the supervisor sees at once (PR_SET_PDEATHSIG backs this up). Invariant:
when ``run_command`` returns or its caller dies, no process of the command is left to finish
an effect that the log will never record. ``run_command`` is not a security sandbox: bash
can reach anything the user can; confinement of commands is the approval rule's job.
"""

from __future__ import annotations

import codecs
import json
import os
import select
import shutil
import stat
import subprocess
import sys
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from ..errors import ToolError, WorkspaceError
from .secrets import Redactor

__all__ = [
    "CommandResult",
    "list_entries",
    "read_text",
    "resolve_in_workspace",
    "run_command",
    "write_text",
]

MAX_COMMAND_BYTES = 100_000  # Linux refuses a single argument over 128 KiB
_LIST_LIMIT = 1000  # entries per list_dir


def resolve_in_workspace(workspace: str | os.PathLike[str], path: str) -> Path:
    """The real path of ``path`` inside ``workspace``, or ``WorkspaceError`` if it leaves it."""
    root = Path(os.path.realpath(workspace))
    if not root.is_dir():
        raise WorkspaceError(f"the workspace {str(root)!r} is not an existing folder; create it or choose another")
    if not isinstance(path, str) or not path.strip():
        raise WorkspaceError("the path is empty; give a path relative to the workspace, such as 'README.md' or '.'")
    if "\0" in path:
        raise WorkspaceError(f"the path {path!r} contains a NUL character; no file can have that name")
    if os.path.isabs(path):
        raise WorkspaceError(
            f"{path!r} is an absolute path; tools work inside the workspace only: "
            "give a path relative to the workspace root, such as 'src/main.py'"
        )
    normal = os.path.normpath(path)
    if normal == os.pardir or normal.startswith(os.pardir + os.sep):
        raise WorkspaceError(f"{path!r} leaves the workspace through '..'; give a path inside the workspace")
    target = Path(os.path.realpath(root / path))
    if target != root and not target.is_relative_to(root):
        raise WorkspaceError(f"{path!r} leads outside the workspace {_through_symlink(root, path)}; give a path inside it")
    return target


def _through_symlink(root: Path, path: str) -> str:
    """Name the symlink by which ``path`` leaves ``root``, for the error message."""
    here = root
    for part in Path(path).parts:
        here = here / part
        if here.is_symlink():
            real = Path(os.path.realpath(here))
            if real != root and not real.is_relative_to(root):
                return f"through the symlink {str(here.relative_to(root))!r} (-> {os.readlink(here)})"
    return "through a symlink"


def _stat_existing(target: Path, path: str) -> os.stat_result:
    try:
        return target.stat()
    except FileNotFoundError:
        raise ToolError(f"{path!r} does not exist in the workspace; list_dir shows what is there") from None


def read_text(workspace: Path, path: str, *, limit: int, redactor: Redactor | None = None) -> str:
    """The UTF-8 text of a workspace file, redacted, capped at ``limit`` characters with a note."""
    target = resolve_in_workspace(workspace, path)
    st = _stat_existing(target, path)
    if stat.S_ISDIR(st.st_mode):
        raise ToolError(f"{path!r} is a folder, not a file; use list_dir to see what it holds")
    if not stat.S_ISREG(st.st_mode):
        raise ToolError(f"{path!r} is not a regular file (a device, pipe or socket); read_file reads files only")
    redactor = redactor or Redactor()
    # Enough bytes for `limit` characters of any UTF-8 plus a whole secret after them.
    want = 4 * (limit + redactor.longest) + 4
    with open(target, "rb") as f:
        data = f.read(want + 1)
    truncated = len(data) > want
    data = data[:want]
    if b"\0" in data[:8192]:
        raise ToolError(f"{path!r} is a binary file ({st.st_size} bytes); read_file shows text only (try run_bash with `file` or `xxd | head`)")
    try:
        text = codecs.getincrementaldecoder("utf-8")().decode(data, final=not truncated)
    except UnicodeDecodeError as e:
        raise ToolError(
            f"{path!r} is not UTF-8 text (invalid byte at offset {e.start}); it may be binary "
            "or another encoding: inspect it with run_bash (`file`, `iconv`)"
        ) from None
    if not truncated and len(text) <= limit:
        return redactor.redact(text)
    # No flush: the held-back tail could be the start of a secret the cut would expose.
    shown = redactor.stream().feed(text)[:limit]
    lines = shown.count("\n")
    return (
        f"{shown}\n[read_file: showing the first {len(shown)} characters ({lines} lines) of {path!r}, "
        f"a {st.st_size}-byte file; read further with run_bash, e.g. sed -n '{lines + 1},{lines + 200}p' {path}]"
    )


def write_text(workspace: Path, path: str, content: str) -> str:
    """Write ``content`` (UTF-8) to a workspace file atomically; unchanged if it holds it already."""
    target = resolve_in_workspace(workspace, path)
    if target == Path(os.path.realpath(workspace)):
        raise ToolError("the path names the workspace folder itself; give a file path such as 'notes.txt'")
    data = content.encode("utf-8")
    mode: int | None = None
    try:
        st = target.stat()
    except FileNotFoundError:
        st = None
    except NotADirectoryError:
        raise ToolError(f"a parent of {path!r} is a file, not a folder") from None
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise ToolError(f"{path!r} is a folder; write_file writes files (give a path inside it)")
        if not stat.S_ISREG(st.st_mode):
            raise ToolError(f"{path!r} is not a regular file; write_file will not replace it")
        mode = stat.S_IMODE(st.st_mode)
        if st.st_size == len(data) and target.read_bytes() == data:
            return _wrote(path, content, data)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise ToolError(f"a parent of {path!r} is a file, not a folder") from None
    # Same folder, so the rename is atomic. The name is fixed per target: a write killed
    # before its rename leaves this file, and the write's re-run truncates and renames it away.
    tmp = target.parent / f".{target.name}.nb-durable-write.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)  # umask applies to new files
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return _wrote(path, content, data)


def _wrote(path: str, content: str, data: bytes) -> str:
    # The same words whether the bytes were new or already there: a write re-run after a
    # crash must hand the model the result the first run would have (write_file is idempotent).
    lines = content.count("\n") + (1 if content and not content.endswith("\n") else 0)
    return f"Wrote {path} ({len(data)} bytes, {lines} line{'' if lines == 1 else 's'})"


def list_entries(workspace: Path, path: str, *, limit: int) -> str:
    """A workspace folder's entries, sorted, folders with a trailing '/', capped."""
    target = resolve_in_workspace(workspace, path or ".")
    st = _stat_existing(target, path)
    if not stat.S_ISDIR(st.st_mode):
        raise ToolError(f"{path!r} is a file, not a folder; use read_file to read it")
    lines: list[str] = []
    with os.scandir(target) as it:
        entries = sorted(it, key=lambda e: e.name)
    for e in entries:
        if e.is_symlink():
            lines.append(f"{e.name}{'/' if e.is_dir() else ''} -> {os.readlink(e.path)}")
        else:
            lines.append(e.name + ("/" if e.is_dir() else ""))
    if not lines:
        return f"{path or '.'} is an empty folder"
    shown, size = [], 0
    for line in lines[:_LIST_LIMIT]:
        size += len(line) + 1
        if size > limit:
            break
        shown.append(line)
    if len(shown) < len(lines):
        shown.append(f"[list_dir: showing {len(shown)} of {len(lines)} entries; narrow it with run_bash, e.g. ls {path} | grep PATTERN]")
    return "\n".join(shown)


# --- commands -------------------------------------------------------------------------------

# Run as `python -I -S -c _SUPERVISOR TIMEOUT OUT_FD PARENT_PID COMMAND`, with the control
# pipe on stdin and a pipe for its one-line JSON report on stdout. Standard library only,
# and small: it starts for every command.
_SUPERVISOR = r"""
import json, os, select, signal, sys, time

def descendants(root):
    kids = {}
    try:
        names = os.listdir('/proc')
    except OSError:
        return []
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open('/proc/%s/stat' % name, 'rb') as f:
                data = f.read()
            # the command name may hold spaces and parentheses: fields follow the last ')'
            ppid = int(data[data.rindex(b')') + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        kids.setdefault(ppid, []).append(int(name))
    out, todo = [], [root]
    while todo:
        for pid in kids.get(todo.pop(), ()):
            out.append(pid)
            todo.append(pid)
    return out

def kill_tree():
    # One killpg, while bash is unreaped, so the group id cannot name another group yet; then
    # every descendant found in /proc (as subreaper we are the ancestor of all of them) until
    # no child is left to reap.
    global group
    seen = set()
    me = os.getpid()
    if group:
        try:
            os.killpg(group, signal.SIGKILL)
        except OSError:
            pass
        group = 0
    for _ in range(1000):
        for pid in descendants(me):
            seen.add(pid)
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return seen
            if pid == 0:
                break
        time.sleep(0.002)
    return seen

def report(**fields):
    try:
        os.write(1, (json.dumps(fields) + '\n').encode())
    except OSError:
        pass

group = 0

def on_signal(signum, frame):
    kill_tree()
    report(exit=None, cancelled=True, signal=signum)
    os._exit(1)

def main():
    global group
    timeout, out_fd, parent, command = float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    caught = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
    for s in caught:
        signal.signal(s, on_signal)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, caught)  # a mask inherited from the caller's thread
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: orphans of the command come to us
        libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG: a second line behind the pipe
    except Exception:
        pass
    if os.getppid() != parent:  # the parent died before the death signal was armed
        report(exit=None, cancelled=True)
        return
    # Blocked across the fork, so a signal cannot land between fork and `group = pid`.
    signal.pthread_sigmask(signal.SIG_BLOCK, caught)
    pid = os.fork()
    if pid == 0:
        try:
            os.setpgid(0, 0)
            for s in caught:
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
            os.execvp('bash', ['bash', '-c', command])
        except BaseException as e:
            try:
                os.write(2, ('cannot start bash: %s\n' % e).encode())
            finally:
                os._exit(127)
    group = pid
    try:
        os.setpgid(pid, pid)  # also here: whichever of the two runs first makes the group
    except OSError:
        pass
    signal.pthread_sigmask(signal.SIG_UNBLOCK, caught)
    os.close(out_fd)
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = None
    deadline = time.monotonic() + timeout
    status = None
    why = None
    while status is None and why is None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            why = 'timed_out'
            break
        fds = [0] if pidfd is None else [0, pidfd]
        ready = select.select(fds, [], [], remaining if pidfd is not None else min(remaining, 0.01))[0]
        if 0 in ready and not os.read(0, 4096):
            why = 'cancelled'  # EOF: the parent died or gave up
        # WNOWAIT: bash stays a zombie, holding its pid (the group id) until kill_tree is done.
        done = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        if done is not None and done.si_pid:
            status = done.si_status if done.si_code == os.CLD_EXITED else -done.si_status
    leftovers = kill_tree()
    leftovers.discard(pid)
    report(exit=status, timed_out=why == 'timed_out', cancelled=why == 'cancelled',
           leftovers=len(leftovers) if status is not None else 0)

main()
"""


@dataclass(frozen=True)
class CommandResult:
    """What a command did: its output (redacted, capped), how it ended, and how long it took."""

    output: str
    exit_status: int | None  # None when it was stopped; negative: killed by that signal
    timed_out: bool = False
    cancelled: bool = False  # stopped from outside (a signal to the supervisor) before it ended
    omitted: int = 0  # characters of output left out by the cap
    leftovers: int = 0  # processes still running when bash exited, stopped then
    seconds: float = 0.0


class _Capture:
    """Keeps the head and the tail of a redacted stream of bytes within ``limit`` characters."""

    def __init__(self, limit: int, redactor: Redactor) -> None:
        self.head_limit = limit // 2
        self.tail_limit = limit - self.head_limit
        self.head: list[str] = []
        self.head_size = 0
        self.tail: deque[str] = deque()
        self.tail_size = 0
        self.total = 0
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._stream = redactor.stream()

    def feed(self, data: bytes, final: bool = False) -> None:
        text = self._stream.feed(self._decoder.decode(data, final))
        if final:
            text += self._stream.flush()
        if not text:
            return
        self.total += len(text)
        if self.head_size < self.head_limit:
            room = self.head_limit - self.head_size
            self.head.append(text[:room])
            self.head_size += len(self.head[-1])
            text = text[room:]
        if text:
            self.tail.append(text)
            self.tail_size += len(text)
            while self.tail_size - len(self.tail[0]) >= self.tail_limit:
                self.tail_size -= len(self.tail.popleft())

    def result(self) -> tuple[str, int]:
        tail = "".join(self.tail)
        if len(tail) > self.tail_limit:
            tail = tail[-self.tail_limit :]
        omitted = self.total - self.head_size - len(tail)
        head = "".join(self.head)
        if omitted:
            return f"{head}\n[... {omitted} characters of output omitted ...]\n{tail}", omitted
        return head + tail, 0


def run_command(
    command: str,
    *,
    cwd: str | os.PathLike[str],
    env: dict[str, str] | None = None,
    timeout: float,
    output_limit: int,
    redactor: Redactor | None = None,
) -> CommandResult:
    """Run ``bash -c command`` in ``cwd``; its whole process tree ends by the time this returns.

    stdout and stderr are interleaved as they come; the output is redacted, then capped at
    ``output_limit`` characters (head and tail kept). If this process dies meanwhile, the
    supervisor kills the command's tree. KeyboardInterrupt stops the command, then propagates.
    """
    if len(command.encode("utf-8", "surrogatepass")) > MAX_COMMAND_BYTES:
        raise ToolError(
            f"the command is {len(command)} characters; the limit is {MAX_COMMAND_BYTES} bytes: "
            "write a script with write_file and run it"
        )
    if "\0" in command:
        raise ToolError("the command contains a NUL character, which bash cannot receive")
    python = sys.executable or shutil.which("python3") or "python3"
    capture = _Capture(output_limit, redactor or Redactor())
    started = time.monotonic()
    ctrl_r, ctrl_w = os.pipe()
    out_r, out_w = os.pipe()
    try:
        proc = subprocess.Popen(
            [python, "-I", "-S", "-c", _SUPERVISOR, repr(float(timeout)), str(out_w), str(os.getpid()), command],
            stdin=ctrl_r,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=(out_w,),
            cwd=cwd,
            env=env,
        )
    except BaseException:
        for fd in (ctrl_w, out_r):
            os.close(fd)
        raise
    finally:
        os.close(ctrl_r)
        os.close(out_w)
    try:
        # The supervisor enforces the timeout; this deadline only guards against it hanging.
        deadline = started + timeout + 10
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ToolError(f"the command supervisor did not stop the command within {timeout + 10:.0f}s; it was killed")
            if select.select([out_r], [], [], remaining)[0]:
                data = os.read(out_r, 65536)
                if not data:
                    break
                capture.feed(data)
        capture.feed(b"", final=True)
        report_text, errors = proc.communicate(timeout=10)
    finally:
        # Closing the control pipe tells a still-running supervisor to kill the command now.
        os.close(ctrl_w)
        os.close(out_r)
        if proc.poll() is None:
            try:
                proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    try:
        report = json.loads(report_text.decode().strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise ToolError(
            f"the command supervisor failed (exit status {proc.returncode}): {errors.decode(errors='replace')[-2000:]}"
        ) from None
    output, omitted = capture.result()
    return CommandResult(
        output=output,
        exit_status=report.get("exit"),
        timed_out=bool(report.get("timed_out")),
        cancelled=bool(report.get("cancelled")),
        omitted=omitted,
        leftovers=int(report.get("leftovers") or 0),
        seconds=time.monotonic() - started,
    )
