"""Background runs and their buttons in headless Chromium, in JupyterLab and in Notebook 7.

One story per app, clicked as a person would, with the log read after every click
(``read_run`` on the notebook's store), not only the page:

* A foreground ``%%agent`` cell shows no bar of buttons while it runs (it holds the kernel).
* ``%%agent --background`` returns at once (the cell gets its number while the run waits on
  a gated ``run_bash``, ``AgentMagics.approve_bash``); another cell runs meanwhile and shows
  its output while the run goes on.
* A reason typed into the question's box, then Approve: the log records the decision
  ``approved`` by ``<user> (button)`` with the reason as its note; the command ran once.
* Stop while ``sleep 30`` runs: the command is killed, the run is in doubt, its lease free.
* Resume, then Skip with a reason on the in-doubt row: recorded, and the run completes.
* "Fork from here" at step 3: the fork's timeline appears below the run's and completes,
  its first three steps replayed and no effect run again.
* Saved, and opened in the other app on the same server while the kernel lives, the notebook
  shows the run and its fork again, from the kernel's widget models (Notebook 7 after Lab in
  the light theme, Lab after Notebook 7 in the dark one).
* The bar and the question read well (text contrast against what is behind it) in both
  themes; screenshots of each stage; no console errors (in both apps: the buttons carry no
  Font Awesome icons, whose font the second app on a server gets a 403 for).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from nb_durable import read_run
from nb_durable.agent.fleet.decisions import who
from tests.e2e.browser import ConsoleErrors
from tests.e2e.lab import LabServer, write_notebook
from tests.e2e.notebook_page import NotebookPage
from tests.e2e.shared_api import Script
from tests.e2e.test_lab import CONTRAST, STATES_OF, answer_text, states
from tests.fakes import Delay, reply, tool_use

GATED = "echo approved >> effects.txt"
LONG = "echo started > began.txt; sleep 30; echo done > ended.txt"
APPROVE_REASON = "appending one line is harmless"
SKIP_REASON = "the build was cut off; do not start it again"
FORKED = "Forked at step 3: I stop here."


def story(model: str) -> list[Any]:
    """The background run's script; turn 1's second answer is the fork's (it asks turn 1 again)."""
    return [
        reply("First I record the effect.", tool_use("run_bash", {"command": GATED}, id="toolu_gated")),
        [reply("Now the long build.", tool_use("run_bash", {"command": LONG}, id="toolu_long")), reply(FORKED)],
        reply("All done: the build was skipped."),
    ]


def decisions(store: Path, run_id: str) -> list[tuple[str, str, str, str]]:
    return [(s.step_id.split(":")[0], d.decision, d.by, d.note) for s in read_run(run_id, str(store)).steps for d in s.decisions]


def saved_cell(notebook: Path, cell: int) -> Any:
    """The cell's saved outputs; none while the file is being written (the server writes in place)."""
    try:
        return json.loads(notebook.read_text(encoding="utf-8"))["cells"][cell]["outputs"]
    except ValueError:
        return []


def legible(area: Any, selectors: list[str], floor: float = 4.5) -> list[str]:
    """The selectors whose first match's text has a contrast below ``floor`` against what is behind it."""
    low = []
    for selector in selectors:
        got = area.locator(selector).first.evaluate(CONTRAST)
        if got["ratio"] < floor:
            low.append(f"{selector}: {got}")
    return low


def header_status(nb: NotebookPage, cell: int, status: str) -> Callable[[], bool]:
    return lambda: nb.output(cell).locator(f".nbd-timeline > .widget-html .nbd-header.nbd-run-{status}").count() >= 1


