"""The settings table is the one owner of a setting: every front end derives from its rows.

* A throwaway setting added as one row of a copy of ``agent/settings/table.py`` (no other
  file touched) shows in the CLI's help, in ``%agent?`` and ``%agent_resume?``, as a
  ``%config AgentMagics`` trait, in a run's recorded settings and in a resume's recorded change.
* The CLI's commands, the magics' arguments and ``%config`` offer exactly the table's rows.
* A bad value is one error, ``SettingError``, worded in the front end's own spelling.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, get_args

import pytest

import nb_durable
from nb_durable.agent import AgentSettings, SessionOptions, run_agent
from nb_durable.agent.models.scripted import ScriptedModel
from nb_durable.agent.settings import CHANGEABLE, TABLE, Change
from nb_durable.agent.settings.flags import rows_for
from nb_durable.agent.settings.rows import Command
from nb_durable.cli.commands import build_parser
from nb_durable.core.events import RunOutcome
from nb_durable.core.status import Status
from nb_durable.core.steps import RunStatus
from nb_durable.errors import SettingError
from tests.conftest import subprocess_env

PACKAGE = Path(nb_durable.__file__).resolve().parent

ROW = (
    '    throwaway_limit: int | None = setting(None, "a throwaway limit of the table test", metavar="N", '
    'minimum=1, group="limits", identity=False, on_resume="recorded")\n'
)
"""The one line the throwaway setting is: a row of ``AgentSettings``, changeable by a resume."""

PROBE = r"""
import contextlib, io, json, sys
from pathlib import Path

import nb_durable
from nb_durable.agent import resume_agent, run_agent
from nb_durable.agent.models.messages import text_message, tool_use_message
from nb_durable.agent.models.scripted import ScriptedModel
from nb_durable.agent.settings import Change
from nb_durable.cli.commands import build_parser
from nb_durable.core.runs import read_run

work = Path(sys.argv[1])
out = {"package": nb_durable.__file__}

subs = next(a for a in build_parser()._actions if a.dest == "command").choices
out["cli"] = {name: subs[name].format_help() for name in ("run", "resume", "continue")}

from IPython.testing.globalipapp import get_ipython

ip = get_ipython()
ip.run_line_magic("load_ext", "nb_durable")
out["agent?"] = ip.magics_manager.magics["cell"]["agent"].__doc__
out["agent_resume?"] = ip.magics_manager.magics["line"]["agent_resume"].__doc__
listing = io.StringIO()
with contextlib.redirect_stdout(listing):
    ip.run_line_magic("config", "AgentMagics")
out["%config"] = listing.getvalue()
ip.run_line_magic("config", "AgentMagics.throwaway_limit = 7")
magics = next(c for c in ip.configurables if type(c).__name__ == "AgentMagics")
out["configured"] = magics.throwaway_limit

store = str(work / "runs")
replies = [tool_use_message([("list_dir", {"path": "."}, "toolu_1")]), text_message("done")]
first = run_agent("look", run_id="t", client=ScriptedModel(replies[:1]), store=store, workspace=str(work),
                  max_turns=1, throwaway_limit=3)
