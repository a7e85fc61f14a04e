"""Child Python processes started by forking one that has imported everything already.

``Popen`` and ``run`` are ``subprocess.Popen`` and ``subprocess.run`` for commands of the form
``[sys.executable, "-m", MODULE, ...]``, ``[sys.executable, "-c", CODE, ...]`` or
``[sys.executable, SCRIPT, ...]``: the same arguments, pipes, ``text``, ``timeout``, ``cwd``,
``env``, ``start_new_session`` and return codes, but the child is forked from a *fork server*
that imported ``anthropic``, ``httpx2``, ``psycopg`` and every module of ``nb_durable`` but its
Jupyter layer once (``import anthropic`` alone is 1.2-1.4 s of CPU, paid again by every fresh
interpreter that runs a real-SDK agent). The server then does what the interpreter would: it
makes a fresh ``__main__``, sets ``sys.argv``, ``sys.path[0]``, the environment, the working
folder and new standard streams on the fds the caller gave, and runs the module, code or
script; the child ends as an interpreter does (``SystemExit``'s code, 1 and a traceback for
an exception, death by SIGINT for an uncaught ``KeyboardInterrupt``, non-daemon threads
joined, ``atexit`` run).

Each child is a real, separate process: its own pid (``kill``, SIGKILL, ``/proc``), its own
fds, locks and leases (the server holds no store open; its own sockets are closed in the
child), its own process group or session when asked, and only what it wrote survives it. What
it shares with its siblings is what a fork shares: the imported modules (copy on write) and
the hash seed. It is *not* the way to test start-up itself: the README's commands, ``--help``
and the probes that check what a command imports start real interpreters with
``subprocess``. A command the server cannot run faithfully is refused with ``ValueError``
rather than run differently: another interpreter or interpreter options (``-W``, ``-X``), a
shell, ``preexec_fn``, ``pass_fds``, or an environment whose start-up variables
(``PYTHONPATH`` beyond the server's path, the locale, ``PYTHONIOENCODING``, ...) differ from the
server's, since they shape an interpreter before any code runs.

One server per test process (each xdist worker has its own), started on first use and stopped
at exit, killing any child still running. The protocol: a Unix socket; per child, one
connection carrying a length-prefixed JSON request and the child's three standard fds
(``SCM_RIGHTS``); the server answers ``{"pid": N}`` and, when the child has exited,
``{"status": CODE}`` (``Popen.returncode``'s convention), then closes the connection.
"""

from __future__ import annotations

import contextlib
import gc
import io
import json
import os
import pkgutil
import runpy
import selectors
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import traceback
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["Popen", "run"]

REPO = Path(__file__).resolve().parent.parent

# Variables read while an interpreter starts (before any code runs): a child whose values
# differ from the server's would start differently, so it is refused.
_STARTUP = (
    "PYTHONHOME", "PYTHONIOENCODING", "PYTHONUTF8", "PYTHONWARNINGS", "PYTHONHASHSEED", "PYTHONDEVMODE",
    "PYTHONOPTIMIZE", "PYTHONSAFEPATH", "PYTHONFAULTHANDLER", "PYTHONTRACEMALLOC", "PYTHONINSPECT",
    "PYTHONNOUSERSITE", "PYTHONUSERBASE", "PYTHONPLATLIBDIR", "LANG", "LC_ALL", "LC_CTYPE",
)  # fmt: skip
_ENVIRONMENT = dict(os.environ)  # as the session began: a test's monkeypatching is not the server's


# --- the server (runs in its own process) -----------------------------------------------------


def _preload() -> None:
    """Import what the children would: the SDK, its HTTP stack, the PostgreSQL driver, nb_durable."""
    import anthropic  # noqa: F401
    import httpx2  # noqa: F401

    with contextlib.suppress(ImportError):
        import psycopg  # noqa: F401
    import nb_durable

    for module in pkgutil.walk_packages(nb_durable.__path__, "nb_durable."):
        name = module.name
        if name.startswith("nb_durable.jupyter") or name.endswith("__main__") or "workspace_files" in name:
            continue
        __import__(name)
    if "IPython" in sys.modules:
        raise RuntimeError("preloading nb_durable imported IPython: its children would not start as the CLI does")
    with contextlib.suppress(ImportError):
        from genai_prices import data_snapshot

        data_snapshot.get_snapshot()
    _warm_sdk()