@pytest.mark.parametrize(("app", "theme"), [("lab", "light"), ("notebook", "dark")])
def test_background_run_clicked_through(
    app: str,
    theme: str,
    request: pytest.FixtureRequest,
    script: Callable[[str, list[Any]], Script],
    page: Any,
    console: ConsoleErrors,
    screenshots: Path,
) -> None:
    server: LabServer = request.getfixturevalue("lab" if theme == "light" else "dark_lab")
    model = f"claude-e2e-bg-{app}"
    api = script(model, story(model))
    script(f"{model}-fg", [Delay(4, reply("Foreground: done."))])
    run = f"bg-{app}"
    folder = server.root / f"background-{app}"
    path = f"background-{app}/background.ipynb"
    write_notebook(
        server.root / path,
        [
            f'%load_ext nb_durable\n%config AgentMagics.approve_bash = "^echo approved"\n%config AgentMagics.model = "{model}"',
            f"%%agent --run fg-{app} --model {model}-fg --workspace .\nSay done.",
            f"%%agent --background --run {run} --workspace .\nRecord the effect, then run the build.",
            "print('meanwhile', 6 * 7)",
        ],
    )
    store = folder / "runs"
    shot = f"background-{app}-{theme}"
    nb = NotebookPage(page, server, path, app=app)
    if app == "lab":
        nb.hide_left_sidebar()
    try:
        clicked_through(nb, api, store, folder, run, screenshots, shot, theme)
        # The same notebook in the other app, on the same server, its kernel alive: the widgets
        # again, drawn from the kernel's models (their fonts must load there too).
        other = "notebook" if app == "lab" else "lab"
        nb.save()
        nb.wait_for(lambda: "widget-view" in json.dumps(saved_cell(server.root / path, 2)), "the saved notebook")
        nb = NotebookPage(page, server, path, app=other)
        if other == "lab":
            nb.hide_left_sidebar()
        nb.wait_for(lambda: len(states(nb, 2)) == 10, f"the timeline in {other}")
        out = nb.output(2)
        assert out.locator(".nbd-header.nbd-run-completed").count() == 2, "the run and its fork"
        assert out.locator("button.nbd-fork").first.is_enabled()
        low = legible(out, [".nbd-bar button.nbd-fork"])
        out.locator(".nbd-forks").first.scroll_into_view_if_needed()
        page.screenshot(path=str(screenshots / f"{shot}-5-then-in-{other}.png"))
        assert not low, f"hard to read in {other}, {theme} theme:\n" + "\n".join(low)
    except BaseException:
        page.screenshot(path=str(screenshots / f"{shot}-failed.png"))
        print(f"the run's cell showed:\n{nb.output(2).inner_text()}\nthe server said:\n{server.tail(3000)}")
        raise
    console.assert_clean()


