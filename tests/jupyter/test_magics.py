"""The magics in a real InteractiveShell: arguments, help, every error message, and runs."""

from __future__ import annotations

import argparse
import builtins
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

from nb_durable import read_run
from nb_durable.agent import run_id_for
from nb_durable.agent.fleet.decisions import who
from nb_durable.agent.models.demo import DEMO_TASK
from nb_durable.agent.settings.table import DEFAULT_MODEL
from nb_durable.core.log import EventLog
from nb_durable.core.stores import open_store
from nb_durable.errors import StoreError
from tests import forkserver
from tests.conftest import subprocess_env
from tests.fakes import Error, MessagesAPIServer, ScriptedScenario, reply, tool_use

WIDGET = "application/vnd.jupyter.widget-view+json"


def run(ip: Any, source: str) -> tuple[Any, Any]:
    with capture_output() as captured:
        result = ip.run_cell(source)
    return result, captured


def html_of(captured: Any) -> str:
    return "".join(o.data.get("text/html", "") for o in captured.outputs)


def test_loading_registers_the_magics_and_unloading_removes_them(ip: Any) -> None:
    magics = ip.magics_manager.magics
    assert {"agent", "agent_resume", "agent_runs", "agent_show"} <= set(magics["line"])
    assert "agent" in magics["cell"]
    ip.run_line_magic("unload_ext", "nb_durable")
    assert "agent_resume" not in ip.magics_manager.magics["line"]
    ip.run_line_magic("load_ext", "nb_durable")
    ip.run_line_magic("reload_ext", "nb_durable")
    assert "agent" in ip.magics_manager.magics["cell"]
    assert sum(type(c).__name__ == "AgentMagics" for c in ip.configurables) == 1


def test_loading_is_light_the_agent_sdk_and_widgets_load_on_first_use() -> None:
    code = (
        "from IPython.testing.globalipapp import get_ipython; import sys; ip = get_ipython(); "
        "ip.run_line_magic('load_ext', 'nb_durable'); "
        "print(sorted(m for m in ('anthropic', 'ipywidgets', 'nb_durable.agent.run.loop', 'httpx2') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=subprocess_env(), check=True)
    assert out.stdout.strip() == "[]"


def test_help_is_the_docstring_with_every_flag(ip: Any) -> None:
    doc = ip.magics_manager.magics["cell"]["agent"].__doc__
    for flag in ("--run", "--new", "--model", "--max-turns", "--workspace", "--store", "--in-doubt", "--demo", "-o"):
        assert flag in doc, flag
    assert "Re-running a finished cell replays it" in doc
    assert "latest unfinished" in ip.magics_manager.magics["line"]["agent_resume"].__doc__


def test_agent_runs_takes_each_listing_flag_as_nb_durable_runs_does_in_the_same_words(ip: Any) -> None:
    # The two helps were written apart once, and said --limit's order in one only.
    from nb_durable.cli.commands import build_parser

    def flags(parser: Any) -> dict[str, tuple[Any, ...]]:
        return {
            a.option_strings[0]: (a.help, a.default, a.type, a.metavar, type(a).__name__)
            for a in parser._actions
            if a.option_strings and a.option_strings[0] not in ("-h", "--store")
        }

    [commands] = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    cli = commands.choices["runs"]
    magic = flags(ip.magics_manager.magics["line"]["agent_runs"].parser)
    assert magic == flags(cli) and set(magic) == {"--status", "--tag", "--batch", "--limit", "--after", "--offset"}, magic
    doc = ip.magics_manager.magics["line"]["agent_runs"].__doc__
    assert "run index" in doc and "nb-durable check-index" in doc, doc


@pytest.mark.parametrize(
    ("line", "body", "message"),
    [
        ("%%agent --in-doubt maybe", "do it", "invalid choice: 'maybe'"),
        ("%%agent --max-turns 0", "do it", "--max-turns must be at least 1"),
        ("%%agent --max-turns lots", "do it", r"--max-turns: must be a whole number \(such as 3\), not 'lots'"),
        ("%%agent --bogus", "do it", r"unrecognized arguments: --bogus \(%agent\? lists what it takes\)"),
        ("%%agent --run ../escape", "do it", "cannot name a run"),
        ("%%agent --store ftp://x", "do it", "unknown store"),
        ("%%agent", "   ", "needs a task"),
    ],
)
def test_bad_cells_raise_usage_errors(ip: Any, line: str, body: str, message: str) -> None:
    magic, _, flags = line[2:].partition(" ")
    with pytest.raises(UsageError, match=message):
        ip.run_cell_magic(magic, flags, body)


def test_agent_used_as_a_line_magic_says_where_the_task_goes(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(UsageError, match=r"%%agent \(two %\) is a cell magic"):
        ip.run_line_magic("agent", "")
    ip.run_cell("%agent fix the tests")  # as typed: one %, the task on the same line
    shown = capsys.readouterr()
    said = shown.out + shown.err
    assert "%agent with one % is a line magic" in said and "%%agent\nfix the tests" in said, said
    assert "unrecognized arguments" not in said
    assert not (Path.cwd() / "runs").exists(), "nothing ran"


@pytest.mark.parametrize(
    ("line", "example"),
    [
        ("--max-turns 3 fix the tests", "%%agent --max-turns 3\nfix the tests"),
        ("--tag 'needs review'", "%%agent --tag 'needs review'\nThe tests in this project fail. Fix them."),
        ("fix --max-turns 3 tests", "%%agent fix --max-turns 3 tests\n"),  # no clean split: kept as typed
    ],
)
def test_agent_as_a_line_magic_puts_flags_on_the_cell_line_and_words_below(ip: Any, line: str, example: str) -> None:
    with pytest.raises(UsageError) as raised:
        ip.run_line_magic("agent", line)
    assert example in str(raised.value), raised.value


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("--bogus fix the tests", r"unrecognized arguments: --bogus \(%agent\? lists what it takes\)"),
        ("--max-turns lots", r"must be a whole number \(such as 3\), not 'lots' \(%agent\? lists what it takes\)"),
    ],
)
def test_agent_as_a_line_magic_says_a_flag_mistake_before_showing_the_cell(ip: Any, line: str, message: str) -> None:
    # The cell it would show carries the flags: a mistake there is said first, not on the next try.
    with pytest.raises(UsageError, match=message):
        ip.run_line_magic("agent", line)