_WARM_EVENTS: list[dict[str, Any]] = [
    {"type": "message_start", "message": {
        "id": "msg_warm", "type": "message", "role": "assistant", "model": "claude-warm-up", "content": [],
        "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1},
    }},
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Looking."}},
    {"type": "content_block_stop", "index": 0},
    {"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_warm", "name": "t", "input": {}}},
    {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{}"}},
    {"type": "content_block_stop", "index": 1},
    {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None}, "usage": {"output_tokens": 2}},
    {"type": "message_stop"},
]  # fmt: skip


def _warm_sdk() -> None:
    """One streamed reply and one token count through the real SDK and transport, answered by a
    socket of this process: what the SDK imports and builds on its first request (the HTTP
    transport, the validators of its response types) is then done once, before any fork."""
    import anthropic

    stream = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in _WARM_EVENTS).encode()
    answers = [(stream, "text/event-stream"), (b'{"input_tokens": 1}', "application/json")]
    listener = socket.create_server(("127.0.0.1", 0))

    def answer() -> None:
        for body, kind in answers:
            conn, _ = listener.accept()
            with conn:
                request = b""
                while b"\r\n\r\n" not in request:
                    request += conn.recv(65536)
                head, rest = request.split(b"\r\n\r\n", 1)
                length = next(
                    (int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")), 0
                )
                while len(rest) < length:
                    rest += conn.recv(65536)
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\ncontent-type: %s\r\ncontent-length: %d\r\nconnection: close\r\n\r\n%s"
                    % (kind.encode(), len(body), body)
                )

    server = threading.Thread(target=answer)
    server.start()
    url = "http://127.0.0.1:%d" % listener.getsockname()[1]
    request: dict[str, Any] = {"model": "claude-warm-up", "messages": [{"role": "user", "content": "Warm up."}]}
    with anthropic.Anthropic(api_key="fork-server-warm-up", base_url=url, max_retries=0) as client:
        with client.messages.stream(max_tokens=8, **request) as events:
            for _event in events:
                pass
            events.get_final_message().model_dump(mode="json")
        client.messages.count_tokens(**request)
    server.join()
    listener.close()


class _Job:
    """One child's command, run in the forked process as the interpreter would run it."""

    def __init__(self, request: dict[str, Any], fds: list[int]) -> None:
        self.request, self.fds = request, fds

    def run(self) -> None:
        request = self.request
        for target, fd in enumerate(self.fds):
            os.dup2(fd, target)
        for fd in set(self.fds) - {0, 1, 2}:
            os.close(fd)
        if request["session"]:
            os.setsid()
        elif request["group"] != -1:
            os.setpgid(0, request["group"])
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        _new_stdio()
        _hide_the_server_in_tracebacks()
        main = types.ModuleType("__main__")
        main.__dict__["__builtins__"] = __builtins__
        sys.modules["__main__"] = main
        argv: list[str] = request["argv"][1:]
        if argv[0] == "-m":
            sys.argv = ["-m", *argv[2:]]
            sys.path[0] = os.getcwd()
            runpy._run_module_as_main(argv[1])  # type: ignore[attr-defined]  # what `python -m` calls
        elif argv[0] == "-c":
            sys.argv = ["-c", *argv[2:]]
            sys.path[0] = ""
            exec(compile(argv[1], "<string>", "exec"), main.__dict__)
        else:
            sys.argv = list(argv)
            sys.path[0] = os.path.dirname(os.path.realpath(argv[0]))
            main.__dict__["__file__"] = argv[0]
            exec(compile(Path(argv[0]).read_bytes(), argv[0], "exec"), main.__dict__)


def _hide_the_server_in_tracebacks() -> None:
    """Print an uncaught exception's traceback from the child's own first frame, as a fresh
    interpreter does: without the server's start-up line and this module's frames above it."""

    def excepthook(kind: type[BaseException], value: BaseException, tb: types.TracebackType | None) -> None:
        frame, own = tb, tb
        while frame is not None:
            if frame.tb_frame.f_code.co_filename == __file__:
                own = frame.tb_next
            frame = frame.tb_next
        sys.__excepthook__(kind, value.with_traceback(own), own)  # it prints the exception's own traceback

    sys.excepthook = excepthook


def _new_stdio() -> None:
    """Standard streams on fds 0-2, made as the interpreter makes them at start-up."""
    unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
    encoding, errors = sys.__stdout__.encoding, str(sys.__stdout__.errors)  # type: ignore[union-attr]

    def stream(fd: int, write: bool, errors: str) -> io.TextIOWrapper:
        raw = io.FileIO(fd, "w" if write else "r", closefd=False)
        buffer: Any = raw if (write and unbuffered) else (io.BufferedWriter(raw) if write else io.BufferedReader(raw))
        line = write and (fd == 2 or raw.isatty())
        return io.TextIOWrapper(buffer, encoding=encoding, errors=errors, line_buffering=line, write_through=write and unbuffered)

    for name, made in (("stdin", stream(0, False, errors)), ("stdout", stream(1, True, errors)),
                       ("stderr", stream(2, True, "backslashreplace"))):
        setattr(sys, name, made)
        setattr(sys, f"__{name}__", made)


