"""The offline demonstrations behind ``nb-durable demo``: a process is killed mid-run and a
second process resumes the run, replaying what was recorded and going on live.

The agent demo runs the demo model on a fresh copy of the bundled demo project (a failing
test to fix); the plain demo runs six ordinary Python steps. Both kill their first process
with SIGKILL (nothing gets to clean up, as when a kernel dies), from inside, at a chosen step.
Both work in one folder per user under the system's temporary folder (``demo_folder()``),
cleared as each demo starts, so running demos again leaves nothing piling up;
``nb-durable demo --clean`` removes it.
"""

from __future__ import annotations

import getpass
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ..agent.display.views import views_of
from ..agent.run.crash import die
from ..core.context import current_step
from ..core.durable import durable_run, step
from ..core.events import Event, StepCompleted
from ..core.runs import read_run
from ..errors import EXIT_CODES

EXIT_USAGE = EXIT_CODES["usage"]

__all__ = ["AGENT_CRASH_AT", "PLAIN_CRASH_AT", "PLAIN_STEPS", "agent_demo", "agent_demo_steps", "clean", "demo_folder", "plain_demo"]

DEMO_RUN = "demo-agent"
PLAIN_RUN = "demo-pipeline"
PLAIN_STEPS = 6
AGENT_CRASH_AT = 7
"""The agent demo's default kill: step 7 is the first run_bash (the tests), an external effect."""
PLAIN_CRASH_AT = 5
"""The plain demo's default kill: the summary, after four recorded downloads."""


def demo_folder() -> Path:
    """The one folder the demos work in, for this user."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid()) if hasattr(os, "getuid") else "user"
    return Path(tempfile.gettempdir()) / f"nb-durable-demo-{user}"


def _fresh(kind: str) -> Path:
    """The demo folder's ``kind`` subfolder, emptied (what an earlier demo left is removed)."""
    folder = demo_folder() / kind
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


def clean() -> int:
    """``demo --clean``: remove the demo folder."""
    folder = demo_folder()
    if folder.exists():
        shutil.rmtree(folder)
        print(f"removed {folder}")
    else:
        print(f"nothing to remove: {folder} does not exist")
    return 0


def _child(*args: str) -> int:
    command = [sys.executable, "-m", "nb_durable.cli", *args]
    return subprocess.run(command, check=False).returncode


def agent_demo_steps() -> int:
    """How many steps the agent demo's run takes when nothing kills it.

    Found by running it: the same task and settings on a scratch copy of the demo project,
    at latency 0, in a memory store (the scenario follows what the tools return, so this is
    the very run the demo's first process starts)."""
    from ..agent.models.demo import DEMO_TASK, DemoModel, prepare_demo_workspace
    from ..agent.run.loop import run_agent

    with tempfile.TemporaryDirectory(prefix="nb-durable-demo-steps-") as scratch:
        workspace = prepare_demo_workspace(Path(scratch) / "project")
        result = run_agent(
            DEMO_TASK, client=DemoModel(latency=0), workspace=str(workspace), store=f"memory://{scratch}", run_id=DEMO_RUN
        )
    return result.live_steps


def agent_demo(crash_at: int, latency: float, *, checked: bool = False) -> int:
    """Run the demo agent, kill it at step ``crash_at``, resume it; 0 if all went right.

    ``checked``: ``crash_at`` is the default, known to land inside the run; otherwise it is
    checked against ``agent_demo_steps()`` before anything runs."""
    from ..agent.models.demo import DEMO_TASK, prepare_demo_workspace

    if not checked:
        steps = agent_demo_steps()
        if crash_at > steps:
            raise ValueError(
                f"--crash-at {crash_at} is past the end: the demo run has {steps} steps when nothing kills it "
                f"(a kill adds the steps that redo the one killed), so choose --crash-at from 1 to {steps}"
            )
    workdir = _fresh("agent")
    workspace = prepare_demo_workspace(workdir / "project")
    store = str(workdir / "runs")
    os.environ["NB_DURABLE_DEMO_LATENCY"] = str(latency)
    print(
        "nb_durable demo: an agent (the offline demo model, driving real tools) fixes a failing test\n"
        f"in {workspace}. Its process is to be killed in step {crash_at}; a second process resumes the run.\n"
        f"Task: {DEMO_TASK}\n\nfirst process:"
    )
    first = _child("run", "--demo", "--run", DEMO_RUN, "--workspace", str(workspace), "--store", store,
                   "--kill-at", str(crash_at), DEMO_TASK)
    if first == 0:  # not expected after the check: the demo project or the Python changed under it
        steps = read_run(DEMO_RUN, store).summary.steps
        print(
            f"\nThe run finished all {steps} of its steps before step {crash_at} came, so nothing was "
            f"killed and there is nothing to resume. Choose --crash-at from 1 to {steps}."
        )
        return EXIT_USAGE
    print(f"  (exit status {first})\n\nsecond process: nb-durable resume {DEMO_RUN} --store {shlex.quote(store)}")
    before = read_run(DEMO_RUN, store).steps
    second = _child("resume", DEMO_RUN, "--store", store)
    record = read_run(DEMO_RUN, store)
    kept = sum(1 for s in before if s.completed_at is not None)
    fixed = subprocess.run(
        [sys.executable, "-m", "unittest", "-q"], cwd=workspace, capture_output=True, text=True, check=False
    )
    doubted = [(n, view) for n, view in enumerate(views_of(record)[1], 1) if view.decision]
    if doubted:
        n, view = doubted[0]
        print(
            f"\n{view.title} (step {n}) was running when the process died: an external effect whose outcome "
            "nobody knows. nb_durable did not run it again on its own; the model was told the outcome is "
            "unknown (--in-doubt skip) and decided what to do."
        )
    print(
        f"\nThe run is {record.summary.status}: {record.summary.steps} steps, each recorded once; "
        + (f"the second process replayed the first one's {kept} step{'' if kept == 1 else 's'} without executing them. " if kept else
           "the first process was killed before it recorded any step, so the second ran them all. ")
        + "The tests in the workspace now "
        f"{'pass' if fixed.returncode == 0 else 'FAIL'}.\n"
        f"Its log: {record.summary.location}\nSee it again with: nb-durable show {DEMO_RUN} --store {shlex.quote(store)}"
    )
    return 0 if second == 0 and fixed.returncode == 0 else 1