@pytest.mark.parametrize(
    ("magic", "line", "message"),
    [
        ("agent_show", "a b", r"unrecognized arguments: b \(%agent_show\? lists what it takes\)"),
        ("agent_runs", "--status nope", r"not 'nope' \(%agent_runs\? lists what it takes\)"),
        ("agent_stop", "--x", r"unrecognized arguments: --x \(%agent_stop\? lists what it takes\)"),
        ("agent_resume", "a b", r"unrecognized arguments: b \(%agent_resume\? lists what it takes\)"),
    ],
)
def test_a_flag_mistake_names_the_help_that_lists_the_flags(ip: Any, magic: str, line: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        ip.run_line_magic(magic, line)


def test_agent_runs_pages_by_the_cursor_its_next_page_line_gives_and_refuses_a_damaged_one(ip: Any) -> None:
    """The table's next-page line is a line to type back; a cursor mistyped or given with
    --offset is refused as the CLI refuses it, naming the help."""
    import shlex
    import time

    for i in range(3):
        with EventLog(f"r{i}", "runs") as log:
            log.start_run({"task": f"task {i}"})
        time.sleep(0.002)  # distinct update times: the order is the runs' own
    first = ip.run_line_magic("agent_runs", "--limit 2")
    assert [s.run_id for s, _ in first.rows] == ["r2", "r1"]
    line = repr(first).splitlines()[0].partition("; more: ")[2].removesuffix(" (or --limit 0 for all)")
    assert line.startswith("%agent_runs --limit 2 --after A"), line
    second = ip.run_line_magic("agent_runs", line.removeprefix("%agent_runs "))
    assert [s.run_id for s, _ in second.rows] == ["r0"] and "more:" not in repr(second)
    cursor = shlex.split(line)[-1]
    edited = cursor[:10] + ("x" if cursor[10] != "x" else "y") + cursor[11:]  # a time changed by hand
    with pytest.raises(UsageError, match=r"^argument --after: was cut short or changed \(its check does not match\); copy the cursor whole"):
        ip.run_line_magic("agent_runs", f"--after {edited}")
    with pytest.raises(UsageError, match=r"argument --offset: not allowed with argument --after \(%agent_runs\? lists what it takes\)"):
        ip.run_line_magic("agent_runs", f"--after {cursor} --offset 2")
    with EventLog("o1", "other") as log:  # another store: the cursor of this one's listing is refused there
        log.start_run({"task": "elsewhere"})
    with pytest.raises(UsageError, match=r"^--after was made by a listing of another store than other \("):
        ip.run_line_magic("agent_runs", f"--store other --after {cursor}")


@pytest.mark.postgres
def test_agent_runs_next_page_line_says_the_store_s_password_was_left_out_as_the_cli_does(ip: Any, tmp_path: Path) -> None:
    """The line named the PostgreSQL store without its password and did not say so: typed back,
    it failed to log in, with no word of why. ``nb-durable runs`` says it, in these words."""
    from tests.conftest import nb_durable_cli
    from tests.pg import postgres_url

    url = postgres_url().replace("postgres@", "postgres:s3cret@")  # the server trusts 127.0.0.1
    for i in range(2):
        with EventLog(f"r{i}", url) as log:
            log.start_run({"task": f"task {i}"})
    page = ip.run_line_magic("agent_runs", f"--store {url} --limit 1")
    line = repr(page).splitlines()[0]
    cli = nb_durable_cli("runs", "--store", url, "--limit", "1", cwd=tmp_path).stdout.splitlines()[-1]
    note = cli.partition(" (or --limit 0 for all)")[2]
    assert note.startswith(" (the store's password is left out of that command: set PGPASSWORD"), cli
    assert line.endswith(f" (or --limit 0 for all){note}"), line
    assert "s3cret" not in line + page._repr_html_() and note.strip() in page._repr_html_().replace("&#x27;", "'")
    short = ip.run_line_magic("agent_runs", f"--store {url.replace(':s3cret@', '@')} --limit 1")
    assert repr(short).splitlines()[0].endswith(" (or --limit 0 for all)"), "no password given, none left out"


def test_resume_errors_are_usage_errors(ip: Any) -> None:
    with pytest.raises(UsageError, match="no unfinished agent run"):
        ip.run_line_magic("agent_resume", "")
    with pytest.raises(UsageError, match=r"run 'nope' is not in the folder runs .*: that folder does not exist"):
        ip.run_line_magic("agent_resume", "nope")  # no run was ever made here
    Path("runs").mkdir()
    with pytest.raises(UsageError, match="no run 'nope'"):
        ip.run_line_magic("agent_resume", "nope")
    with pytest.raises(UsageError, match="no run 'nope'"):
        ip.run_line_magic("agent_show", "nope")


def test_a_named_store_that_is_not_there_is_refused_as_the_cli_refuses_it(ip: Any, tmp_path: Path) -> None:
    """``%agent_runs --store /no/such/dir`` said "No runs yet" where ``nb-durable runs`` exits 2."""
    missing = tmp_path / "no" / "such"
    with pytest.raises(StoreError) as cli_said:
        open_store(str(missing), existing=True)  # what nb-durable runs and show open a --store with
    for magic in ("agent_runs", "agent_show"):
        with pytest.raises(UsageError) as said:
            ip.run_line_magic(magic, f"--store {missing}")
        assert str(said.value) == str(cli_said.value), magic
    assert not missing.exists() and not (tmp_path / "no").exists()
    assert "No runs yet" in repr(ip.run_line_magic("agent_runs", "")), "the default folder may be missing: no runs yet"


def test_a_demo_cell_refuses_a_model_as_the_cli_does(ip: Any) -> None:
    with pytest.raises(UsageError, match=r"^--model must be left out with --demo: the offline demo model has no model choice"):
        ip.run_cell_magic("agent", "--demo --model claude-other", "look around")
    assert not Path("runs").exists(), "nothing ran"


def test_a_demo_cell_runs_the_demo_whatever_model_config_set_for_real_runs(ip: Any) -> None:
    """``%config AgentMagics.model`` is a standing choice for runs with a key; refusing it as if
    typed beside ``--demo`` made every demo cell of a notebook that set it fail."""
    ip.run_line_magic("config", "AgentMagics.model = 'claude-other'")
    ip.run_line_magic("config", "AgentMagics.fallback_models = ['claude-third']")  # a model choice too
    try:
        result, captured = run(ip, f"%%agent --demo -o res\n{DEMO_TASK}")
    finally:
        ip.run_line_magic("config", f"AgentMagics.model = {DEFAULT_MODEL!r}")
        ip.run_line_magic("config", "AgentMagics.fallback_models = []")
    assert result.error_in_exec is None and ip.user_ns["res"].status == "completed", captured.stdout
    recorded = read_run(ip.user_ns["res"].run_id, "runs").summary.settings
    assert (recorded["model"], recorded.get("fallback_models", [])) == ("demo", []), "no model recorded that never answered"


def test_a_demo_cell_runs_shows_a_timeline_and_replays_when_run_again(ip: Any) -> None:
    cell = f"%%agent -o res\n{DEMO_TASK}"
    first, captured = run(ip, cell)
    assert first.success, first.error_in_exec
    assert "offline demo model" in captured.stdout
    live, final = captured.outputs[0].data, captured.outputs[-1].data
    assert WIDGET in live and "text/html" in live and "text/plain" in live, "the widget, with its static form beside it"
    assert WIDGET not in final, "a finished run's display is static HTML alone"
    output = final
    page = output["text/html"]
    assert 'class="nbd-timeline"' in page
    assert 'class="nbd-step nbd-live"' in page and 'class="nbd-step nbd-replayed"' not in page
    assert "completed" in output["text/plain"]
    result = ip.user_ns["res"]
    assert result.status == "completed" and result.live_steps == 12
    assert Path("demo-workspace/calc.py").read_text().count("sorted(values)") == 1
    log = Path("runs") / f"{run_id_for(DEMO_TASK)}.jsonl"
    before = log.read_bytes()
    second, captured = run(ip, cell)
    assert second.success
    again = ip.user_ns["res"]
    assert (again.live_steps, again.replayed_steps) == (0, 12)
    assert again.text == result.text
    replayed = captured.outputs[-1].data["text/html"]
    assert replayed.count('class="nbd-step nbd-replayed"') == 12 and 'class="nbd-step nbd-live"' not in replayed
    assert log.read_bytes() == before, "replaying a finished cell writes nothing"


def test_new_starts_a_fresh_run_and_config_sets_defaults(ip: Any) -> None:
    ip.run_line_magic("config", "AgentMagics.max_turns = 3")
    result, _ = run(ip, f"%%agent --new -o res\n{DEMO_TASK}")
    assert result.success is False or ip.user_ns.get("res") is None or ip.user_ns["res"].status == "interrupted"
    runs = read_run(next(p.stem for p in Path("runs").glob("*.jsonl")), "runs")
    assert runs.summary.settings["max_turns"] == 3
    assert runs.run_id.startswith(run_id_for(DEMO_TASK) + "-")
    ip.run_line_magic("config", "AgentMagics.max_turns = 20")


def test_runs_and_show_draw_html_with_a_text_fallback(ip: Any) -> None:
    run(ip, f"%%agent\n{DEMO_TASK}")
    table = ip.run_line_magic("agent_runs", "")
    html = table._repr_html_()
    assert run_id_for(DEMO_TASK) in html and "completed" in html and "tokens paid" in html
    assert run_id_for(DEMO_TASK) in repr(table)
    shown = ip.run_line_magic("agent_show", run_id_for(DEMO_TASK))
    bundle = shown._repr_mimebundle_()
    assert 'class="nbd-step nbd-recorded"' in bundle["text/html"] and "run_bash" in bundle["text/plain"]


def test_the_runs_table_text_keeps_its_columns_past_a_long_id_or_status(ip: Any) -> None:
    for run_id in ("short", "fix.delegate-0-0-toolu_01SlQVcxHJCuamNf1nmlaaLT", "spent"):
        with EventLog(run_id, "runs") as log:
            log.start_run({"task": "t"})
            if run_id == "spent":
                log.finish_run("budget_exhausted")
    lines = repr(ip.run_line_magic("agent_runs", "")).splitlines()[1:]
    assert len({lines[0].index("status"), *(line.index(" interrupted ") + 1 for line in lines if " interrupted " in line),
                *(line.index(" budget exhausted ") + 1 for line in lines if "budget" in line)}) == 1, lines
    assert len({lines[0].index("steps") + 5, *(line.index(" 0 ") + 2 for line in lines[1:])}) == 1, lines


def test_everything_shown_is_escaped(ip: Any) -> None:
    evil = "<script>alert('pwned')</script> & <b>bold</b>"
    server = MessagesAPIServer(ScriptedScenario([reply(evil, tool_use("list_dir", {"path": evil})), reply(evil)]))
    try:
        os.environ["ANTHROPIC_BASE_URL"] = server.url
        os.environ["ANTHROPIC_API_KEY"] = "test-key"
        _, captured = run(ip, f"%%agent --model claude-test-1 --workspace .\n{evil}")
    finally:
        os.environ.pop("ANTHROPIC_BASE_URL")
        os.environ.pop("ANTHROPIC_API_KEY")
        server.close()
    page = html_of(captured)
    assert "<script>" not in page and "<b>bold</b>" not in page
    assert "&lt;script&gt;" in page


def test_a_failed_run_fails_the_cell_with_one_paragraph_and_stays_resumable(ip: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    server = MessagesAPIServer(ScriptedScenario([Error(401)]))
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "bad-key")
    try:
        result, captured = run(ip, "%%agent --run auth --model claude-test-1 --workspace .\nsay hi")
        assert not result.success
        error = result.error_in_exec
        lines = error._render_traceback_()
        assert len(lines) == 1 and "401" in lines[0] and "ANTHROPIC_API_KEY" in lines[0] and "resume" in lines[0]
        assert "Then resume it with %agent_resume auth;" in lines[0] and "resume_agent" not in lines[0], lines[0]
        assert read_run("auth", "runs").summary.status == "failed"
        assert 'class="nbd-header nbd-run-failed"' in html_of(captured)
        server.scenario = ScriptedScenario([reply("hello")])
        resumed, _ = run(ip, "%agent_resume auth -o res")
        assert resumed.success and ip.user_ns["res"].text == "hello"
    finally:
        server.close()


def test_a_locked_run_is_a_usage_error_naming_the_holder(ip: Any) -> None:
    holder = forkserver.Popen(
        [sys.executable, "-c", "import sys; from nb_durable import EventLog; l = EventLog('busy', 'runs'); print('ok', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=subprocess_env(),
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ok"
        with pytest.raises(UsageError, match=f"pid {holder.pid}"):
            ip.run_cell_magic("agent", "--run busy --demo", "do something")
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.communicate(timeout=30)  # reaped, and its pipes closed


def test_changed_settings_for_the_same_cell_are_a_usage_error(ip: Any) -> None:
    run(ip, f"%%agent --run same\n{DEMO_TASK}")
    Path("elsewhere").mkdir()
    with pytest.raises(UsageError, match=r"already exists with other settings \(workspace differs: .*new run id"):
        ip.run_cell_magic("agent", "--run same --workspace elsewhere", DEMO_TASK)


def interrupt_first_bash(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the first run_bash die mid-command, as a kernel interrupt would."""
    from nb_durable.agent.workspace import bash

    real = bash.run_command
    calls: list[int] = []

    def run_command(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(bash, "run_command", run_command)


def test_an_interrupt_freezes_the_run_and_ask_settles_doubt_through_input_once(
    ip: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    interrupt_first_bash(monkeypatch)
    first, captured = run(ip, f"%%agent --run doubt\n{DEMO_TASK}")
    assert isinstance(first.error_in_exec, KeyboardInterrupt)
    assert read_run("doubt", "runs").summary.status == "in_doubt"
    assert 'class="nbd-header nbd-run-in_doubt"' in html_of(captured)
    prompts: list[str] = []
    monkeypatch.setattr(builtins, "input", lambda prompt="": prompts.append(prompt) or "s")  # type: ignore[func-returns-value]
    resumed, captured = run(ip, "%agent_resume doubt --in-doubt ask -o res")
    assert resumed.success, resumed.error_in_exec
    assert len(prompts) == 1 and "whether it took effect is unknown" in prompts[0]
    assert ip.user_ns["res"].status == "completed"
    decisions = [e for e in read_run("doubt", "runs").events if e.kind == "decision"]
    # Who answered is the person's name (the JupyterHub user, else the login), as the README says.
    assert [(d.decision, d.by) for d in decisions] == [("skip", f"{who()} (input box)")]  # type: ignore[attr-defined]
    run(ip, f"%%agent --run doubt --in-doubt ask\n{DEMO_TASK}")
    assert len(prompts) == 1, "the recorded decision is replayed, not asked again"


def test_ask_where_nobody_can_answer_fails_the_cell_naming_the_flag(ip: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from IPython.core.error import StdinNotImplementedError

    interrupt_first_bash(monkeypatch)
    run(ip, f"%%agent --run nobody\n{DEMO_TASK}")

    def no_stdin(prompt: str = "") -> str:
        raise StdinNotImplementedError("raw_input was called, but this frontend does not support input requests.")

    monkeypatch.setattr(builtins, "input", no_stdin)
    resumed, _ = run(ip, "%agent_resume nobody --in-doubt ask")
    assert not resumed.success
    (line,) = resumed.error_in_exec._render_traceback_()
    assert "--in-doubt skip" in line


def test_crash_at_leaves_what_a_kill_leaves_and_resume_replays_it(ip: Any) -> None:
    crashed, captured = run(ip, f"%%agent --run crash --crash-at 7\n{DEMO_TASK}")
    assert not crashed.success
    (line,) = crashed.error_in_exec._render_traceback_()
    assert line.startswith("SimulatedCrash: simulated crash at step 7 (run_bash)")
    record = read_run("crash", "runs")
    assert record.summary.status == "in_doubt", "the bash step's intent is written, its record is not"
    assert [e.kind for e in record.events].count("run_finished") == 0
    assert 'class="nbd-header nbd-run-crashed"' in html_of(captured)
    resumed, _ = run(ip, "%agent_resume crash --in-doubt rerun -o res")
    assert resumed.success, resumed.error_in_exec
    result = ip.user_ns["res"]
    assert (result.replayed_steps, result.status) == (6, "completed")


def test_agent_help_writes_a_run_optional_where_the_magic_takes_none(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """It listed ``%agent_show RUN``, though without one it shows the run updated last."""
    ip.run_cell("%agent?")
    help_text = capsys.readouterr().out
    for name in ("agent_resume", "agent_show", "agent_stop", "agent_wait"):
        run = next(a for a in ip.magics_manager.magics["line"][name].parser._actions if a.dest == "run")
        assert run.nargs == "?", name
        assert f"%{name} [RUN]" in help_text and f"%{name} RUN" not in help_text, name


def test_agent_help_is_the_whole_help(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    ip.run_cell("%agent?")
    help_text = capsys.readouterr().out
    for promised in (
        "%%agent", "%agent_resume [RUN]", "%load_ext nb_durable", "%agent_runs", "%agent_show [RUN]",  # resume, runs, show
        "%config AgentMagics.<name>", "approve_bash",  # config
        "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "never with ``%env``",  # keys
        "Where runs live", "``runs/`` beside the notebook", "$NB_DURABLE_STORE", "sqlite:///runs.db",  # where
        "--crash-at N", "--in-doubt",
    ):  # fmt: skip
        assert promised in help_text, promised


def test_a_run_in_doubt_is_explained_in_the_notebook_s_words(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    ip.run_cell("%%agent --demo --run doubt --crash-at 7\nThe tests in this project fail. Fix them.")
    capsys.readouterr()
    ip.run_cell("%agent_resume doubt --in-doubt fail")
    said = capsys.readouterr()
    shown = said.out + said.err
    assert "InDoubtError: tool call 1 of turn 2 of run 'doubt'" in shown, shown
    assert "--in-doubt rerun" in shown and "--in-doubt skip" in shown
    assert "in_doubt=" not in shown and "tool:2:0:" not in shown, "no Python spelling, no raw step id"


def test_new_with_a_taken_run_id_is_refused_in_a_cell_too(ip: Any) -> None:
    ip.run_cell_magic("agent", "--demo --run mine --new", "The tests in this project fail. Fix them.")
    assert (Path.cwd() / "runs" / "mine.jsonl").is_file(), "--run names the run exactly"
    with pytest.raises(UsageError, match=r"run 'mine' already exists .* leave out --new to replay"):
        ip.run_cell_magic("agent", "--demo --run mine --new", "The tests in this project fail. Fix them.")


def test_a_damaged_log_read_by_a_magic_fails_the_cell_in_one_line(ip: Any) -> None:
    # %agent_show and %agent_resume printed forty lines of traceback through the package above
    # a message that already said what was wrong and what to do.
    Path("runs").mkdir()
    Path("runs", "bad.jsonl").write_text('{"garbage": 1}\nnot json\n', encoding="utf-8")
    for line in ("%agent_show bad", "%agent_resume bad"):
        with capture_output() as captured:
            result = ip.run_cell(line)
        assert type(result.error_in_exec).__name__ == "LogCorruptedError", "the cell still fails: Run All stops"
        assert "Traceback" not in captured.stdout and "nb_durable/" not in captured.stdout, captured.stdout
        assert captured.stdout.startswith("LogCorruptedError: runs/bad.jsonl is not an nb_durable log: at line 1, "), captured.stdout


HOLD_SLOT = """
import sys, time
from nb_durable.core.limiter import limit_key, limiter_of
from nb_durable.core.stores import open_store
slot = limiter_of(open_store("runs")).try_slot(limit_key("demo (offline)", "none"), 0)
print("held" if slot is not None else "taken", flush=True)
time.sleep(float(sys.argv[1]))
print(time.time(), flush=True)  # the slot is released as this process exits, after this
"""


def test_a_cell_s_max_concurrent_calls_waits_for_the_slot_another_process_holds(ip: Any) -> None:
    holder = forkserver.Popen(
        [sys.executable, "-c", HOLD_SLOT, "1.5"], env=subprocess_env(), stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    result, _ = run(ip, f"%%agent --max-concurrent-calls 1 -o res\n{DEMO_TASK}")
    released = float(holder.communicate()[0])
    assert result.success, result.error_in_exec
    assert ip.user_ns["res"].status == "completed"
    first = next(s for s in read_run(ip.user_ns["res"].run_id, "runs").steps if s.step_id.startswith("model:"))
    assert first.completed_at is not None and first.completed_at >= released, (
        "the cell's first model call did not wait for the slot another process held"
    )


def test_agent_runs_says_each_time_which_log_it_could_not_read(ip: Any) -> None:
    # It warned once per kernel, then said "No runs yet." over a damaged log, where nb-durable
    # runs says "no readable runs" and names the file every time.
    Path("runs").mkdir()
    Path("runs", "bad.jsonl").write_text('{"garbage": 1}\nnot json\n', encoding="utf-8")
    for _ in range(2):
        table = ip.run_line_magic("agent_runs", "")
        said = repr(table)
        assert said.startswith("No readable runs in "), said
        assert "skipped runs/bad.jsonl: runs/bad.jsonl is not an nb_durable log" in said, said
        assert "skipped runs/bad.jsonl" in table._repr_html_()
    ip.run_cell_magic("agent", "--run good", DEMO_TASK)
    listed = repr(ip.run_line_magic("agent_runs", ""))
    assert listed.startswith("1 run in ") and listed.splitlines()[-1].startswith("skipped runs/bad.jsonl"), listed


HOLD_RUN = """
import time
from nb_durable.core.log import EventLog
from nb_durable.core.stores import open_store
from nb_durable.errors import StoreError
log = EventLog("elsewhere", "runs")
log.start_run({"task": "t"})
print("held", flush=True)
time.sleep(30)
"""


def test_stop_and_wait_on_a_run_another_process_writes_say_where_it_runs(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    # They said the run goes on in no background thread here and to resume it with
    # %agent_resume, which the run's lease then refused: it is being written elsewhere.
    holder = forkserver.Popen([sys.executable, "-c", HOLD_RUN], env=subprocess_env(), stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(UsageError) as refused:
            ip.run_line_magic("agent_stop", "elsewhere")
        said = str(refused.value)
        assert f"run 'elsewhere' goes on in another process (pid {holder.pid} on host " in said, said
        assert "stop it where it runs" in said and "%agent_show elsewhere shows where it stands" in said, said
        assert "once it stops, %agent_resume elsewhere goes on here" in said, said
        # Waiting is what was asked: it waits through the store, saying where the run goes on.
        with pytest.raises(TimeoutError, match="run elsewhere has not ended after 0.2 s: it goes on in another process"):
            ip.run_line_magic("agent_wait", "elsewhere --timeout 0.2")
        assert f"waiting for run elsewhere, running in another process (pid {holder.pid} on host " in capsys.readouterr().out
    finally:
        holder.kill()
        holder.communicate(timeout=30)  # reaped, and its pipe closed
    with pytest.raises(UsageError, match="goes on in no background thread of this process"):
        ip.run_line_magic("agent_stop", "elsewhere")  # no writer now: as it was