def _receive(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    data, fds, _flags, _address = socket.recv_fds(conn, 1 << 16, 3)
    if len(data) < 8:
        raise ConnectionError("short request")
    (size,) = struct.unpack("!Q", data[:8])
    body = data[8:]
    while len(body) < size:
        more = conn.recv(size - len(body))
        if not more:
            raise ConnectionError("truncated request")
        body += more
    return json.loads(body), fds


def _send(conn: socket.socket, answer: dict[str, Any]) -> None:
    with contextlib.suppress(OSError):  # the caller may have gone away; its child still ends
        conn.sendall(json.dumps(answer).encode() + b"\n")


class _Child:
    """The server's side of one child: its connection, and whether its exit was announced."""

    def __init__(self, pid: int, conn: socket.socket) -> None:
        self.pid, self.conn = pid, conn
        self.announced = False  # {"exited": true} sent; reaped only when the caller asks
        self.orphan = False  # the caller went away: reap it as soon as it ends

    def exited(self) -> bool:
        """The child has ended (a zombie, not reaped: its pid cannot be given to another process)."""
        try:
            return os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except ChildProcessError:
            return True

    def reap(self) -> int:
        _, status = os.waitpid(self.pid, 0)
        return os.waitstatus_to_exitcode(status)


def _fork(request: dict[str, Any], fds: list[int], held: list[Any]) -> int:
    """Fork; in the child, close what the server holds (``held``) and raise ``_InChild``."""
    if threading.active_count() != 1:
        raise RuntimeError("the fork server must have one thread when it forks")
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for thing in held:
            if isinstance(thing, int):
                os.close(thing)
            else:
                thing.close()
        raise _InChild(_Job(request, fds))
    return pid


class _InChild(Exception):
    """Not an error: how the forked child leaves the server's loop, carrying its job."""

    def __init__(self, job: _Job) -> None:
        self.job = job


def serve(path: str) -> _Job | None:
    """Accept commands on the Unix socket ``path`` until stdin closes; in a forked child, its job.

    A child stays a zombie until its caller asks for its status (as ``subprocess`` keeps one
    until ``wait``), so a test may signal a pid it was given without the risk that it names
    another process: pids come round again quickly on a busy machine (``pid_max`` 32768 here).
    """
    _preload()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_read, False)
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    selector.register(wake_read, selectors.EVENT_READ)
    selector.register(sys.stdin, selectors.EVENT_READ)
    children: dict[int, _Child] = {}
    # What the server imported is never garbage: keep the collector (in the server and in every
    # child, through its whole life and its exit) from walking it, and its pages from copying.
    gc.freeze()
    sys.stdout.write("ready\n")
    sys.stdout.flush()

    def accept() -> None:
        conn, _ = listener.accept()
        try:
            request, fds = _receive(conn)
        except (OSError, ValueError) as e:
            _send(conn, {"error": f"bad request: {e}"})
            conn.close()
            return
        held = [selector, listener, conn, wake_read, wake_write, *(c.conn for c in children.values())]
        try:
            pid = _fork(request, fds, held)  # in the child, raises _InChild (its fds stay open)
        except OSError as e:
            pid = 0
            _send(conn, {"error": f"fork failed: {e}"})
            conn.close()
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        if not pid:
            return
        children[pid] = _Child(pid, conn)
        selector.register(conn, selectors.EVENT_READ, pid)
        _send(conn, {"pid": pid})

    def announce() -> None:
        with contextlib.suppress(BlockingIOError):
            while os.read(wake_read, 512):
                pass
        for child in list(children.values()):
            if child.announced or not child.exited():
                continue
            if child.orphan:
                child.reap()
                del children[child.pid]
            else:
                child.announced = True
                _send(child.conn, {"exited": True})

    def asked(pid: int) -> None:
        child = children[pid]
        try:
            data = child.conn.recv(64)
        except OSError:
            data = b""
        if data:  # "reap": the caller has seen {"exited": true}
            _send(child.conn, {"status": child.reap()})
        selector.unregister(child.conn)
        child.conn.close()
        if data or child.exited():
            if not data:
                child.reap()
            del children[pid]
        else:
            child.orphan = True

    while True:
        for key, _events in selector.select():
            try:
                if key.fileobj is listener:
                    accept()
                elif key.fileobj == wake_read:
                    announce()
                elif isinstance(key.data, int):
                    asked(key.data)
                elif not sys.stdin.readline():  # the test process is gone: leave nothing running
                    for pid in children:
                        with contextlib.suppress(OSError):
                            os.kill(pid, signal.SIGKILL)
                    for pid in children:
                        with contextlib.suppress(OSError):
                            os.waitpid(pid, 0)
                    return None
            except _InChild as child:
                return child.job
            except Exception:  # one bad event must not end the server (and every child's caller with it)
                traceback.print_exc()