def _pipeline(store: str, outbox: Path, crash_at: int | None) -> None:
    """Six steps that take a moment each; the last sends a report (an external effect)."""

    def work(seconds: float) -> None:
        context = current_step()
        if context is not None and context.position + 1 == crash_at:
            time.sleep(seconds / 2)
            die(f"step {crash_at}")
        time.sleep(seconds)

    @step
    def download(i: int) -> str:
        work(0.3)
        return f"chunk {i}: {1000 + 37 * i} rows"

    @step
    def summarize(chunks: list[str]) -> str:
        work(0.3)
        return f"{sum(int(c.split(': ')[1].split()[0]) for c in chunks)} rows in {len(chunks)} chunks"

    def already_sent(text: str) -> str | None:
        """Check-then-act: if the outbox has the report, the send happened before a crash."""
        sent = outbox.exists() and text + "\n" in outbox.read_text()
        return f"sent: {text}" if sent else None

    @step(effect="external", check=already_sent)
    def send_report(text: str) -> str:
        work(0.0)
        with open(outbox, "a") as f:
            f.write(text + "\n")
        return f"sent: {text}"

    def show(event: Event, replayed: bool) -> None:
        if isinstance(event, StepCompleted):
            how = "replayed" if replayed else "live    "
            took = "" if replayed else f"{event.ms / 1000:5.2f}s"
            print(f"  {how}  {event.step.split('.')[-1]:<14} {took:>6}  {event.result}", flush=True)

    started = time.perf_counter()
    with durable_run(PLAIN_RUN, store) as log:
        log.listeners.append(show)
        chunks = [download(i) for i in range(1, 5)]
        sent = send_report(summarize(chunks))
        log.finish_run("completed", output=sent)
    print(f"  finished in {time.perf_counter() - started:.2f}s")


def plain_demo(crash_at: int) -> int:
    """The same demonstration with plain Python steps; 0 if the report was sent once."""
    if not 1 <= crash_at <= PLAIN_STEPS:
        raise ValueError(f"--crash-at must be a step number from 1 to {PLAIN_STEPS}, not {crash_at}")
    workdir = _fresh("plain")
    store, outbox = str(workdir / "runs"), workdir / "outbox.txt"
    print(
        f"nb_durable demo: {PLAIN_STEPS} plain Python steps (4 downloads, a summary, a report that is "
        f"sent),\nwhose process is killed in step {crash_at}, then started again with the same code.\n\n"
        "first process:"
    )
    child = ["demo", "--plain-child", "--store", store, "--outbox", str(outbox)]
    print(f"  (exit status {_child(*child, '--crash-at', str(crash_at))})\n\nsecond process:")
    second = _child(*child)
    sends = outbox.read_text().count("\n") if outbox.exists() else 0
    record = read_run(PLAIN_RUN, store)
    print(
        "\nThe second process replayed what the first had recorded, executing nothing, and went on "
        f"live.\nThe report was sent {'once' if sends == 1 else f'{sends} times'}; the run is {record.summary.status}. "
        f"Its log: {record.summary.location}"
    )
    return 0 if second == 0 and sends == 1 else 1


def plain_child(store: str, outbox: str, crash_at: int | None) -> None:
    """The body of one plain-demo process."""
    _pipeline(store, Path(outbox), crash_at)
