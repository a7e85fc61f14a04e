"""One bad value, one refusal, in every front end: the CLI's flags, the magics' flags,
``%config AgentMagics``, ``run_agent``/``resume_agent`` keywords and a batch file's lines.

Each case here was a value one front end took and another refused, or one that went past
every check and failed later, somewhere else, in words that named nothing the person gave.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError
from traitlets import TraitError

from nb_durable.agent import run_agent
from nb_durable.agent.fleet.batch_file import read_batch
from nb_durable.agent.models.scripted import ScriptedModel
from nb_durable.agent.settings import Change
from nb_durable.cli.commands import main
from nb_durable.errors import BatchFileError, SettingError


def _magics(ip: Any) -> Any:
    return next(c for c in ip.configurables if type(c).__name__ == "AgentMagics")


def test_an_infinite_number_is_refused_where_it_is_given(tmp_path: Path, ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    # A log holds JSON, which has no infinity: taken, it failed the run's first write with
    # "Out of range float values are not JSON compliant" (a traceback in the notebook).
    said = re.escape("must be a finite number of dollars (for no limit, leave it unset), not")
    with pytest.raises(SettingError, match=rf"^max_usd {said} inf$"):
        run_agent("x", client=ScriptedModel([]), store=str(tmp_path / "runs"), workspace=str(tmp_path), max_usd=math.inf)
    with pytest.raises(SettingError, match=rf"^max_usd {said} inf$"):
        Change.of(max_usd=math.inf)
    assert main(["run", "--demo", "--store", str(tmp_path / "runs"), "--max-usd", "inf", "x"]) == 2
    assert re.fullmatch(rf"nb-durable: --max-usd {said} inf\n", capsys.readouterr().err)
    assert main(["run", "--demo", "--store", str(tmp_path / "runs"), "--breaker-cooldown", "1e400", "x"]) == 2
    assert capsys.readouterr().err == "nb-durable: --breaker-cooldown must be a finite number of seconds, not inf\n"
    with pytest.raises(TraitError, match=rf"^AgentMagics.max_usd {said} inf$"):
        _magics(ip).max_usd = math.inf
    batch = tmp_path / "tasks.jsonl"
    batch.write_text('{"task": "x", "max_usd": Infinity}\n')  # Python's json reads it
    with pytest.raises(BatchFileError, match=rf"line 1: 'max_usd' {said} Infinity"):  # as the file spells it
        read_batch(batch)
    assert not (tmp_path / "runs").exists(), "nothing ran, nothing was written"


def test_an_empty_model_is_refused_where_it_is_given(tmp_path: Path, ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    # A new run turned an empty --model into the default, but a resume recorded it as a
    # change (settings:1 {"model": ""}) and sent every later call to model "".
    runs = str(tmp_path / "runs")
    assert main(["run", "--demo", "--store", runs, "--run", "a", "--max-turns", "1", "x"]) == 130
    capsys.readouterr()
    said = "must say the Claude model (it is empty), not ''"
    assert main(["resume", "--store", runs, "a", "--model", ""]) == 2
    assert capsys.readouterr().err == f"nb-durable: --model {said}\n"
    with pytest.raises(UsageError, match=re.escape(f"--model {said}")):
        ip.run_line_magic("agent_resume", f"a --store {runs} --model ''")
    with pytest.raises(TraitError, match=re.escape(f"AgentMagics.model {said}")):
        _magics(ip).model = ""
    with pytest.raises(SettingError, match=re.escape(f"model {said}")):
        run_agent("x", client=ScriptedModel([]), store=runs, workspace=str(tmp_path), model="")
    batch = tmp_path / "tasks.jsonl"
    batch.write_text('{"task": "x", "model": ""}\n')
    in_json = said.removesuffix("''") + '""'  # a file's value is said as JSON spells it
    with pytest.raises(BatchFileError, match=re.escape(f"line 1: 'model' {in_json}")):
        read_batch(batch)
    from nb_durable import read_run

    assert not [s for s in read_run("a", runs).steps if s.step_id.startswith("settings:")], "no change recorded"


@pytest.mark.parametrize("flags", ["--mcp absent.json", "--kernel-tools", "--demo", "--run other", "--new", "--crash-at 1", "--effort high"])
def test_a_follow_up_refuses_the_flags_it_has_no_use_for(ip: Any, flags: str) -> None:
    # %%agent --continue parses %%agent's flags; these were taken and silently dropped
    # (a follow-up with --mcp absent.json ran without the servers, and said nothing).
    ip.run_cell_magic("agent", "--run c --demo", "look")
    with pytest.raises(UsageError, match=rf"^--continue goes on with a finished run as it recorded it .* so it takes no {flags.split()[0]}:"):
        ip.run_cell_magic("agent", f"--continue c {flags}", "more")
    from nb_durable import read_run

    assert not [s for s in read_run("c", "runs").steps if s.step_id.startswith("user:")], "no follow-up was recorded"
    ip.run_cell_magic("agent", "--continue c --max-turns 1 --cache-ttl 1h", "more")  # what a follow-up takes
    assert [s.step_id for s in read_run("c", "runs").steps if s.step_id.startswith("user:")], "recorded"


def test_a_batch_refuses_the_flags_a_queued_run_cannot_carry(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # run --batch took a session's flags, --mcp and --new and dropped them unsaid: the workers
    # ran the runs with the default in-doubt policy, without the MCP servers named.
    batch = tmp_path / "tasks.jsonl"
    batch.write_text('{"task": "x"}\n')
    runs = str(tmp_path / "runs")
    flags = ["--in-doubt", "fail", "--stall-timeout", "5", "--tokens-per-minute", "9", "--mcp", "absent.json", "--new"]
    assert main(["run", "--batch", str(batch), "--store", runs, "--demo", *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        "nb-durable: --batch FILE queues runs for workers, so it takes no --in-doubt, --stall-timeout, "
        "--tokens-per-minute, --mcp, --new: a session's options are the worker's that runs it (nb-durable worker --in-doubt;"
    ), err
    assert not (tmp_path / "runs").exists(), "nothing was queued"
    assert main(["run", "--batch", str(batch), "--store", runs, "--demo", "--max-turns", "3", "--tag", "t"]) == 0
    from nb_durable.core.runs import list_runs
    from nb_durable.core.stores import opened

    with opened(runs) as store:
        [queued] = list_runs(store)
    assert (queued.status, queued.settings["max_turns"], queued.settings["tags"]) == ("queued", 3, ["t"])


def test_a_batch_line_says_a_whole_number_is_wanted(tmp_path: Path) -> None:
    # 3.0 is a JSON number: "must be a JSON number, not 3.0" refused it for being what it was asked to be.
    batch = tmp_path / "tasks.jsonl"
    batch.write_text('{"task": "x", "max_turns": 3.0}\n')
    with pytest.raises(BatchFileError, match=r"line 1: 'max_turns' must be a JSON whole number, not 3\.0"):
        read_batch(batch)


@pytest.mark.parametrize(
    ("setting", "value", "said"),
    [
        ("max_turns", "'x'", "must be a whole number, not 'x'"),
        ("max_usd", "'lots'", "must be a number, not 'lots'"),
        # traitlets' Float reads True as 1.0: a $1 budget, a 1 s stall timeout, refused everywhere else
        ("max_usd", "True", "must be a number, not True"),
        ("stall_timeout", "False", "must be a number, not False"),
        ("effort", "'huge'", "must be one of low, medium, high, xhigh, max, not 'huge'"),
        ("delegate", "'yes'", "must be True or False, not 'yes'"),
        ("store", "3", "must be text, not 3"),
    ],
)
def test_config_refuses_a_value_of_the_wrong_type_in_the_tables_words(
    ip: Any, setting: str, value: str, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # The flag said "--max-turns must be a whole number", %config said "The 'max_turns' trait of
    # an AgentMagics instance expected an int, not the str 'x'."
    magics = _magics(ip)
    before = getattr(magics, setting)
    with pytest.raises(TraitError, match=rf"^AgentMagics\.{setting} {re.escape(said)}$"):
        setattr(magics, setting, eval(value))
    assert getattr(magics, setting) == before, "the setting keeps its value"
    ip.run_line_magic("config", "AgentMagics")
    listed = capsys.readouterr().out
    assert "AgentMagics.max_turns=<Int>" in listed and "AgentMagics.max_usd=<Float>" in listed, "the listing names traitlets' types"


def test_config_unsets_the_workspace_as_it_started(ip: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The trait starts unset (None: the front end chooses the demo's folder, or the notebook's),
    # but once set it could not be unset: None and "" were refused ("must be given ..., not None").
    magics = _magics(ip)
    assert magics.workspace is None
    (tmp_path / "elsewhere").mkdir()
    for unset in (None, ""):
        magics.workspace = "elsewhere"
        magics.workspace = unset
        assert magics.workspace is None
    ip.run_cell_magic("agent", "--run w --demo --max-turns 1", "look")
    from nb_durable import read_run

    assert read_run("w", "runs").summary.settings["workspace"] == str(tmp_path / "demo-workspace")
    said = "--workspace must be given (leave it out for its default), not ''"
    with pytest.raises(UsageError, match=re.escape(said)):
        ip.run_cell_magic("agent", "--demo --workspace ''", "look")
    capsys.readouterr()
    assert main(["run", "--demo", "--workspace", "", "x"]) == 2
    assert capsys.readouterr().err == f"nb-durable: {said}\n", "the value as typed, not None"


def test_a_rerun_that_asks_another_budget_records_it_as_a_resume_would(tmp_path: Path) -> None:
    # A rerun (a cell run again, run_agent on a run that exists) went on with the budget it
    # was given but never recorded it: the log said budget_exhausted under no budget, and
    # the next resume (a worker's, %agent_resume) went on without it.
    from nb_durable import read_run
    from nb_durable.agent import resume_agent
    from nb_durable.agent.models.messages import text_message, tool_use_message

    store, look = str(tmp_path / "runs"), tool_use_message([("list_dir", {"path": "."}, "toolu_1")])
    first = run_agent("look", run_id="t", client=ScriptedModel([look]), store=store, workspace=str(tmp_path), max_turns=1)
    assert first.status == "interrupted"
    again = run_agent(
        "look", run_id="t", client=ScriptedModel([text_message("done")]), store=store, workspace=str(tmp_path), max_run_tokens=1
    )
    assert again.status == "budget_exhausted"
    changes = [s.result["changes"] for s in read_run("t", store).steps if s.step_id.startswith("settings:")]
    assert changes == [{"max_run_tokens": 1}], "recorded at the point it took effect"
    later = resume_agent("t", client=ScriptedModel([text_message("done")]), store=store, max_turns=5)
    assert later.status == "budget_exhausted", "a resume keeps the budget the rerun asked for"
    assert resume_agent("t", client=ScriptedModel([text_message("done")]), store=store, max_turns=5, max_run_tokens=10**6).status == "completed"


def test_agent_help_names_the_flags_that_have_no_config(ip: Any) -> None:
    # %agent? said every setting below was also a %config trait; --tag is not.
    from nb_durable.agent.settings.flags import rows_for

    no_config = [row.flag for row in rows_for("run", "notebook") if not row.config]
    doc = " ".join(ip.magics_manager.magics["cell"]["agent"].__doc__.split())
    said = doc.split("Every setting below but ", 1)[1].split(" is also ``%config", 1)[0]
    assert said == " and ".join(f"``{flag}``" for flag in no_config)


def test_a_worker_offers_the_in_doubt_setting_as_the_table_says() -> None:
    # The worker's --in-doubt wrote its choices and default out again, beside the table's row.
    from nb_durable.agent.fleet.worker import ResumeWorker
    from nb_durable.agent.settings import SessionOptions, rows_of
    from nb_durable.cli.commands import build_parser

    row = next(r for r in rows_of(SessionOptions) if r.name == "in_doubt")
    subs: Any = next(a for a in build_parser()._actions if a.dest == "command").choices
    flag = next(a for a in subs["worker"]._actions if a.dest == "in_doubt")
    assert (tuple(flag.choices), flag.default) == (row.choices_for("cli"), row.default)
    assert ResumeWorker(store="runs").in_doubt == row.default
    with pytest.raises(ValueError, match=r"^a worker's in_doubt must be one of 'rerun', 'skip', 'fail' \(nobody is there to ask\), not 'ask'$"):
        ResumeWorker(store="runs", in_doubt="ask")


def test_a_rerun_with_another_model_is_told_a_resume_may_change_it(tmp_path: Path, ip: Any) -> None:
    # It said only "resume the run as it was recorded", though a resume may move it to the model asked for.
    from nb_durable.agent.models.messages import text_message
    from nb_durable.errors import SettingsMismatchError

    store = str(tmp_path / "runs")
    run_agent("hi", run_id="m", client=ScriptedModel([text_message("a")]), store=store, workspace=str(tmp_path), model="claude-a")
    with pytest.raises(SettingsMismatchError) as refused:
        run_agent("hi", run_id="m", client=ScriptedModel([]), store=store, workspace=str(tmp_path), model="claude-b")
    assert str(refused.value).endswith(
        "or resume the run (resume_agent('m')): a resume keeps its settings, but may change model from its next turn on, "
        "recorded as a decision."
    )
    from nb_durable.agent.display.words import in_words_of

    assert "or resume the run (%agent_resume m): a resume keeps" in in_words_of("notebook", str(refused.value))
    with pytest.raises(SettingsMismatchError, match=r"or resume the run as it was recorded\.$"):
        run_agent("hi", run_id="m", client=ScriptedModel([]), store=store, workspace=str(tmp_path), model="claude-a", effort="high")


def test_config_gives_a_resume_the_session_settings_it_set(ip: Any, tmp_path: Path) -> None:
    # %config AgentMagics.max_turns was left out of every resume (a recorded setting, though a
    # resume may change it for its session), so a run stopped at its turn limit stopped again.
    from nb_durable import read_run

    ip.run_cell_magic("agent", "--run m --demo --max-turns 1", "look around")
    turns = [s.step_id for s in read_run("m", "runs").steps if s.step_id.startswith("model:")]
    assert turns == ["model:0"], turns
    ip.run_line_magic("config", "AgentMagics.max_turns = 2")
    ip.run_line_magic("agent_resume", "m")
    turns = [s.step_id for s in read_run("m", "runs").steps if s.step_id.startswith("model:")]
    assert turns == ["model:0", "model:1"], turns


def test_the_stall_timeout_is_turned_off_with_off_in_every_front_end(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """Its help said "unset: wait as long as the SDK does", but a flag's None means "not given",
    so nothing a person could type unset it (0 and none were refused)."""
    from nb_durable.agent.run.prepare import prepare_run
    from nb_durable.agent.settings.flags import given
    from nb_durable.cli.commands import build_parser
    from nb_durable.cli.running import _going_on
    from nb_durable.jupyter.flags import arguments_of, values_of

    def stall_of(values: dict[str, Any]) -> float | None:
        return prepare_run("x", values={**values, "demo": True}).options.stall_timeout

    parser = build_parser()
    assert stall_of(given(parser.parse_args(["run", "--stall-timeout", "off", "x"]), "run", "cli")) is None
    assert stall_of(given(parser.parse_args(["run", "--stall-timeout", "5", "x"]), "run", "cli")) == 5
    assert stall_of({}) == 90.0, "not given: the default"
    _, options = _going_on(parser.parse_args(["resume", "r", "--stall-timeout", "OFF"]), "resume")
    assert options.stall_timeout is None
    with pytest.raises(SystemExit):
        parser.parse_args(["run", "--stall-timeout", "none", "x"])
    assert "--stall-timeout: must be a number (such as 2.5), not 'none' (or off)" in capsys.readouterr().err
    magics = _magics(ip)
    assert stall_of(values_of(magics, arguments_of(magics.agent, "--stall-timeout off"), "run", new_run=True)) is None
    assert stall_of(values_of(magics, arguments_of(magics.agent, ""), "run", new_run=True)) == 90.0
    ip.run_line_magic("config", "AgentMagics.stall_timeout = None")
    assert stall_of(values_of(magics, arguments_of(magics.agent, ""), "run", new_run=True)) is None