def main() -> None:
    job = serve(sys.argv[1])
    if job is not None:  # in a child: run its command and let the interpreter end as it would
        job.run()


# --- the client (in the test process) ---------------------------------------------------------


class _Server:
    """The test process's fork server: started on first use, stopped (with its children) at exit."""

    _lock = threading.Lock()
    _current: _Server | None = None

    def __init__(self) -> None:
        self.folder = tempfile.mkdtemp(prefix="nb-durable-fork-")
        self.path = os.path.join(self.folder, "socket")
        self.log = os.path.join(self.folder, "server.log")
        env = dict(_ENVIRONMENT)
        env = {k: v for k, v in env.items() if not k.startswith("ANTHROPIC_")}
        env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        self.env = env
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-c", "from tests.forkserver import main; main()", self.path],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, cwd=REPO, env=env, text=True,
            )  # fmt: skip
        assert self.process.stdout is not None
        if self.process.stdout.readline() != "ready\n":
            raise RuntimeError(f"the fork server did not start (exit status {self.process.wait()}){self.said()}")
        self.path_entries = {os.path.realpath(p) for p in sys.path if p}
        self.path_entries |= {os.path.realpath(p) for p in env["PYTHONPATH"].split(os.pathsep) if p}

    def said(self) -> str:
        """The end of what the server wrote to its stderr, for an error message."""
        try:
            with open(self.log, encoding="utf-8", errors="replace") as f:
                text = f.read()[-3000:]
        except OSError:
            return ""
        return f"; its log ({self.log}) ends with:\n{text}" if text else ""

    @classmethod
    def get(cls) -> _Server:
        with cls._lock:
            if cls._current is None or cls._current.process.poll() is not None:
                cls._current = cls()
                import atexit

                atexit.register(cls._current.stop)
            return cls._current

    def refusal(self, argv: list[str], env: dict[str, str]) -> str | None:
        """Why ``argv`` with ``env`` would not start as a fresh interpreter would (None: it would)."""
        if not argv or os.path.realpath(argv[0]) != os.path.realpath(sys.executable):
            return f"{argv[:1]} is not this interpreter ({sys.executable})"
        if len(argv) < 2 or (argv[1].startswith("-") and argv[1] not in ("-m", "-c")):
            return f"interpreter options {argv[1:2]} are not supported"
        if argv[1] in ("-m", "-c") and len(argv) < 3:
            return f"{argv[1]} needs an argument"
        for name in _STARTUP:
            if env.get(name) != self.env.get(name):
                return f"{name}={env.get(name)!r} differs from the fork server's {self.env.get(name)!r}"
        outside = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and os.path.realpath(p) not in self.path_entries]
        if outside:
            return f"PYTHONPATH entries {outside} are not on the fork server's path"
        return None

    def start(self, request: dict[str, Any], fds: list[int]) -> _Line:
        """Have the server fork a child: the connection its pid, exit and status come on."""
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(self.path)
            body = json.dumps(request).encode()
            socket.send_fds(conn, [struct.pack("!Q", len(body)) + body], fds)
        except BaseException:
            conn.close()
            raise
        return _Line(conn, self)

    def stop(self) -> None:
        if self.process.stdin is not None:
            with contextlib.suppress(OSError):
                self.process.stdin.close()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)
        if self.process.stdout is not None:
            self.process.stdout.close()
        shutil.rmtree(self.folder, ignore_errors=True)


class _Line:
    """The caller's end of one child's connection: JSON lines, none lost between reads."""

    def __init__(self, conn: socket.socket, server: _Server) -> None:
        self.conn, self.server, self.buffer = conn, server, b""

    def read(self, timeout: float | None) -> dict[str, Any] | None:
        """The next message, or None if none comes within ``timeout`` seconds (None: wait)."""
        with selectors.DefaultSelector() as selector:
            selector.register(self.conn, selectors.EVENT_READ)
            while b"\n" not in self.buffer:
                if not selector.select(timeout):
                    return None
                chunk = self.conn.recv(4096)
                if not chunk:
                    raise RuntimeError(
                        f"the fork server went away (exit status {self.server.process.poll()}){self.server.said()}"
                    )
                self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        message: dict[str, Any] = json.loads(line)
        return message

    def close(self) -> None:
        self.conn.close()


