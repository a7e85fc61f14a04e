"""JupyterLab 4 in headless Chromium, driven as a person would: what is proven here.

* A ``%%agent`` cell run against the loopback Messages API shows its timeline growing live
  in the browser (live rows, then an in-flight model call).
* SIGKILL of the kernel in the middle of a model call: the server restarts the kernel, Lab's
  "Kernel Restarting" dialog is accepted, ``%load_ext`` + ``%agent_resume`` show the steps
  recorded before the kill as *replayed* and the rest as *live*, in that order, ending with the
  final answer; the server never got a second request for a completed turn and the bash
  effect ran once.
* Restart from the Kernel menu, ``%load_ext`` again and the same ``%%agent`` cell: every step
  shows as replayed and no request reaches the server.
* The timeline reads well at 1280x900 in the light and the dark theme: every badge's text
  and the header's status words (each state and status, injected into the real page so the
  real theme's CSS applies) have a contrast ratio of at least 4.5 against their composited
  background; the step titles, summaries and token counts, and the answer at least 3; a long tool output sits
  in a closed ``<details>``; the timeline is not wider than the cell's output area and nothing
  scrolls sideways, also with the long output opened (it wraps and scrolls in its own box).
* A model call waiting out a 529's retry-after shows its row as retrying (the attempt, the
  error) and when the next attempt is due, in the browser, while it waits.
* No console error from the page, the widget or nb_durable (see the allow-list in browser.py).

Screenshots land in the folder printed at the end of the run (``e2e screenshots ... in``).
The README's picture, ``docs/timeline.png``, is taken by ``test_screenshot.py`` from the demo.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from nb_durable.agent import DEFAULT_MODEL
from tests.e2e.browser import ConsoleErrors
from tests.e2e.lab import LabServer, write_notebook
from tests.e2e.notebook_page import NotebookPage
from tests.e2e.shared_api import Script
from tests.fakes import Delay, Error, reply, tool_use

STATES = ["replayed", "live", "in_flight", "waiting", "retrying", "failed", "cut_off", "in_doubt", "skipped", "recorded"]
RUN_STATUSES = [
    "running", "waiting", "completed", "failed", "interrupted", "crashed", "in_doubt",
    "truncated", "refused", "context_full", "budget_exhausted",
]

STATES_OF = """(area) => Array.from(area.querySelectorAll('.nbd-step')).map(row =>
  Array.from(row.classList).filter(c => c !== 'nbd-step' && c.startsWith('nbd-')).map(c => c.slice(4)).join(' '))"""

# WCAG contrast of an element's text against what is really behind it: the backgrounds of the
# element and its ancestors, composited (the badges are translucent tints), over white.
CONTRAST = """(el) => {
  const parse = (c) => {  // rgb(), rgba(), and color(srgb ...) as color-mix() computes
    let m = /^rgba?\\(([^)]*)\\)$/.exec(c);
    const scale = m ? 1 : 255;
    if (!m) m = /^color\\(srgb ([^)]*)\\)$/.exec(c);
    if (!m) throw new Error('unexpected color ' + c);
    const p = m[1].split(/[\\s,\\/]+/).filter(Boolean).map(Number);
    return [p[0] * scale, p[1] * scale, p[2] * scale, p.length > 3 ? p[3] : 1];
  };
  const over = (top, below) => [0, 1, 2].map(i => top[i] * top[3] + below[i] * (1 - top[3])).concat([1]);
  const layers = [];
  for (let e = el; e; e = e.parentElement) {
    const c = parse(getComputedStyle(e).backgroundColor);
    if (c[3] > 0) layers.push(c);
    if (c[3] >= 1) break;
  }
  let back = [255, 255, 255, 1];
  for (const layer of layers.reverse()) back = over(layer, back);
  const fore = over(parse(getComputedStyle(el).color), back);
  const lum = (c) => {
    const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]);
  };
  const [hi, lo] = [lum(fore), lum(back)].sort((a, b) => b - a);
  return {ratio: (hi + 0.05) / (lo + 0.05), fore: fore.slice(0, 3).map(Math.round), back: back.slice(0, 3).map(Math.round)};
}"""

# Rows and headers of every state, built with the timeline's own classes and put beside the
# real rows, so that the theme's variables and the widget's CSS apply as they do for real.
INJECT = """(area, [states, statuses]) => {
  const row = area.querySelector('.nbd-step');
  const header = area.querySelector('.nbd-header');
  const made = [];
  for (const s of states) {
    const div = document.createElement('div');
    div.className = 'nbd-step nbd-' + s + ' nbd-probe';
    div.innerHTML = '<details><summary><span class="nbd-badge">' + s.replace('_', ' ') +
      '</span><span class="nbd-title">model turn 9</span><span class="nbd-brief">probe</span></summary></details>';
    row.parentElement.appendChild(div);
    made.push(div);
  }
  for (const s of statuses) {
    const div = document.createElement('div');
    div.className = 'nbd-header nbd-run-' + s + ' nbd-probe';
    div.innerHTML = '<span class="nbd-run-id">probe</span><span class="nbd-status">' + s.replace('_', ' ') + '</span>';
    header.parentElement.appendChild(div);
    made.push(div);
  }
  return made.length;
}"""

# The right edge of the widest thing the timeline draws (folded-away parts measure 0).
RIGHTMOST = """(area) => Math.max(0, ...Array.from(area.querySelectorAll('.nbd-timeline, .nbd-timeline *'))
  .map(el => el.getBoundingClientRect().right))"""

PULSE = "(badge) => getComputedStyle(badge).animationName"

NO_SIDEWAYS_SCROLL = """() => {
  const wide = [];
  const check = (el, name) => { if (el && el.scrollWidth > el.clientWidth + 1) wide.push(name + ' ' + el.scrollWidth + '>' + el.clientWidth); };
  check(document.scrollingElement, 'document');
  for (const el of document.querySelectorAll('.jp-WindowedPanel-outer, .jp-Notebook, .jp-OutputArea-output, .nbd-timeline')) {
    check(el, el.className.split(' ').slice(-1)[0]);
  }
  return wide;
}"""


def states(nb: NotebookPage, cell: int) -> list[str]:
    """The state of every timeline row of a cell's output, top to bottom."""
    result: list[str] = nb.output(cell).evaluate(STATES_OF)
    return result


