"""Debian's chromium through Playwright, and a collector of the browser's console errors.

As shared/STACK.md ("JupyterLab in headless Chromium") has it:

* Chromium is ``/usr/bin/chromium`` (``playwright install`` cannot download here). If it is
  missing or does not start, the tests FAIL with the command that fixes it; they never skip.
* A page is 1280x900; every console error and uncaught page error is collected, and a test
  fails on any that is not on the commented allow-list below.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--disable-quic",
]
INSTALL_HINT = (
    "The browser tests need Debian's chromium and the playwright package: run "
    "`apt-get update && apt-get install -y chromium` and `pip install playwright` "
    "(never `playwright install`: it downloads a browser build and there is no network for that)."
)
VIEWPORT = {"width": 1280, "height": 900}

# Console messages that are not ours. Each entry: a regex on the message as ConsoleErrors records
# it, and why it is noise. Anything else a page logs as an error fails the test, so an error of
# the widget or of nb_durable cannot hide.
CONSOLE_ALLOW = [
    # Notebook 7.6's shortcuts plugin reads `plugins[id].schema` for every settings change, also
    # for plugins Notebook 7 does not load; it throws on every /notebooks/ page, even for a
    # notebook holding only `1+1` and with no user settings at all.
    (
        re.compile(r"^uncaught: Cannot read properties of undefined \(reading 'schema'\) @ "
                   r"http://127\.0\.0\.1:\d+/static/notebook/notebook_core\.[0-9a-f]+\.js"),
        "Notebook 7's own shortcuts plugin",
    ),
    # Notebook 7.6's file browser, restoring itself on a /notebooks/ page, runs the command
    # `filebrowser:open-path` for the routed file, and that page does not register it (seen on
    # some loads, not all, also without any query string in the URL).
    (
        re.compile(r"^uncaught: Command 'filebrowser:open-path' not registered\. @ "
                   r"http://127\.0\.0\.1:\d+/static/notebook/notebook_core\.[0-9a-f]+\.js"),
        "Notebook 7's own file browser",
    ),
]


def launch_chromium(playwright: Any) -> Any:
    """Debian's chromium, headless, with the flags from STACK.md; a loud error if it cannot start."""
    if not Path(CHROMIUM).exists():
        raise RuntimeError(f"{CHROMIUM} does not exist. {INSTALL_HINT}")
    try:
        return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS, headless=True)
    except Exception as e:
        raise RuntimeError(f"{CHROMIUM} did not start ({type(e).__name__}: {e}). {INSTALL_HINT}") from e


@dataclass
class ConsoleErrors:
    """Every console error and uncaught exception of the pages it watches.

    Uncaught exceptions are recorded as ``uncaught: <message> @ <script of the top frame>``, so
    the allow-list can name where noise comes from, not only what it says.
    """

    seen: list[str] = field(default_factory=list)

    def watch(self, page: Any) -> None:
        page.on("console", lambda msg: self.seen.append(msg.text) if msg.type == "error" else None)
        page.on("pageerror", lambda exc: self.seen.append(f"uncaught: {exc.message} @ {_top_frame(exc.stack or '')}"))

    def unexpected(self) -> list[str]:
        """The errors not on the allow-list."""
        return [text for text in self.seen if not any(rx.search(text) for rx, _ in CONSOLE_ALLOW)]

    def assert_clean(self) -> None:
        bad = self.unexpected()
        assert not bad, "the browser logged errors:\n" + "\n".join(bad)


def _top_frame(stack: str) -> str:
    for line in stack.splitlines():
        found = re.search(r"(https?://[^\s)]+?)(?::\d+){1,2}\)?$", line.strip())
        if line.strip().startswith("at ") and found:
            return found.group(1)
    return "?"