class Popen(subprocess.Popen[Any]):
    """``subprocess.Popen`` whose child is forked by the fork server (see the module docstring)."""

    _line: _Line | None = None

    def _execute_child(
        self, args: Any, executable: Any, preexec_fn: Any, close_fds: bool, pass_fds: Sequence[int], cwd: Any,
        env: Any, startupinfo: Any, creationflags: int, shell: bool, p2cread: int, p2cwrite: int, c2pread: int,
        c2pwrite: int, errread: int, errwrite: int, restore_signals: bool, gid: Any, gids: Any, uid: Any,
        umask: int, start_new_session: bool, process_group: int = -1,
    ) -> None:  # fmt: skip
        try:
            if shell or executable is not None or preexec_fn is not None or pass_fds:
                raise ValueError("the fork server runs a Python command itself: no shell, executable, preexec_fn or pass_fds")
            if gid is not None or gids is not None or uid is not None or umask != -1:
                raise ValueError("the fork server cannot change a child's user, groups or umask")
            if isinstance(args, (str, bytes, os.PathLike)):
                raise ValueError("give the command as a list: [sys.executable, '-m', module, ...]")
            argv = [os.fsdecode(a) for a in args]
            environment = {os.fsdecode(k): os.fsdecode(v) for k, v in (os.environ if env is None else env).items()}
            server = _Server.get()
            problem = server.refusal(argv, environment)
            if problem:
                raise ValueError(f"the fork server cannot run {argv[:3]} as a fresh interpreter would: {problem}")
            folder = os.fsdecode(cwd) if cwd is not None else os.getcwd()
            if not os.path.isdir(folder):
                raise FileNotFoundError(2, "No such file or directory", folder)
            request = {
                "argv": argv, "cwd": folder, "env": environment, "session": bool(start_new_session),
                "group": process_group,
            }  # fmt: skip
            fds = [p2cread if p2cread != -1 else 0, c2pwrite if c2pwrite != -1 else 1, errwrite if errwrite != -1 else 2]
            line = server.start(request, fds)
            answer = line.read(None)
            if not answer or "pid" not in answer:
                line.close()
                raise RuntimeError(f"the fork server did not start the child: {(answer or {}).get('error')}")
            self.pid, self._line = int(answer["pid"]), line
            self._child_created = True
        finally:
            self._close_pipe_fds(p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite)  # type: ignore[attr-defined]

    def _take_status(self, timeout: float | None) -> bool:
        """Take the exit status if the child ends within ``timeout`` (None: wait); True once known.

        The server announces the end and keeps the child a zombie until asked, as a parent
        process does until ``wait``: its pid is not given to another process before then.
        """
        with self._waitpid_lock:  # type: ignore[attr-defined]
            if self.returncode is not None or self._line is None:
                return self.returncode is not None
            ended = self._line.read(timeout)
            if ended is None:
                return False
            if "exited" in ended:
                self._line.conn.sendall(b"reap\n")
                ended = self._line.read(None)
            assert ended is not None and "status" in ended, ended
            self.returncode = int(ended["status"])
            self._line.close()
            self._line = None
            return True

    def _internal_poll(self, _deadstate: int | None = None, **_: Any) -> int | None:
        if self._line is not None:
            self._take_status(0)
        return self.returncode

    def _wait(self, timeout: float | None) -> int:
        if not self._take_status(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        assert self.returncode is not None
        return self.returncode


def run(*popenargs: Any, input: Any = None, capture_output: bool = False, timeout: float | None = None,
        check: bool = False, **kwargs: Any) -> subprocess.CompletedProcess[Any]:  # fmt: skip
    """``subprocess.run`` with a forked child (``Popen`` of this module)."""
    if input is not None:
        kwargs["stdin"] = subprocess.PIPE
    if capture_output:
        kwargs["stdout"] = kwargs["stderr"] = subprocess.PIPE
    with Popen(*popenargs, **kwargs) as process:
        try:
            stdout, stderr = process.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired as e:
            process.kill()
            e.output, e.stderr = process.communicate()
            raise
        except BaseException:
            process.kill()
            raise
        code = process.poll()
        assert code is not None
    if check and code:
        raise subprocess.CalledProcessError(code, process.args, output=stdout, stderr=stderr)
    return subprocess.CompletedProcess(process.args, code, stdout, stderr)
