"""The README and the docs pages, taken at their word: commands run as written, Python runs, tables are true.

One mechanism for every page a reader follows, ``README.md`` and ``docs/*.md`` alike:

* Every ``nb-durable ...`` line a page shows (in code blocks and in inline code) is in
  ``EXPECTED`` with the exit code it must give, and gives it when run as written in a fresh
  folder, in order, with no key (the demo model answers). ``RUN`` and ``NEW`` are run ids:
  the folder holds a run named ``RUN``, killed in the middle, so ``resume``, ``show``,
  ``export`` and ``fork`` have something real to work on. A command of any page missing from
  ``EXPECTED`` fails the test, so a new one cannot go untried.
* Each page's Python snippets run, in order, in one namespace (as cells of one session),
  against the loopback Messages API server, twice: the second time the step log replays them,
  the model is asked nothing, and the files the snippets wrote (``comments.txt``) are unchanged.
* The exit-code table is ``exit_code_table()``, which is derived from ``errors.EXIT_CODES``;
  the settings table is ``settings_table()``, derived from the package's settings table: each
  is checked on the one page that carries it (``tests/docs_tables.py`` says which, and writes
  them again). A log line a page shows decodes with the
  package's own reader (its checksum is right).
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from nb_durable.agent import mcp_example_config
from nb_durable.agent.models.demo import DEMO_TASK, prepare_demo_workspace
from nb_durable.cli.commands import EXIT_MEANINGS
from nb_durable.core.codec import decode_event
from nb_durable.errors import EXIT_CODES
from tests.conftest import subprocess_env
from tests.docs_tables import TABLES, table_after
from tests.fakes import FunctionScenario, MessagesAPIServer, reply

REPO = Path(__file__).resolve().parents[1]
PAGES = {path.relative_to(REPO).as_posix(): path.read_text() for path in [REPO / "README.md", *sorted(REPO.glob("docs/*.md"))]}
"""Every page a reader follows, by its path in the repository: the README first, then docs/."""

SYNOPSES = {
    "nb-durable copy SRC DST [RUN...]",
    'nb-durable run "..."',
    'nb-durable continue RUN "message"',
    'nb-durable run "..." --mcp mcp.json',
    "nb-durable resume",
    "nb-durable resume RUN",
    "nb-durable export",
    "nb-durable show RUN",
    "nb-durable worker",
    "nb-durable worker --store URL",
    "nb-durable worker --trace",
    'nb-durable run "..." --tag nightly',
    "nb-durable worker --store postgresql://host/db --concurrency 4",
    "nb-durable run --batch FILE --batch-api",
    "nb-durable worker --concurrency N",
    "nb-durable fork RUN NEW --at N",
}
"""Lines that spell a command's shape with placeholders, or name a command in prose, not a
command to run."""

EXPECTED: list[tuple[str, int, str]] = [
    # (the command as a page writes it, its exit code, what its output must say)
    ("nb-durable --version", 0, "nb-durable 0."),
    ("nb-durable --help", 0, "exit codes:"),
    ("nb-durable check-index", 0, "equals its logs"),
    ("nb-durable demo", 0, "The tests in the workspace now pass."),
    ("nb-durable demo --plain", 0, "The report was sent once"),
    ("nb-durable demo --clean", 0, "removed "),
    ('nb-durable run "Find out why the tests fail and fix them" --workspace path/to/project', 2,
     "--workspace path/to/project is not a folder"),
    ("nb-durable runs", 0, "RUN "),
    ("nb-durable resume [RUN]", 0, "resuming RUN, the latest unfinished run"),
    ('nb-durable continue RUN "now also X"', 0, "follow-up before"),
    ('nb-durable run --mcp mcp.json "Find my notes about the release, tag them, and send a summary to the team."', 0,
     "`send_note` answered `sent to team`"),
    ("nb-durable show [RUN]", 0, ": completed, "),
    ("nb-durable export RUN -o run.ipynb", 0, "wrote run.ipynb"),
    ("nb-durable fork RUN NEW --at 7", 0, "forked RUN at step 7 into NEW"),
    ("nb-durable copy runs/ postgresql://host/db", 2, "cannot connect to the PostgreSQL store postgresql://host/db"),
    ("nb-durable prune --older-than 30d --status completed --dry-run", 0, "0 run(s) would be deleted"),
    ("nb-durable prune --older-than 30d", 0, "0 run(s) deleted"),
    ("nb-durable worker --store runs.db --once --tag nightly --older-than 10m", 0, "0 run(s) taken"),
    ("nb-durable delete RUN", 0, "deleted run RUN"),
    ("nb-durable run --batch tasks.jsonl --tag nightly", 0, "2 run(s) queued"),
    ("nb-durable worker --once --tag nightly --concurrency 2", 0, "2 run(s) taken, 2 completed"),
    ("nb-durable wait --batch tasks.jsonl", 0, "2 of 2 run(s) completed"),
]  # fmt: skip


BATCH = re.search(r"with `tasks.jsonl` such as\n\n```\n(.*?)```", PAGES["docs/workers.md"], re.S).group(1)  # type: ignore[union-attr]
"""The batch file the workers page shows, for its ``run --batch``."""


def documented_commands() -> list[str]:
    """Every nb-durable command line of every page, in order, without prompts and comments."""
    found: list[str] = []
    text = "\n".join(PAGES.values())
    for match in re.finditer(r"```[^\n]*\n(.*?)```|`([^`\n]+)`", text, re.S):
        block, inline = match.groups()
        for raw in block.splitlines() if block is not None else [inline]:
            line = raw.split(" # ")[0].strip().removeprefix("$ ")
            at = line.find("nb-durable ")
            if at >= 0 and "pip install 'nb-durable" not in line:
                command = line[at:].strip()
                if command not in found:
                    found.append(command)
    return found


def test_every_documented_command_is_expected() -> None:
    written = documented_commands()
    assert set(written) - SYNOPSES == {c for c, _, _ in EXPECTED}, "the pages' commands and EXPECTED differ"


def run(command: str, cwd: Path, tmp: Path) -> subprocess.CompletedProcess[str]:
    args = shlex.split(command)
    assert args[0] == "nb-durable"
    return subprocess.run(
        [sys.executable, "-m", "nb_durable.cli", *args[1:]],
        cwd=cwd,
        env=subprocess_env(NB_DURABLE_DEMO_LATENCY="0", TMPDIR=str(tmp)),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


# Some twenty fresh interpreters in a row: 100 s alone, past the suite's 300 s under a full run's load.
@pytest.mark.slow(100)
@pytest.mark.timeout(900)
def test_every_documented_command_runs_as_written(tmp_path: Path) -> None:
    folder = tmp_path / "project-folder"
    folder.mkdir()
    prepare_demo_workspace(folder / "work")
    # A run named RUN, SIGKILLed during its tenth step, for the commands that name one.
    killed = run(f"nb-durable run --demo --run RUN --workspace work --kill-at 10 '{DEMO_TASK}'", folder, tmp_path)
    assert killed.returncode == -9, killed.stdout + killed.stderr
    (folder / "tasks.jsonl").write_text(BATCH)
    # The MCP page's config: the bundled notes server, on a folder holding one note.
    (folder / "notes").mkdir()
    (folder / "notes" / "standup.md").write_text("Standup: the release moves to Friday.\n")
    (folder / "mcp.json").write_text(json.dumps(mcp_example_config(folder / "notes")))
    for command, code, says in EXPECTED:
        if "[RUN]" in command:  # without a run (the page says what it picks), then naming RUN
            outcomes = [run(command.replace(" [RUN]", ""), folder, tmp_path), run(command.replace("[RUN]", "RUN"), folder, tmp_path)]
        else:
            outcomes = [run(command, folder, tmp_path)]
        for done in outcomes:
            assert done.returncode == code, (command, done.stdout[-2000:], done.stderr)
            assert "Traceback" not in done.stderr, command
        assert says in outcomes[0].stdout + outcomes[0].stderr, (command, outcomes[0].stdout[-2000:], outcomes[0].stderr)
    # The terminal page's run command completes once its folder exists (offline: the demo model).
    prepare_demo_workspace(folder / "path" / "to" / "project")
    done = run(next(c for c, _, _ in EXPECTED if c.startswith("nb-durable run ")), folder, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "uses the offline demo model" in done.stderr


def python_snippets(page: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", PAGES[page], re.S)


WITH_SNIPPETS = [page for page in PAGES if python_snippets(page)]

EFFECTS = {"README.md": r"\['\d+ files'\]", "docs/python.md": r"\['all green'\]"}
"""What the page's effects leave in comments.txt, once, however often its snippets run."""

