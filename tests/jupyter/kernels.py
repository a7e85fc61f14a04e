"""Real IPython kernels for tests, through jupyter_client: start, run cells, kill, restart."""

from __future__ import annotations

import contextlib
import os
import queue
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jupyter_client.manager import KernelManager

from tests.conftest import subprocess_env
from tests.markers import require

if TYPE_CHECKING:
    import nbformat
    from nbclient import NotebookClient


# Every kernel a test starts listens on Unix sockets, not TCP: jupyter_client picks free TCP
# ports and lets them go before the kernel binds them, so under xdist another process can take
# one first ("Address already in use", seen in CI). A short folder of its own keeps the socket
# paths under 108 bytes.


@contextlib.contextmanager
def notebook_client(nb: nbformat.NotebookNode, folder: Path, *, timeout: float) -> Iterator[NotebookClient]:
    """An nbclient client for ``nb`` whose kernel works in ``folder`` and listens on Unix sockets."""
    from nbclient import NotebookClient  # only notebook tests pay for importing nbclient
    from traitlets.config import Config
    sockets = tempfile.mkdtemp(prefix="nbk-")
    config = Config()
    config.KernelManager.transport = "ipc"
    config.KernelManager.ip = os.path.join(sockets, "k")
    try:
        yield NotebookClient(
            nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(folder)}}, config=config
        )
    finally:
        shutil.rmtree(sockets, ignore_errors=True)


@dataclass
class CellRun:
    """What one execute request produced on iopub."""

    msg_id: str
    outputs: list[dict[str, Any]] = field(default_factory=list)
    status: str | None = None
    error: dict[str, Any] | None = None

    def text(self) -> str:
        """Everything the cell printed or showed as text."""
        parts = []
        for out in self.outputs:
            if out["msg_type"] == "stream":
                parts.append(out["content"]["text"])
            elif out["msg_type"] in ("display_data", "update_display_data", "execute_result"):
                parts.append(out["content"]["data"].get("text/plain", ""))
            elif out["msg_type"] == "error":
                parts.append("\n".join(out["content"]["traceback"]))
        return "".join(parts)

    def html(self) -> str:
        """The last text/html the cell showed (the timeline's static form, after updates)."""
        pages = [
            o["content"]["data"]["text/html"]
            for o in self.outputs
            if o["msg_type"] in ("display_data", "update_display_data") and "text/html" in o["content"]["data"]
        ]
        return pages[-1] if pages else ""


class WidgetMirror:
    """The kernel's widget models as a front end would hold them, from the iopub messages seen."""

    def __init__(self) -> None:
        self.models: dict[str, dict[str, Any]] = {}
        self.display_ids: list[str] = []

    def feed(self, msg: dict[str, Any]) -> None:
        kind, content = msg["msg_type"], msg["content"]
        if kind == "comm_open" and content.get("target_name") == "jupyter.widget":
            self.models[content["comm_id"]] = dict(content["data"].get("state") or {})
        elif kind == "comm_msg" and content["data"].get("method") in ("update", "echo_update"):
            self.models.setdefault(content["comm_id"], {}).update(content["data"].get("state") or {})
        elif kind == "comm_close":
            self.models.pop(content["comm_id"], None)
        if kind in ("display_data", "update_display_data"):
            display_id = (content.get("transient") or {}).get("display_id")
            if display_id:
                self.display_ids.append(display_id)

    def with_class(self, css_class: str, within: str | None = None) -> list[str]:
        """Model ids whose widget has ``css_class`` (under model ``within``, if given), oldest first."""
        pool = self.descendants(within) if within else list(self.models)
        return [m for m in pool if css_class in (self.models.get(m, {}).get("_dom_classes") or ())]

    def children(self, model_id: str) -> list[str]:
        return [c.removeprefix("IPY_MODEL_") for c in self.models.get(model_id, {}).get("children") or ()]

    def descendants(self, model_id: str) -> list[str]:
        found, todo = [], [model_id]
        while todo:
            current = todo.pop(0)
            found.append(current)
            todo.extend(self.children(current))
        return found

    def value(self, model_id: str) -> Any:
        return self.models.get(model_id, {}).get("value")


THREADS = """\
import sys as _s, threading as _t, traceback as _tb
from nb_durable.agent.fleet.background_runs import started_background_runs as _started
for _h in _started():
    print("handle", repr(_h), "pending", [(p.step_id, p.kind, p.decided) for p in _h.pending])
for _th in _t.enumerate():
    _f = _s._current_frames().get(_th.ident)
    if _f is not None and _th is not _t.current_thread():  # the kernel's own threads: their innermost frame
        print("---", _th.name)
        print("".join(_tb.format_stack(_f)[-(20 if _th.name.startswith("nb-durable") else 1):]))
"""
"""What ``Kernel.threads`` runs in the kernel."""