def answer_text(nb: NotebookPage, cell: int) -> str:
    answer = nb.output(cell).locator(".nbd-answer")
    return str(answer.inner_text()) if answer.count() else ""


def new_kernel_pid(lab: LabServer, nb: NotebookPage, kernel_id: str, old_pid: int, timeout: float = 60) -> int:
    """Wait for the kernel to come back as a new process, then for Lab to show it ready."""
    pid = {"now": old_pid}

    def changed() -> bool:
        nb.accept_dialog()
        try:
            pid["now"] = lab.kernel_pid(kernel_id)
        except AssertionError:
            return False
        return pid["now"] != old_pid

    nb.wait_for(changed, "the kernel to come back as a new process", timeout)
    nb.wait_kernel_ready()
    return pid["now"]


# ---------------------------------------------------------------------------------------------
# Crash, resume, restart, replay


def test_kill_resume_restart_replay_in_lab(
    lab: LabServer, script: Callable[[str, list[Any]], Script], page: Any, console: ConsoleErrors, screenshots: Path
) -> None:
    api = script(
        "claude-e2e-story",
        [
            reply("I'll write a note.", tool_use("write_file", {"path": "note.txt", "content": "hello\n"}, id="toolu_w")),
            reply("Now I record the effect.", tool_use("run_bash", {"command": "echo ran >> effects.txt"}, id="toolu_b")),
            [Delay(60, reply("too late")), reply(tool_use("read_file", {"path": "note.txt"}, id="toolu_r"))],
            reply("All done: the note says hello."),
        ],
    )
    agent_cell = "%%agent --run story --model claude-e2e-story --workspace .\nWrite a note, record the effect, read the note."
    path = "story/story.ipynb"
    write_notebook(lab.root / path, ["%load_ext nb_durable", agent_cell, "%agent_resume story"])
    folder = lab.root / "story"

    nb = NotebookPage(page, lab, path)
    nb.run_and_wait(0)
    nb.run_cell(1)
    # Rows follow the run within the timeline's throttle (0.1 s), so wait for the whole picture.
    grown = ["live"] * 4 + ["in_flight"]
    nb.wait_for(lambda: len(api.requests_at(2)) >= 1 and states(nb, 1) == grown, "model turn 2 in flight, every row before it live")
    assert states(nb, 1) == grown, "the timeline grew live, row by row"
    assert nb.output(1).locator(".nbd-header.nbd-run-running").count() == 1
    in_flight = nb.output(1).locator(".nbd-in_flight .nbd-badge")
    assert in_flight.evaluate(PULSE) == "nbd-pulse", "the step in flight pulses while the kernel runs it"
    page.screenshot(path=str(screenshots / "lab-1-live.png"))

    kernel_id = lab.kernel_id(path)
    dead = lab.kill_kernel(path)
    new_kernel_pid(lab, nb, kernel_id, dead)
    assert (folder / "effects.txt").read_text() == "ran\n"
    page.screenshot(path=str(screenshots / "lab-2-killed.png"))
    header = nb.output(1).locator(".nbd-header")
    nb.wait_for(lambda: not header.locator(".nbd-status").is_visible(), "the dead kernel's timeline to stop saying running")
    left = header.inner_text()
    assert "the kernel running this stopped: run %load_ext nb_durable and %agent_resume story to go on" in left, (
        "the timeline the dead kernel left says how to go on, and no longer that it is running"
    )
    assert "running" not in left.split("the kernel running this")[0]
    assert in_flight.evaluate(PULSE) == "none", "nor does its step in flight pulse as if something ran it"

    nb.run_and_wait(0)
    nb.run_and_wait(2)
    assert states(nb, 2) == ["replayed"] * 4 + ["live"] * 3, "steps before the kill replayed, the rest live"
    assert nb.output(2).locator(".nbd-header.nbd-run-completed").count() == 1
    assert "All done: the note says hello." in answer_text(nb, 2)
    assert (folder / "effects.txt").read_text() == "ran\n", "the bash effect ran once"
    assert len(api.requests_at(0)) == 1 and len(api.requests_at(1)) == 1
    assert len(api.requests_at(2)) == 2, "the killed call, then the resumed one"
    api.assert_no_repeats()
    page.screenshot(path=str(screenshots / "lab-3-resumed.png"))

    sent = len(api.requests())
    pid = lab.kernel_pid(kernel_id)
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Kernel$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Restart Kernel…$")).click()
    nb.accept_dialog()
    new_kernel_pid(lab, nb, kernel_id, pid)
    nb.run_and_wait(0)
    nb.run_and_wait(1)
    assert states(nb, 1) == ["replayed"] * 7, "after a restart the finished cell replays every step"
    assert "All done: the note says hello." in answer_text(nb, 1)
    assert len(api.requests()) == sent, "replay sent no request"
    page.screenshot(path=str(screenshots / "lab-4-replayed.png"))
    console.assert_clean()