def clicked_through(nb: NotebookPage, api: Script, store: Path, folder: Path, run: str, screenshots: Path, shot: str, theme: str) -> None:
    """The story, from a loaded notebook to the fork's end (see the module docstring)."""
    page = nb.page
    nb.run_and_wait(0)

    # A foreground cell holds the kernel, so it shows no bar of buttons it could not hear.
    nb.run_cell(1)
    nb.wait_for(lambda: nb.steps(1, "in_flight").count() == 1, "the foreground run's model call")
    assert nb.output(1).locator(".nbd-bar").is_hidden(), "a foreground run shows no bar"
    page.screenshot(path=str(screenshots / f"{shot}-0-foreground.png"))
    nb.wait_cell_done(1)

    # Started in the background, the cell is done at once; another cell runs meanwhile.
    nb.run_and_wait(2)
    out = nb.output(2)
    question = out.locator(".nbd-question")
    nb.wait_for(lambda: question.locator("button.nbd-approve").count() == 1, "the approval question")
    assert read_run(run, str(store)).summary.holder is not None, "the cell is done; the run goes on, holding its lease"
    nb.run_and_wait(3)
    assert "meanwhile 42" in nb.output(3).inner_text()
    assert header_status(nb, 2, "waiting")(), "the run still goes on, waiting for the answer (issue 21.2)"
    assert out.locator("button.nbd-stop").is_enabled() and out.locator("button.nbd-resume").is_disabled()
    look_low = legible(out, [".nbd-bar button.nbd-stop", ".nbd-question button.nbd-approve", ".nbd-question button.nbd-deny"])
    question.locator(".nbd-reason input").fill(APPROVE_REASON)
    nb.wait_for(lambda: question.locator(".nbd-reason input").input_value() == APPROVE_REASON, "the reason typed")
    page.screenshot(path=str(screenshots / f"{shot}-1-approval.png"))
    question.locator("button.nbd-approve").click()

    # Approved by button, with the reason; the command ran; then Stop during the long one.
    nb.wait_for((folder / "began.txt").exists, "the long command to start")
    assert (folder / "effects.txt").read_text() == "approved\n"
    assert ("approval", "approved", f"{who()} (button)", APPROVE_REASON) in decisions(store, run)
    assert question.count() == 0, "the answered question's buttons are gone"
    stop = out.locator("button.nbd-stop")
    stop.click()
    clicked = time.monotonic()
    nb.wait_for(header_status(nb, 2, "in_doubt"), "the run to stop, in doubt", timeout=20)
    stopped_in = time.monotonic() - clicked
    # The header follows the log (the run's last line is written); the lease goes a moment
    # later, as the run's thread closes its writer, and Resume comes on after that.
    resume = out.locator("button.nbd-resume")
    nb.wait_for(resume.is_enabled, "Resume to come on")
    summary = read_run(run, str(store)).summary
    assert summary.status == "in_doubt" and summary.holder is None, summary
    assert f"stopped by {who()} with the Stop button" in (summary.error or ""), summary.error
    assert not (folder / "ended.txt").exists(), "the sleep 30 was killed"
    assert stopped_in < 10
    assert stop.is_disabled()
    page.screenshot(path=str(screenshots / f"{shot}-2-stopped.png"))

    # Resume: the step in doubt asks by button; Skip with a reason; the run completes.
    resume.click()
    nb.wait_for(lambda: question.locator("button.nbd-skip").count() == 1, "the in-doubt question")
    assert question.locator("button.nbd-rerun").count() == question.locator("button.nbd-fail").count() == 1
    look_low += legible(out, [".nbd-question button.nbd-rerun", ".nbd-question button.nbd-skip", ".nbd-question button.nbd-fail"])
    question.locator(".nbd-reason input").fill(SKIP_REASON)
    nb.wait_for(lambda: question.locator(".nbd-reason input").input_value() == SKIP_REASON, "the reason typed")
    page.screenshot(path=str(screenshots / f"{shot}-3-in-doubt.png"))
    question.locator("button.nbd-skip").click()
    nb.wait_for(header_status(nb, 2, "completed"), "the resumed run to complete")
    assert "All done: the build was skipped." in answer_text(nb, 2)
    assert ("tool", "skip", f"{who()} (button)", SKIP_REASON) in decisions(store, run)
    assert read_run(run, str(store)).summary.status == "completed"

    # Fork from step 3 (model turn 0, its approval, its tool): a new run below, which completes.
    out.locator(".nbd-fork-at input").fill("3")
    out.locator(".nbd-fork-at input").press("Tab")
    nb.wait_for(lambda: out.locator(".nbd-fork-at input").input_value() == "3", "the fork box holding 3")
    out.locator("button.nbd-fork").click()
    fork = out.locator(".nbd-forks .nbd-timeline")
    nb.wait_for(lambda: fork.locator(".nbd-header.nbd-run-completed").count() == 1, "the fork to complete")
    assert fork.evaluate(STATES_OF) == ["replayed"] * 3 + ["live"], "the fork replays the 3 steps it was given, then goes on"
    assert FORKED in fork.locator(".nbd-answer").inner_text()
    forked = read_run(f"{run}-fork3", str(store))
    assert forked.summary.status == "completed" and len(forked.steps) == 4
    assert (folder / "effects.txt").read_text() == "approved\n", "the approved command ran once, never in replay or the fork"
    assert len(api.requests_at(0)) == 1 and len(api.requests_at(2)) == 1
    assert len(api.requests_at(1)) == 2, "turn 1 once for the run, once for its fork"
    fork.scroll_into_view_if_needed()
    page.screenshot(path=str(screenshots / f"{shot}-4-forked.png"))

    run_rows = ["replayed"] * 4 + ["skipped", "live"]
    assert states(nb, 2) == run_rows + ["replayed"] * 3 + ["live"], "the resumed run's rows, then its fork's"
    assert not look_low, f"hard to read in the {theme} theme:\n" + "\n".join(look_low)


def test_agent_wait_in_lab_replaces_the_live_widget_by_the_timeline_as_recorded(
    lab: LabServer, script: Callable[[str, list[Any]], Script], page: Any, console: ConsoleErrors
) -> None:
    # docs/background.md said JupyterLab keeps the live widget: it applies the other cell's update.
    model = "claude-e2e-bg-wait"
    script(model, [reply("Waited for.")])
    path = "background-wait/wait.ipynb"
    write_notebook(
        lab.root / path,
        ["%load_ext nb_durable", f"%%agent --background --run waited --model {model} --workspace .\nSay it.", "%agent_wait waited"],
    )
    nb = NotebookPage(page, lab, path)
    nb.run_and_wait(0)
    nb.run_and_wait(1)
    nb.wait_for(header_status(nb, 1, "completed"), "the background run to complete")
    assert nb.output(1).locator("button.nbd-fork").count() == 1, "the live widget, with its buttons"
    nb.run_and_wait(2)
    out = nb.output(1)
    nb.wait_for(lambda: out.locator(".jupyter-widgets").count() == 0, "the widget replaced")
    assert out.locator(".nbd-header.nbd-run-completed").count() == 1 and "Waited for." in answer_text(nb, 1)
    console.assert_clean()
