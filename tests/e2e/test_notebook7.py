"""Notebook 7 in headless Chromium: what is proven here.

* A notebook run and saved in JupyterLab (``%%agent`` against the loopback Messages API, then
  ``%agent_show``), opened at ``/notebooks/<path>`` while its kernel lives, shows the same
  timeline: the widget, drawn from the kernel's models, every step live, with the answer.
* Re-running the ``%%agent`` cell in Notebook 7 draws the timeline there, every step replayed,
  and no request reaches the server.
* With the kernel shut down, the reopened notebook still shows ``%agent_show``'s static
  timeline, and the finished ``%%agent`` display shows its whole timeline too: the display
  was replaced by its static form when the run ended, so no widget model is needed.
* No console error from the page, the widget or nb_durable (see the allow-list in browser.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.browser import VIEWPORT, ConsoleErrors
from tests.e2e.lab import LabServer, write_notebook
from tests.e2e.notebook_page import NotebookPage
from tests.e2e.shared_api import ByModel, Script
from tests.e2e.test_lab import answer_text, states
from tests.fakes import MessagesAPIServer, ScriptedScenario, reply, tool_use

MODEL = "claude-e2e-nb7"
PATH = "nb7/shared.ipynb"
ANSWER = "The folder holds one notebook and its runs."


class TimelineLost(AssertionError):
    """A finished run's saved display shows no timeline once its kernel is gone."""


def saved_outputs(lab: LabServer, cell: int) -> list[dict[str, Any]]:
    """The cell's saved outputs; none while the file is being written (the server writes in place)."""
    try:
        notebook = json.loads((lab.root / PATH).read_text(encoding="utf-8"))
    except ValueError:
        return []
    outputs: list[dict[str, Any]] = notebook["cells"][cell]["outputs"]
    return outputs


@pytest.fixture(scope="module")
def from_lab(lab: LabServer, api_server: MessagesAPIServer, browser: Any) -> Iterator[Script]:
    """The notebook, run and saved in JupyterLab: its kernel still running."""
    routes = api_server.scenario
    assert isinstance(routes, ByModel)
    routes.scripts[MODEL] = ScriptedScenario(
        [reply("Let me look around.", tool_use("list_dir", {"path": "."}, id="toolu_l")), reply(ANSWER)]
    )
    write_notebook(
        lab.root / PATH,
        [
            "%load_ext nb_durable",
            f"%%agent --run shared --model {MODEL} --workspace .\nWhat is in this folder?",
            "%agent_show shared",
        ],
    )
    context = browser.new_context(viewport=VIEWPORT)
    console = ConsoleErrors()
    try:
        page = context.new_page()
        console.watch(page)
        nb = NotebookPage(page, lab, PATH)
        nb.run_and_wait(0)
        nb.run_and_wait(1)
        assert states(nb, 1) == ["live"] * 3
        nb.run_and_wait(2)
        nb.save()
        nb.wait_for(lambda: any("text/html" in o.get("data", {}) for o in saved_outputs(lab, 2)), "the saved notebook")
        console.assert_clean()
    finally:
        context.close()
    yield Script(api_server, MODEL)


def test_a_notebook_from_lab_shows_its_timeline_in_notebook_7(
    lab: LabServer, from_lab: Script, page: Any, console: ConsoleErrors, screenshots: Path
) -> None:
    nb = NotebookPage(page, lab, PATH, app="notebook")
    assert "/notebooks/" in page.url and page.locator("#main-panel").is_visible(), "Notebook 7, not Lab"
    nb.wait_for(lambda: len(states(nb, 1)) == 3, "the timeline in Notebook 7")
    assert states(nb, 1) == ["live"] * 3, "the same run, drawn from the kernel's widget models"
    assert ANSWER in answer_text(nb, 1)
    page.screenshot(path=str(screenshots / "notebook7-1-opened.png"))

    sent = len(from_lab.requests())
    nb.run_and_wait(1)
    assert states(nb, 1) == ["replayed"] * 3
    assert ANSWER in answer_text(nb, 1)
    assert len(from_lab.requests()) == sent, "replay sent no request"
    page.screenshot(path=str(screenshots / "notebook7-2-replayed.png"))
    console.assert_clean()


def test_a_reopened_notebook_still_shows_the_finished_timeline(
    lab: LabServer, from_lab: Script, page: Any, console: ConsoleErrors, screenshots: Path
) -> None:
    for session in lab.api("GET", "/api/sessions"):
        if session["path"] == PATH:
            lab.api("DELETE", f"/api/sessions/{session['id']}")
    nb = NotebookPage(page, lab, PATH, app="notebook")
    nb.wait_for(lambda: len(states(nb, 2)) == 3, "the static timeline of %agent_show")
    assert ANSWER in answer_text(nb, 2)
    # The widget renderer says "Loading widget..." until the widget manager has restored what
    # it can; then it draws the timeline or gives up on the model.
    nb.wait_for(
        lambda: "model not found" in nb.output(1).inner_text() or len(states(nb, 1)) == 3,
        "the finished %%agent display to settle",
    )
    page.screenshot(path=str(screenshots / "notebook7-3-reopened.png"))
    shown = nb.output(1).inner_text()
    if "model not found" in shown:
        raise TimelineLost(f"the finished %%agent display, reopened without its kernel, shows: {shown!r}")
    assert len(states(nb, 1)) == 3 and ANSWER in answer_text(nb, 1)
    console.assert_clean()