class Kernel:
    """One python3 kernel working in ``cwd`` with extra environment variables.

    Every iopub message read goes through ``widgets`` (a ``WidgetMirror``) first, so tests can
    find the timeline's buttons and press them with the comm messages a front end sends.
    """

    def __init__(self, cwd: Path, **env: str) -> None:
        require("kernel", "a kernel")
        # Unix sockets: see notebook_client's comment.
        self._sockets = tempfile.mkdtemp(prefix="nbk-")
        self.manager = KernelManager(kernel_name="python3", transport="ipc", ip=os.path.join(self._sockets, "k"))
        self.manager.start_kernel(cwd=str(cwd), env=subprocess_env(**env))
        self.client = self.manager.client()
        self.client.start_channels()
        self.client.wait_for_ready(timeout=60)
        self.last_error: tuple[str | None, str | None] = (None, None)
        self.widgets = WidgetMirror()

    def start(self, code: str) -> CellRun:
        """Send a cell without waiting for it."""
        return CellRun(self.client.execute(code, allow_stdin=False))

    def collect(
        self, run: CellRun, timeout: float = 60, until_idle: bool = True, said: str | None = None
    ) -> CellRun:
        """Gather the cell's iopub messages until it goes idle (or the timeout), or until its
        output so far holds ``said`` (a cell still running: collect it again to go on)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                msg = self.client.get_iopub_msg(timeout=0.5)
            except queue.Empty:
                if not self.manager.is_alive():
                    return run
                continue
            self.widgets.feed(msg)
            if msg["parent_header"].get("msg_id") != run.msg_id:
                continue
            kind = msg["msg_type"]
            if kind == "status" and msg["content"]["execution_state"] == "idle" and until_idle:
                run.status = self._reply_status(run.msg_id, deadline)
                return run
            if kind in ("stream", "display_data", "update_display_data", "execute_result", "error"):
                run.outputs.append(msg)
                if kind == "error":
                    run.error = msg["content"]
                if said is not None and said in run.text():
                    return run
        raise TimeoutError(f"the cell did not finish in {timeout}s; it printed: {run.text()[-2000:]}")

    def _reply_status(self, msg_id: str, deadline: float) -> str:
        """The execute_reply's status: 'ok' or 'error' (UsageError prints, but still errs)."""
        while time.monotonic() < deadline:
            try:
                reply = self.client.get_shell_msg(timeout=0.5)
            except queue.Empty:
                continue
            if reply["parent_header"].get("msg_id") == msg_id:
                content = reply["content"]
                if content["status"] == "error":
                    self.last_error = (content.get("ename"), content.get("evalue"))
                return str(content["status"])
        raise TimeoutError("no execute_reply")

    def pump(self, until: Any, timeout: float = 60, what: str = "the condition") -> Any:
        """Read iopub (feeding ``widgets``) until ``until()`` is truthy; return it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = until()
            if found:
                return found
            with contextlib.suppress(queue.Empty):
                self.widgets.feed(self.client.get_iopub_msg(timeout=0.1))
        raise TimeoutError(f"{what} did not happen in {timeout}s")

    def comm_send(self, comm_id: str, data: dict[str, Any]) -> None:
        """Send a comm message to a widget, exactly as a front end does."""
        self.client.shell_channel.send(self.client.session.msg("comm_msg", {"comm_id": comm_id, "data": data}))

    def click(self, model_id: str) -> None:
        """Press a Button (ipywidgets: a custom message whose content is a click event)."""
        self.comm_send(model_id, {"method": "custom", "content": {"event": "click"}})

    def type_into(self, model_id: str, value: Any) -> None:
        """Set a Text's (or IntText's) value as typing into it does: a state update from the front end."""
        self.comm_send(model_id, {"method": "update", "state": {"value": value}, "buffer_paths": []})

    def run(self, code: str, timeout: float = 60) -> CellRun:
        """Run a cell to its end."""
        return self.collect(self.start(code), timeout)

    def threads(self) -> str:
        """Where each thread of the kernel stands, and what its background runs wait on, in the
        kernel's own words (for a failure's report: a run that does not go on is a thread held somewhere)."""
        done = self.run(THREADS, timeout=30)
        return done.text()[-12000:]

    def alive(self) -> bool:
        """The kernel process runs and its channels are open."""
        return bool(self.manager.is_alive() and self.client.channels_running)

    def reset(self, cwd: Path, **env: str) -> None:
        """Bring the kernel back to what a fresh one in ``cwd`` with ``env`` would be (see
        ``in_kernel.reset``; the kernel must have imported ``tests.jupyter.in_kernel`` when it
        started), and forget the widgets and errors seen so far."""
        done = self.run(
            f"from tests.jupyter.in_kernel import reset as _reset\n_reset({str(cwd)!r}, {env!r})\n%reset -f", timeout=120
        )
        if done.status != "ok":
            raise RuntimeError(f"the kernel could not be reset: {done.text()[-2000:]}")
        self.widgets = WidgetMirror()
        self.last_error = (None, None)

    def kill(self) -> None:
        """SIGKILL the kernel process, as a crash would, and wait until it is gone."""
        pid = self.manager.provisioner.pid  # type: ignore[union-attr]
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while self.manager.is_alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        self.close()

    def close(self) -> None:
        self.client.stop_channels()
        if self.manager.is_alive():
            self.manager.shutdown_kernel(now=True)
        self.manager.cleanup_resources()
        shutil.rmtree(self._sockets, ignore_errors=True)