out["first"] = first.status
out["recorded"] = read_run("t", store).summary.settings.get("throwaway_limit")
again = resume_agent("t", client=ScriptedModel(replies[1:]), store=store, max_turns=5, change=Change.of(throwaway_limit=5))
out["again"] = again.status
out["changes"] = [s.result["changes"] for s in read_run("t", store).steps if s.step_id.startswith("settings:")]
print(json.dumps(out))
"""


def test_a_throwaway_setting_added_to_the_table_reaches_every_front_end_and_the_log(tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(PACKAGE, copy / "nb_durable", ignore=shutil.ignore_patterns("__pycache__"))
    table = copy / "nb_durable" / "agent" / "settings" / "table.py"
    text = table.read_text()
    anchor = "    endpoint: Mapping[str, str] = setting("
    assert text.count(anchor) == 1, "the row goes before AgentSettings.endpoint"
    table.write_text(text.replace(anchor, ROW + anchor))
    changed = [
        p.relative_to(copy).as_posix()
        for p in sorted((copy / "nb_durable").rglob("*"))
        if p.is_file() and p.read_bytes() != (PACKAGE.parent / p.relative_to(copy)).read_bytes()
    ]
    assert changed == ["nb_durable/agent/settings/table.py"], "one file of the copy differs: the table"

    env = subprocess_env()
    env["PYTHONPATH"] = str(copy) + ":" + env["PYTHONPATH"]
    work = tmp_path / "work"
    work.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(work)], check=False, capture_output=True, text=True, env=env, cwd=work, timeout=180
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["package"].startswith(str(copy)), "the probe ran the copy with the throwaway row"
    for command, help_text in seen["cli"].items():
        assert "--throwaway-limit N" in help_text and "a throwaway limit of the table test" in help_text, command
    assert "changed from here on, recorded as a decision" in seen["cli"]["resume"].split("--throwaway-limit")[1]
    assert "--throwaway-limit N" in seen["agent?"] and "--throwaway-limit N" in seen["agent_resume?"]
    assert "AgentMagics.throwaway_limit" in seen["%config"] and seen["configured"] == 7
    assert (seen["first"], seen["recorded"]) == ("interrupted", 3), "recorded when the run started"
    assert seen["again"] == "completed"
    assert seen["changes"] == [{"throwaway_limit": 5}], "the resume's change, recorded as a decision"


def _dests(parser: argparse.ArgumentParser) -> set[str]:
    return {a.dest for a in parser._actions if a.option_strings}


def test_the_cli_and_the_magics_offer_exactly_the_tables_flags(ip: Any) -> None:
    subs: Any = next(a for a in build_parser()._actions if a.dest == "command").choices
    commands: tuple[Command, ...] = ("run", "resume", "continue")
    for command in commands:
        table = {row.name for row in rows_for(command, "cli")}
        own = _dests(subs[command]) - table - {"help"}
        assert table <= _dests(subs[command]), command
        assert not own & {row.name for row in TABLE}, f"nb-durable {command} writes a setting's flag by hand: {own}"
    magics = ip.magics_manager.magics
    pairs: tuple[tuple[Any, Command], ...] = ((magics["cell"]["agent"], "run"), (magics["line"]["agent_resume"], "resume"))
    for magic, command in pairs:
        dests = _dests(magic.parser)
        table = {row.name for row in rows_for(command, "notebook")}
        assert table <= dests and not (dests - table) & {row.name for row in TABLE}, command
    agent_magics = next(c for c in ip.configurables if type(c).__name__ == "AgentMagics")
    assert set(agent_magics.traits(config=True)) == {row.name for row in TABLE if row.config}


def test_a_bad_value_is_one_error_in_each_front_ends_words(tmp_path: Path, ip: Any) -> None:
    with pytest.raises(SettingError, match=r"^max_turns must be at least 1, not 0$"):
        run_agent("x", client=ScriptedModel([]), store=str(tmp_path), workspace=str(tmp_path), max_turns=0)
    with pytest.raises(SettingError, match=r"^max_usd must be a positive number of dollars, not -1$"):
        AgentSettings(task="x", max_usd=-1)
    with pytest.raises(SettingError, match=r"^--max-run-tokens must be at least 1, not 0$"):
        from nb_durable.agent.settings.flags import given

        given(argparse.Namespace(max_run_tokens=0), "run", "cli")
    with pytest.raises(SettingError, match="NB_DURABLE_TOKENS_PER_MINUTE must be a whole number, not 'lots'"):
        SessionOptions().with_environment({"NB_DURABLE_TOKENS_PER_MINUTE": "lots"})
    with pytest.raises(SettingError, match=r"^workspace must be text, not 3$"):
        Change.of(workspace=3)
    from traitlets import TraitError

    magics = next(c for c in ip.configurables if type(c).__name__ == "AgentMagics")
    with pytest.raises(TraitError, match=r"AgentMagics.max_turns must be at least 1, not 0"):
        magics.max_turns = 0
    assert isinstance(SettingError(setting="x", value=1, reason="r"), ValueError), "except ValueError still works"


def test_a_pattern_that_is_no_regex_is_refused_where_it_is_given(
    tmp_path: Path, ip: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    # Taken silently, it failed every run after it with re's 142-line traceback.
    wrong = "must be a regular expression (missing ), unterminated subpattern at position 7), not"
    with pytest.raises(SettingError, match=rf"^approve_bash {re.escape(wrong)} 'rm -rf \('$"):
        run_agent("x", client=ScriptedModel([]), store=str(tmp_path), workspace=str(tmp_path), approve_bash="rm -rf (")
    from traitlets import TraitError

    magics = next(c for c in ip.configurables if type(c).__name__ == "AgentMagics")
    with pytest.raises(TraitError, match=rf"^AgentMagics.approve_bash {re.escape(wrong)} 'rm -rf \('$"):
        magics.approve_bash = "rm -rf ("
    assert magics.approve_bash is None, "the setting keeps its value"
    from nb_durable.cli.commands import main

    assert main(["run", "--demo", "--store", str(tmp_path), "--approve-bash", "rm -rf (", "x"]) == 2
    assert capsys.readouterr().err == f"nb-durable: --approve-bash {wrong} rm -rf (\n"
    assert not any(tmp_path.iterdir()), "nothing ran"


def test_a_changeable_setting_says_what_a_resume_does_with_it() -> None:
    assert set(CHANGEABLE) == {
        "model", "max_tokens", "thinking", "max_usd", "max_run_tokens", "max_turns", "cache_ttl", "fallback_models",
        "fallback_after", "max_invalid_tool_calls", "compaction", "compact_at",
    }  # fmt: skip
    change = Change.of(model="claude-other", max_turns=3, cache_ttl="1h", max_usd=None)
    assert change.recorded() == {"model": "claude-other"}, "recorded as a decision at the next point"
    assert change.for_session() == {"max_turns": 3, "cache_ttl": "1h"}, "this session only, never recorded"


def test_a_follow_up_s_change_reaches_the_follow_up_s_own_turn(tmp_path: Path) -> None:
    from nb_durable import read_run
    from nb_durable.agent import continue_agent
    from nb_durable.agent.models.messages import text_message

    model = ScriptedModel([text_message("first"), text_message("second")])
    run_agent("hi", run_id="c", client=model, store=str(tmp_path), workspace=str(tmp_path), model="claude-a")
    continue_agent("c", "more", client=model, store=str(tmp_path), model="claude-b")
    assert [r["model"] for r in model.requests] == ["claude-a", "claude-b"]
    points = [s.step_id for s in read_run("c", str(tmp_path)).steps if not s.step_id.startswith("model:")]
    assert points == ["settings:1", "user:1"], "the change is recorded before the follow-up, at the same point"


def test_settings_round_trip_through_their_json_in_the_logs_order() -> None:
    settings = AgentSettings(task="t", workspace="/w", tags=("a",), max_usd=2.5, queued=True, priority=3, batch="b")
    data = settings.to_json()
    assert list(data)[:3] == ["task", "model", "model_kind"] and list(data)[-3:] == ["queued", "priority", "batch"]
    # The cache's ttl is recorded as used, its mode's default made explicit, so a resume keeps it.
    assert AgentSettings.from_json(data) == settings.but(cache_ttl="5m")
    assert AgentSettings.from_json(settings.but(batch_api=True).to_json()) == settings.but(batch_api=True, cache_ttl="1h")
    plain = AgentSettings(task="t").to_json()
    assert "sources" not in plain and "queued" not in plain, "written only when set, as runs always recorded them"
    assert AgentSettings.from_json({"task": "t"}).thinking == "off", "a log from before thinking sent none"


def test_statuses_are_one_enum_that_covers_what_the_log_can_say() -> None:
    assert {s.value for s in Status if s.recorded} == set(get_args(RunStatus))
    assert {s.value for s in Status if s.recorded and s.ended and s is not Status.IN_DOUBT} == set(get_args(RunOutcome))
    assert Status("completed") == "completed" and f"{Status.CONTEXT_FULL}" == "context_full"
    assert [s.value for s in Status if s.resumable] == [
        "failed", "interrupted", "in_doubt", "truncated", "refused", "context_full", "budget_exhausted",
        "bad_tool_input", "unknown_stop", "crashed",
    ]  # fmt: skip
    assert [s.value for s in Status if s.finished] == [
        "completed", "truncated", "refused", "context_full", "budget_exhausted", "bad_tool_input", "unknown_stop",
    ]  # fmt: skip
