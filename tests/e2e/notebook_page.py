"""One notebook open in a browser page, driven as a person would: click, Ctrl+Enter, wait.

Works in JupyterLab (``/lab/tree/<path>``) and in Notebook 7 (``/notebooks/<path>``).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from typing import Any

from tests.e2e.lab import LabServer

KERNEL_READY = """() => {
  const indicator = document.querySelector('.jp-Notebook-ExecutionIndicator');
  const name = document.querySelector('.jp-Toolbar-kernelName');
  return !!indicator && indicator.getAttribute('data-status') === 'idle'
      && !!name && name.textContent.trim() !== '' && !/No Kernel/.test(name.textContent);
}"""


# Marks the cell with data-nbd-ran="1" once its prompt shows [*] (or a new number) after this.
WATCH_PROMPT = """(cell) => {
  const prompt = cell.querySelector('.jp-InputPrompt');
  const before = prompt.textContent.trim();
  cell.dataset.nbdRan = '0';
  const look = () => {
    const now = prompt.textContent.trim();
    if (now === '[*]:' || (now !== before && /^\\[\\d+\\]:$/.test(now))) cell.dataset.nbdRan = '1';
  };
  if (cell.nbdObserver) cell.nbdObserver.disconnect();
  cell.nbdObserver = new MutationObserver(look);
  cell.nbdObserver.observe(prompt, {subtree: true, childList: true, characterData: true});
}"""


class NotebookPage:
    """One notebook open in a browser page, in Lab (``/lab/tree/``) or Notebook 7 (``/notebooks/``)."""

    def __init__(self, page: Any, lab: LabServer, path: str, *, app: str = "lab") -> None:
        self.page = page
        self.lab = lab
        self.path = path
        # Log in once (the server sets its cookie), then open pages with clean URLs, as a user
        # would have them. ?reset: Lab forgets the tabs and layout it kept for this workspace,
        # so only this notebook opens.
        page.goto(f"{lab.url}/api/status?token={lab.token}")
        where = f"/lab/tree/{path}?reset" if app == "lab" else f"/notebooks/{path}"
        page.goto(lab.url + where, wait_until="domcontentloaded")
        self.notebook = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook").first
        self.notebook.locator(".jp-Cell").first.wait_for(timeout=60_000)
        self.wait_kernel_ready()

    def wait_kernel_ready(self, timeout: float = 60) -> None:
        """Wait until the kernel is idle and named (clicking Run earlier opens Select Kernel)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.accept_dialog()
            if self.page.evaluate(KERNEL_READY):
                return
            self.page.wait_for_timeout(100)
        raise TimeoutError(f"the kernel of {self.path} never became ready")

    def accept_dialog(self) -> bool:
        """Accept a dialog ("Kernel Restarting", "Restart Kernel?") if one shows."""
        button = self.page.locator(".jp-Dialog .jp-mod-accept")
        if button.count():
            title = self.page.locator(".jp-Dialog-header").first.inner_text()
            print(f"accepting the dialog {title!r}")
            button.first.click()
            self.page.locator(".jp-Dialog").wait_for(state="detached", timeout=10_000)
            return True
        return False

    def hide_left_sidebar(self) -> None:
        """Collapse the file browser (Lab keeps the layout per workspace, so it may be closed already)."""
        tab = self.page.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab.lm-mod-current")
        if tab.count():
            tab.first.click()

    def cell(self, index: int) -> Any:
        return self.notebook.locator(".jp-Cell").nth(index)

    def output(self, index: int) -> Any:
        return self.cell(index).locator(".jp-OutputArea")

    def run_cell(self, index: int) -> None:
        """Click into cell ``index`` and run it with Ctrl+Enter, as a person would.

        Lab marks a cell ``[*]`` the moment it sends the request; if that never shows, the key
        press went elsewhere (a dialog took the focus), so it is pressed once more.
        """
        for _attempt in range(2):
            self.wait_kernel_ready()
            cell = self.cell(index)
            cell.evaluate(WATCH_PROMPT)
            cell.locator(".jp-InputArea-editor").click()
            self.page.keyboard.press("Control+Enter")
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                if cell.evaluate("c => c.dataset.nbdRan") == "1":
                    return
                self.page.wait_for_timeout(50)
            self.accept_dialog()
        raise TimeoutError(f"cell {index} of {self.path} never started running")

    def wait_cell_done(self, index: int, timeout: float = 60) -> None:
        """Wait until the cell, once started, has its execution count (its execute_reply came)
        and the kernel is idle."""
        cell = self.cell(index)
        prompt = cell.locator(".jp-InputPrompt")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = prompt.inner_text().strip()
            started = cell.evaluate("c => c.dataset.nbdRan") == "1"
            if started and re.fullmatch(r"\[\d+\]:", text) and self.page.evaluate(KERNEL_READY):
                return
            self.page.wait_for_timeout(100)
        raise TimeoutError(f"cell {index} of {self.path} did not finish in {timeout}s (prompt {prompt.inner_text()!r})")

    def run_and_wait(self, index: int, timeout: float = 60) -> None:
        self.run_cell(index)
        self.wait_cell_done(index, timeout)

    def steps(self, index: int, state: str | None = None) -> Any:
        selector = ".nbd-timeline .nbd-step" + (f".nbd-{state}" if state else "")
        return self.output(index).locator(selector)

    def wait_for(self, condition: Callable[[], bool], what: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if condition():
                return
            self.page.wait_for_timeout(100)
        raise TimeoutError(f"waited {timeout}s for {what}")

    def save(self) -> None:
        """Ctrl+S, then wait until the server has written the whole file (accepting a dialog that
        asks). jupyter_server writes a notebook in place, so a file being saved can read torn."""

        def modified() -> str:
            return str(self.lab.api("GET", f"/api/contents/{self.path}?content=0")["last_modified"])

        def written() -> bool:
            if modified() == before:
                return False
            try:
                json.loads((self.lab.root / self.path).read_text(encoding="utf-8"))
            except ValueError:
                return False
            return True

        before = modified()
        self.page.keyboard.press("Control+s")
        self.wait_for(lambda: self.accept_dialog() or written(), "the notebook saved")
        self.accept_dialog()