# ---------------------------------------------------------------------------------------------
# How it looks, light and dark


LONG_LINE = "0123456789abcdef" * 200  # one 3,200-character line without a space
BUILD_LOG = "\n".join(
    [f"[{i:03d}] compiling module_{i}.py ... ok" for i in range(1, 240)]
    + [f"[240] ERROR module_240.py: {LONG_LINE}", "[241] build failed: 1 error"]
)
FINAL = (
    "The build failed at step 240: module_240.py has an unterminated string.\n\n"
    "I wrote fix.txt with the corrected line. Nothing else in the log is an error."
)


RETRY_AFTER_MS = 2500  # long enough to see the row while it waits


def look_scenario() -> list[Any]:
    return [
        reply("I'll start by looking at the project.", tool_use("list_dir", {"path": "."}, id="toolu_l")),
        reply("The build log should say what failed.", tool_use("read_file", {"path": "build.log"}, id="toolu_r")),
        reply("Let me find the error lines.", tool_use("run_bash", {"command": "grep -c ok build.log"}, id="toolu_g")),
        [
            Error(529, retry_after_ms=RETRY_AFTER_MS),
            reply("Found it; writing the fix.", tool_use("write_file", {"path": "fix.txt", "content": "fixed\n"}, id="toolu_f")),
        ],
        reply(FINAL),
    ]


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_timeline_reads_well_at_1280x900(
    theme: str,
    request: pytest.FixtureRequest,
    script: Callable[[str, list[Any]], Script],
    page: Any,
    console: ConsoleErrors,
    screenshots: Path,
) -> None:
    server: LabServer = request.getfixturevalue("lab" if theme == "light" else "dark_lab")
    # The light run shows what a user types: the default model, no %config. The dark run needs a
    # model of its own on the shared server.
    model = DEFAULT_MODEL if theme == "light" else "claude-e2e-look-dark"
    script(model, look_scenario())
    path = f"look-{theme}/look.ipynb"
    setup = "%load_ext nb_durable" + ("" if theme == "light" else f'\n%config AgentMagics.model = "{model}"')
    write_notebook(
        server.root / path,
        [
            setup,
            "%%agent --crash-at 5\nFind out why the build failed and fix it.",
            "%agent_resume",
        ],
    )
    (server.root / path).parent.joinpath("build.log").write_text(BUILD_LOG, encoding="utf-8")

    nb = NotebookPage(page, server, path)
    nb.hide_left_sidebar()  # more room, as a reader would
    nb.run_and_wait(0)
    nb.run_and_wait(1)
    assert states(nb, 1) == ["live"] * 4 + ["cut_off"], "the simulated crash cut off step 5 as it started"
    assert nb.output(1).locator(".nbd-header.nbd-run-crashed").count() == 1
    nb.run_cell(2)
    # While turn 4 waits out the 529's retry-after, its row says so, and when the retry is due
    # (nothing redraws the row as the wait passes, so a countdown would stand still).
    retrying = nb.steps(2, "retrying")
    nb.wait_for(lambda: retrying.count() == 1, "the model row waiting out the 529")
    said = retrying.first.locator("summary").inner_text()
    assert re.search(r"retrying \d+/\d+", said) and "529" in said, said
    due = re.search(r"retrying at (\d\d):(\d\d):(\d\d), after a 2\.5s wait", said)
    assert due, f"the row says when the next attempt is due: {said!r}"
    nb.wait_cell_done(2)
    assert states(nb, 2) == ["replayed"] * 4 + ["live"] * 5
    assert "unterminated string" in answer_text(nb, 2)
    nb.cell(2).locator(".jp-InputArea-editor").click()
    page.keyboard.press("Escape")
    nb.wait_for(lambda: page.locator(".jp-Notebook.jp-mod-commandMode").count() > 0, "the notebook in command mode")
    page.screenshot(path=str(screenshots / f"timeline-{theme}.png"))

    # The long tool output (the read_file of build.log) is folded away.
    output = nb.output(2)
    long_row = output.locator(".nbd-step", has=page.locator("pre", has_text="build failed: 1 error")).first
    assert long_row.locator("details").evaluate("d => d.open") is False
    assert not long_row.locator("pre").last.is_visible()
    area = output.locator(".jp-OutputArea-output").first.bounding_box()
    timeline = output.locator(".nbd-timeline").first.bounding_box()
    assert area is not None and timeline is not None
    right = area["x"] + area["width"] + 1
    assert timeline["x"] >= area["x"] - 1 and timeline["x"] + timeline["width"] <= right, (timeline, area)
    assert output.evaluate(RIGHTMOST) <= right, "a row, header or answer sticks out of the output area"
    assert page.evaluate(NO_SIDEWAYS_SCROLL) == []

    # Opened, it stays inside the output area: wrapped, and scrolling inside its own box.
    long_row.locator("summary").click()
    pre = long_row.locator("pre").last
    assert pre.is_visible()
    box = pre.bounding_box()
    assert box is not None and box["x"] + box["width"] <= right, (box, area)
    assert output.evaluate(RIGHTMOST) <= right
    assert pre.evaluate("p => p.scrollHeight > p.clientHeight && p.scrollWidth <= p.clientWidth + 1"), "tall, not wide"
    assert page.evaluate(NO_SIDEWAYS_SCROLL) == []
    long_row.scroll_into_view_if_needed()
    page.screenshot(path=str(screenshots / f"timeline-{theme}-long-output-open.png"))
    long_row.locator("summary").click()

    # Every badge and status word is legible against what is really behind it.
    assert output.locator(".nbd-timeline").first.evaluate(INJECT, [STATES, RUN_STATUSES]) == len(STATES) + len(RUN_STATUSES)
    low = []
    for state in STATES:
        got = output.locator(f".nbd-probe.nbd-{state} .nbd-badge").evaluate(CONTRAST)
        if got["ratio"] < 4.5:
            low.append(f"badge {state}: {got}")
    for status in RUN_STATUSES:
        got = output.locator(f".nbd-probe.nbd-run-{status} .nbd-status").evaluate(CONTRAST)
        if got["ratio"] < 4.5:  # small bold text, as the badges: the header's lighter ground is no excuse
            low.append(f"status {status}: {got}")
    for selector in (".nbd-title", ".nbd-brief", ".nbd-meta", ".nbd-facts", ".nbd-money", ".nbd-answer"):
        got = output.locator(f".nbd-timeline {selector}").first.evaluate(CONTRAST)
        if got["ratio"] < 3:
            low.append(f"{selector}: {got}")
    page.screenshot(path=str(screenshots / f"timeline-{theme}-all-states.png"))
    assert not low, f"hard to read in the {theme} theme:\n" + "\n".join(low)
    console.assert_clean()
