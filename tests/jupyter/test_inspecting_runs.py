"""Reading a run afterwards is safe and says what happened (issue 14, items 13, 16, 17).

One run, made through the CLI against the loopback Messages API: its model writes hostile
HTML (``<script>``, ``onerror``, a ``javascript:`` link) and Markdown, and its ``run_bash``
step is cut off by a SIGKILL and then skipped by the default in-doubt policy on resume.
Then, as a user would look at it:

* ``nb-durable show`` prints the skipped step's outcome, not an empty output.
* ``nb-durable export`` writes a notebook that says at the top that it is a record, whose
  tool cells are commented out (``--runnable`` writes real ``%%bash`` cells, and says what
  running them does), and which ``jupyter nbconvert --to html`` turns into HTML with no live
  ``<script>``, ``onerror`` or ``javascript:`` href; the skipped outcome is in it.
* ``%agent_show`` in a real kernel draws the final answer as Markdown (``<strong>``, ``<code>``,
  a list, an http link with ``rel="noopener noreferrer"``) with the hostile parts inert, and
  shows the skipped outcome.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest

from nb_durable.agent.display.views import SKIPPED_OUTCOME
from tests import forkserver
from tests.conftest import subprocess_env
from tests.fakes import MessagesAPIServer, ScriptedScenario, reply, tool_use
from tests.jupyter.kernels import Kernel

MODEL = "claude-test-1"
HOSTILE = "<script>alert(1)</script> and <img src=x onerror=alert(1)>"
ANSWER = (
    "**Done.** I checked `started.txt` first.\n\n"
    f"{HOSTILE}\n\n"
    "- the deploy *may* have run\n"
    "- see [the runbook](https://example.org/runbook) or [this](javascript:alert(1))\n\n"
    "```\n<b>not bold</b>\n```"
)


@dataclass
class Recorded:
    folder: Path
    api: dict[str, str]


def cli(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return forkserver.run(
        [sys.executable, "-m", "nb_durable.cli", *args],
        cwd=cwd,
        env=subprocess_env(**env),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Recorded]:
    """Run ``deploy``: killed during run_bash, resumed (the step is skipped), completed."""
    folder = tmp_path_factory.mktemp("inspect")
    workspace = folder / "work"
    workspace.mkdir()
    turns = [
        reply(f"Deploying. {HOSTILE}", tool_use("run_bash", {"command": "echo started > started.txt; sleep 30"}, id="toolu_deploy")),
        reply(ANSWER),
    ]
    with MessagesAPIServer(ScriptedScenario(turns)) as server:
        api = {"ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": "test-key"}
        run = forkserver.Popen(
            [sys.executable, "-m", "nb_durable.cli", "run", "Deploy.", "--run", "deploy", "--model", MODEL, "--workspace", "work"],
            cwd=folder,
            env=subprocess_env(**api),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        while not (workspace / "started.txt").exists():
            assert run.poll() is None, run.communicate()
            assert time.monotonic() < deadline, "the command never started"
            time.sleep(0.02)
        run.kill()
        run.communicate(timeout=30)
        resumed = cli("resume", "deploy", cwd=folder, **api)
        assert resumed.returncode == 0, resumed.stderr
        yield Recorded(folder, api)


def test_show_prints_the_outcome_of_a_skipped_step(recorded: Recorded) -> None:
    shown = cli("show", "deploy", cwd=recorded.folder)
    assert shown.returncode == 0, shown.stderr
    line = next(line for line in shown.stdout.splitlines() if "run_bash" in line)
    assert line.split()[0] == "skipped" and line.endswith(f"-> {SKIPPED_OUTCOME} (skip by policy)"), line  # and who settled it


def _html(notebook: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "nbconvert", "--to", "html", str(notebook), "--stdout"],
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _assert_inert(html: str) -> None:
    assert "<script>alert(1)" not in html
    assert not re.search(r"<img[^>]*onerror", html, re.I), "a live onerror attribute"
    assert not re.search(r"""href\s*=\s*["']?\s*javascript:""", html, re.I), "a live javascript: link"


@pytest.mark.slow(13)
def test_export_warns_is_unrunnable_and_stays_inert_under_nbconvert(recorded: Recorded) -> None:
    done = cli("export", "deploy", "-o", "deploy.ipynb", cwd=recorded.folder)
    assert done.returncode == 0, done.stderr
    notebook = nbformat.read(recorded.folder / "deploy.ipynb", as_version=4)
    first = notebook.cells[0]
    assert first.cell_type == "markdown" and "record of an agent run, not a program" in first.source
    assert "commented out" in first.source and "--runnable" in first.source
    (bash,) = [c for c in notebook.cells if c.cell_type == "code"]
    assert all(line.startswith("#") for line in bash.source.splitlines()), bash.source
    assert "# %%bash" in bash.source
    assert "".join(o["text"] for o in bash.outputs).strip() == SKIPPED_OUTCOME
    html = _html(recorded.folder / "deploy.ipynb")
    _assert_inert(html)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html  # shown as text, not dropped
    assert SKIPPED_OUTCOME in html


@pytest.mark.slow(13)
def test_a_runnable_export_has_real_cells_and_says_so(recorded: Recorded) -> None:
    done = cli("export", "deploy", "-o", "live.ipynb", "--runnable", cwd=recorded.folder)
    assert done.returncode == 0, done.stderr
    assert "re-run the recorded effects" in done.stdout
    notebook = nbformat.read(recorded.folder / "live.ipynb", as_version=4)
    assert "Running a code cell does it again, for real" in notebook.cells[0].source
    (bash,) = [c for c in notebook.cells if c.cell_type == "code"]
    assert bash.source.startswith("%%bash\necho started")
    _assert_inert(_html(recorded.folder / "live.ipynb"))


@pytest.mark.kernel
def test_agent_show_renders_the_answer_as_safe_markdown(recorded: Recorded) -> None:
    kernel = Kernel(recorded.folder, NB_DURABLE_DEMO_LATENCY="0")
    try:
        assert kernel.run("%load_ext nb_durable").status == "ok"
        shown = kernel.run("%agent_show deploy")
        assert shown.status == "ok", shown.text()
    finally:
        kernel.close()
    html = shown_html(shown.outputs)
    answer = html[html.index('class="nbd-answer') :]
    assert "<p><strong>Done.</strong> I checked <code>started.txt</code> first.</p>" in answer
    assert "<li>the deploy <em>may</em> have run</li>" in answer
    assert '<a href="https://example.org/runbook" rel="noopener noreferrer" target="_blank">the runbook</a>' in answer
    assert "<pre><code>&lt;b&gt;not bold&lt;/b&gt;</code></pre>" in answer
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in answer
    _assert_inert(html)
    assert SKIPPED_OUTCOME in html


def shown_html(outputs: list[dict]) -> str:
    """The text/html of the outputs (``%agent_show`` returns the static timeline)."""
    return "".join(o["content"]["data"].get("text/html", "") for o in outputs if "data" in o["content"])
