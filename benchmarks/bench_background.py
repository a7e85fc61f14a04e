"""Background runs, measured: how soon a ``--background`` cell gives the kernel back, and whether a
browser keeps up with a timeline fed from a worker thread at full speed.

    python benchmarks/bench_background.py

(a) *Cell submit to execute_reply*, ``%%agent --background`` against the foreground, in one real
kernel (jupyter_client) talking to the loopback Messages API in this process. The same scripted
run each time: 5 turns, each a ``list_dir`` call behind a 0.2 s model latency (``Delay``), then
an answer (11 steps, >= 1.2 s of model time). Each kind is run 5 times, alternating, after one
warm-up of each (the first ``%%agent`` imports the agent and ipywidgets); a new run id each
time. The time is taken from ``execute`` to the arrival of the cell's ``execute_reply`` on the
shell channel. A background round then runs ``%agent_wait``, and its total (submit to the wait's
reply) is printed beside the foreground's, so a background run is seen not to be slower.

(b) *The timeline fed from a worker thread*, in ``jupyter lab`` and Debian's headless chromium
(1280x900). One notebook cell starts a 1,000-step run in the background exactly as
``%%agent --background`` does (``jupyter.background.launch`` with a ``Timeline``: the same
widgets, buttons and thread), but with ``ScriptedModel`` and no latency, so the loop makes
steps as fast as it can write them to the log: the hardest a worker thread can push the
timeline. (499 model turns with one ``list_dir`` call each, the first with two, and an answer:
1,000 steps.) Two clocks, both wall time on this machine:

* in the page, a probe (a MutationObserver on the cell's output) counts the rows
  (``.nbd-step``) on screen and every row update (a row's HTML replaced: a new row, or a row
  going from *in flight* to *live*), timestamped with ``Date.now()``; once all 1,000 rows are
  there, the next painted frame is timestamped too;
* here, in a loop that sleeps 0.1 s (reading the growing log makes it slower; the interval
  is printed), the number of steps the log holds (``read_summary``) is sampled beside the
  number of rows the page shows, and the run's end is the log's last event.

Printed: steps/s the kernel recorded, row updates/s and rows/s the page received, the largest
and the mean lag (rows recorded but not on screen) while the run went, and the time from the
run's end (its last event in the log) to the last row painted. The browser "keeps up" when that
time stays under 1 s (the target of bench_browser.py for a replayed timeline).
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_browser import chromium_version
from nb_durable.core.runs import read_summary
from tests.e2e.browser import VIEWPORT, launch_chromium
from tests.e2e.lab import start_lab, write_notebook
from tests.e2e.notebook_page import NotebookPage
from tests.fakes import Delay, MessagesAPIServer, ScriptedScenario, reply, tool_use
from tests.jupyter.kernels import Kernel

ROUNDS = 5
TURNS = 5
LATENCY = 0.2
STEPS = 1000
TARGET_S = 1.0


# -- (a) submit to execute_reply -------------------------------------------------------------


def scenario() -> ScriptedScenario:
    turns: list[Any] = [Delay(LATENCY, reply(f"Turn {t}: looking.", tool_use("list_dir", {"path": "."}))) for t in range(TURNS)]
    turns.append(Delay(LATENCY, reply("Looked five times.")))
    return ScriptedScenario(turns)


def until_reply(kernel: Kernel, code: str, timeout: float = 120) -> float:
    """Send a cell; seconds until its execute_reply arrives (which must say ok)."""
    started = time.perf_counter()
    msg_id = kernel.client.execute(code, allow_stdin=False)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            msg = kernel.client.get_shell_msg(timeout=0.5)
        except Exception:  # queue.Empty: the reply has not come yet
            continue
        if msg["parent_header"].get("msg_id") == msg_id:
            elapsed = time.perf_counter() - started
            if msg["content"]["status"] != "ok":
                raise RuntimeError(f"{code!r} failed: {msg['content'].get('ename')}: {msg['content'].get('evalue')}")
            return elapsed
    raise TimeoutError(f"no execute_reply for {code!r} in {timeout}s")


def submit_to_reply() -> dict[str, list[float]]:
    folder = Path(tempfile.mkdtemp(prefix="nb-durable-bench-background-"))
    times: dict[str, list[float]] = {"foreground": [], "background": [], "background+wait": []}
    with MessagesAPIServer(scenario()) as server:
        kernel = Kernel(folder, ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="test-key")
        try:
            until_reply(kernel, '%load_ext nb_durable\n%config AgentMagics.model = "claude-bench-1"')
            for n in range(ROUNDS + 1):  # round 0 warms up
                fg = until_reply(kernel, f"%%agent --run fg{n} --workspace .\nLook five times.")
                started = time.perf_counter()
                bg = until_reply(kernel, f"%%agent --background --run bg{n} --workspace .\nLook five times.")
                until_reply(kernel, f"%agent_wait bg{n}")
                total = time.perf_counter() - started
                if n:
                    times["foreground"].append(fg)
                    times["background"].append(bg)
                    times["background+wait"].append(total)
            for n in range(1, ROUNDS + 1):
                for run in (f"fg{n}", f"bg{n}"):
                    summary = read_summary(run, str(folder / "runs"))
                    assert summary.status == "completed" and summary.steps == 2 * TURNS + 1, summary
        finally:
            kernel.close()
    return times


# -- (b) the timeline from a worker thread, in a browser ----------------------------------------

START_RUN = f'''import contextlib
from nb_durable.agent.run.loop import run_agent
from nb_durable.agent.models.messages import text_message, tool_use_message
from nb_durable.agent.models.scripted import ScriptedModel
from nb_durable.agent.display.views import RunView
from nb_durable.jupyter.background import launch
from nb_durable.jupyter.timeline import Timeline

turns = ({STEPS} - 2) // 2
replies = [tool_use_message([("list_dir", {{"path": "."}}, f"toolu_{{i:04d}}_{{k}}") for k in range(2 if i == 0 else 1)], text=f"Turn {{i}}.")
           for i in range(turns)] + [text_message("Looked many times.")]
task = "Look at the folder, many times."
timeline = Timeline(RunView("thousand", "running", task=task, model="claude-test-1", model_kind="scripted"), foreground=False)
go = lambda hooks: run_agent(task, run_id="thousand", client=ScriptedModel(replies), model="claude-test-1", store="runs",
                             workspace=".", max_turns=turns + 2, hooks=hooks)
handle = launch(timeline, go, store="runs", resources=contextlib.ExitStack())'''

PROBE = """(cell, target) => {
  const output = cell.querySelector('.jp-Cell-outputWrapper') || cell;
  const count = () => output.querySelectorAll('.nbd-step').length;
  const probe = {count: count(), updates: 0, mutations: 0, firstRow: null, lastChange: null, all: null, painted: null};
  const observer = new MutationObserver((records) => {
    const now = Date.now();
    probe.mutations += records.length;
    for (const r of records) {
      for (const node of r.addedNodes) {
        if (node.nodeType === 1 && (node.matches('.nbd-step') || node.querySelector('.nbd-step'))) probe.updates += 1;
      }
    }
    const n = count();
    if (n !== probe.count) {
      if (probe.firstRow === null && n > 0) probe.firstRow = now;
      probe.count = n;
      probe.lastChange = now;
      if (n >= target && probe.all === null) {
        probe.all = now;
        requestAnimationFrame(() => setTimeout(() => { probe.painted = Date.now(); }, 0));
      }
    }
  });
  observer.observe(output, {subtree: true, childList: true});
  window.__nbdProbe = probe;
}"""


def in_the_browser() -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    base = Path(tempfile.mkdtemp(prefix="nb-durable-bench-background-browser-"))
    folder = base / "root" / "bench"
    write_notebook(folder / "bench.ipynb", ["%load_ext nb_durable", START_RUN])
    lab = start_lab(base)
    samples: list[tuple[float, int, int]] = []
    try:
        with sync_playwright() as playwright:
            browser = launch_chromium(playwright)
            page = browser.new_context(viewport=VIEWPORT).new_page()
            page.set_default_timeout(60_000)
            nb = NotebookPage(page, lab, "bench/bench.ipynb")
            nb.hide_left_sidebar()
            nb.run_and_wait(0)
            nb.cell(1).evaluate(PROBE, STEPS)
            started = time.time()
            nb.run_and_wait(1)
            returned = time.time() - started
            store = str(folder / "runs")
            deadline = time.monotonic() + 600
            summary = None
            while time.monotonic() < deadline:
                probe = page.evaluate("() => window.__nbdProbe")
                try:
                    summary = read_summary("thousand", store)
                except LookupError:  # not opened yet
                    summary = None
                samples.append((time.time(), summary.steps if summary is not None else 0, int(probe["count"])))
                if summary is not None and summary.status != "running" and probe["painted"] is not None:
                    break
                time.sleep(0.1)
            probe = page.evaluate("() => window.__nbdProbe")
            page.screenshot(path=str(base / "bench-background.png"))
            browser.close()
    finally:
        lab.stop()
    assert summary is not None and summary.status == "completed" and summary.steps == STEPS, summary
    assert probe["count"] == STEPS and probe["painted"] is not None, probe
    assert summary.started_at is not None and summary.updated_at is not None
    going = [(t, r, s) for t, r, s in samples if t <= summary.updated_at]
    lags = [r - s for _, r, s in going] or [0]
    run_s = summary.updated_at - summary.started_at
    page_s = (probe["lastChange"] - probe["firstRow"]) / 1000
    return {
        "returned": returned,
        "run_s": run_s,
        "steps_per_s": STEPS / run_s,
        "updates": probe["updates"],
        "updates_per_s": probe["updates"] / max(page_s, 1e-3),
        "rows_per_s": STEPS / max(page_s, 1e-3),
        "max_lag": max(lags),
        "mean_lag": statistics.mean(lags),
        "samples": len(going),
        "every": run_s / max(len(going), 1),
        "after_end": probe["painted"] / 1000 - summary.updated_at,
        "screenshot": base / "bench-background.png",
    }


def main() -> int:
    import jupyterlab  # type: ignore[import-untyped]

    times = submit_to_reply()
    fg, bg, total = (statistics.median(times[k]) for k in ("foreground", "background", "background+wait"))
    print(
        f"nb_durable background runs: {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"JupyterLab {jupyterlab.__version__}, {chromium_version()} headless\n"
    )
    print(f"(a) cell submit to execute_reply, one kernel, loopback API: {TURNS} turns x {LATENCY:g} s latency "
          f"({2 * TURNS + 1} steps); median of {ROUNDS}")
    print(f"  {'%%agent (foreground)':<44} {fg * 1000:8.0f} ms")
    print(f"  {'%%agent --background':<44} {bg * 1000:8.0f} ms   ratio {bg / fg:.3f} ({fg / bg:.0f}x sooner)")
    print(f"  {'--background, then %agent_wait (the run)':<44} {total * 1000:8.0f} ms   ({total / fg:.2f} x the foreground)")
    print(f"  all rounds, ms: foreground {[round(x * 1000) for x in times['foreground']]}, "
          f"background {[round(x * 1000) for x in times['background']]}")

    b = in_the_browser()
    print(f"\n(b) a {STEPS:,}-step run at full speed (ScriptedModel, no latency) fed to the timeline from its worker thread, "
          f"in JupyterLab {VIEWPORT['width']}x{VIEWPORT['height']}")
    print(f"  {'the cell returned (submit to its number)':<52} {b['returned'] * 1000:8.0f} ms")
    print(f"  {'the run, first to last event in the log':<52} {b['run_s']:8.2f} s   ({b['steps_per_s']:.0f} steps/s recorded)")
    print(f"  {'row updates the page received':<52} {b['updates']:8d}     ({b['updates_per_s']:.0f}/s; "
          f"{b['rows_per_s']:.0f} new rows/s)")
    print(f"  {'rows recorded but not on screen, while it ran':<52} max {b['max_lag']:4d}, mean {b['mean_lag']:.0f} "
          f"({b['samples']} samples, one every {b['every']:.2f} s)")
    print(f"  {'the run ended (log) -> last row painted':<52} {b['after_end'] * 1000:8.0f} ms")
    ok = b["after_end"] < TARGET_S
    print(f"\n[{'ok' if ok else 'MISSED'}] the browser was {b['after_end']:.2f} s behind the run at its end "
          f"(target: under {TARGET_S:.0f} s); the background cell returned {fg / bg:.0f}x sooner than the foreground")
    print(f"screenshot: {b['screenshot']}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