PRINTS = {"docs/python.md": ("live", "replayed")}
"""What the page's snippets print the first time and the second (TextProgress: each step's state)."""

SNIPPETS_RUN = (
    "import os, sys\nnamespace = {}\n"
    "for i, snippet in enumerate(sys.argv[2:], 1):\n"
    "    exec(compile(snippet, f'{sys.argv[1]} snippet {i}', 'exec'), namespace)\n"
    "print('comments:', open('comments.txt').read().splitlines() if os.path.exists('comments.txt') else None)\n"
)


@pytest.mark.slow(9)
@pytest.mark.parametrize("page", WITH_SNIPPETS)
def test_the_python_snippets_run_as_written(page: str, tmp_path: Path) -> None:
    snippets = python_snippets(page)
    prepare_demo_workspace(tmp_path / "project")
    with MessagesAPIServer(FunctionScenario(lambda request: reply("Nothing to do."))) as server:
        env = subprocess_env(ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="test-key")
        outputs = []
        for _ in range(2):
            done = subprocess.run(
                [sys.executable, "-c", SNIPPETS_RUN, page, *snippets], cwd=tmp_path, env=env, capture_output=True,
                text=True, timeout=120, check=False,
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
            outputs.append(done.stdout)
        asked = len(server.requests)
    calls = sum(snippet.count("run_agent(") + snippet.count("background(run_agent,") for snippet in snippets)
    assert asked == calls, "each run_agent of the page asked the model once, the first time only"
    first, second = (output.splitlines()[-1] for output in outputs)
    assert first == second, "the second time, no effect happened again"
    if page in EFFECTS:
        assert re.fullmatch(rf"comments: {EFFECTS[page]}", second), "each effect happened once"
    if page in PRINTS:
        assert PRINTS[page][0] in outputs[0] and PRINTS[page][1] in outputs[1], outputs


def test_snippets_are_found_where_the_pages_have_them() -> None:
    assert {"README.md", "docs/python.md", "docs/mcp.md", "docs/workers.md", "docs/background.md"} <= set(WITH_SNIPPETS)
    assert len(python_snippets("docs/python.md")) >= 4


def test_the_exit_codes_are_the_errors_tree_s() -> None:
    assert set(EXIT_MEANINGS) == {0, 130, *EXIT_CODES.values()}
    # design.md says them in a sentence: each code of the table is in it (10 and 11 were not).
    said = " ".join(PAGES["docs/design.md"].split("`errors.EXIT_CODES`:", 1)[1].split(". The server's")[0].split())
    assert [int(n) for n in re.findall(r"\b(\d+) [a-z(]", said)] == sorted(EXIT_MEANINGS), said


@pytest.mark.parametrize("marker", sorted(TABLES))
def test_each_generated_table_is_the_package_s(marker: str) -> None:
    page, make = TABLES[marker]
    holders = [name for name, text in PAGES.items() if marker in text]
    assert holders == [f"docs/{page}"], f"{marker!r} is on {holders}, not on docs/{page} alone"
    assert table_after(PAGES[holders[0]], marker) == make(), "rewrite it: python -m tests.docs_tables"


def test_no_page_has_a_link_that_only_looks_like_it_works() -> None:
    for page, text in PAGES.items():
        prose = re.sub(r"```.*?```", "", text, flags=re.S)  # code blocks hold patterns to fill in, not links
        for url in re.findall(r"\]\((https?://[^)]+)\)", prose):
            assert not re.search(r"OWNER|REPO|<owner>|<repository>", url), f"{page}: {url} looks like a link and goes nowhere"
    assert any(re.search(r"\]\(https?://", text) for text in PAGES.values()), "the pages link somewhere"


def test_the_readme_links_only_to_pages_that_exist() -> None:
    """Relative links of the README (read on the forge, not built by MkDocs) name real files."""
    for target in re.findall(r"\]\(((?!https?://)[^)#]+)", PAGES["README.md"]):
        assert (REPO / target).exists(), f"README links to {target}, which does not exist"


def test_the_log_lines_shown_decode_with_the_package_s_reader() -> None:
    shown = [line for text in PAGES.values() for line in re.findall(r'^\{"v":\d.*\}$', text, re.M)]
    assert shown, "the log format page shows a line"
    for line in shown:
        decode_event(line.encode())  # raises on a wrong checksum, version or kind


def test_the_readme_stays_a_front_page() -> None:
    assert len(PAGES["README.md"].splitlines()) < 300, "the reference belongs in docs/, the README is the first page"
    assert "```\n$ tests/system-packages.sh && python3 -m venv .venv && . .venv/bin/activate && pip install -e '.[test]' && python -m pytest\n```" in PAGES["README.md"]
    assert not re.search(r"pip install [^'`\n]*nb-durable\[", "\n".join(PAGES.values())), "quote extras for the shell"
