"""The package's messages in the words of the front end that prints them (``in_words_of``).

A message names Python (``fork('r', 'new-id', at=3)``, ``in_doubt='skip'``, ``read_run()``);
the CLI and the notebook print it with their own commands and flags instead, and only where
the Python spelling means that command: a batch file's key ``max_turns`` stays a key.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from nb_durable.agent.display.words import in_words_of
from nb_durable.core.log import EventLog
from nb_durable.errors import DivergenceError, LogCorruptedError, RunNotRunningError, StoreError


def test_a_diverged_or_damaged_run_is_told_to_fork_with_the_cli_command_and_in_python_in_a_notebook() -> None:
    diverged = str(DivergenceError(run_id="r1", position=3, recorded="model:2", requested="tool:2:1", why="changed"))
    assert "keep the steps that still match with nb-durable fork r1 NEW --at 3 and continue" in in_words_of("cli", diverged)
    assert in_words_of("notebook", diverged) == diverged  # there, fork() is what a person calls
    damaged = str(LogCorruptedError(run_id="r2", location="runs/r2.jsonl", line=4, why="bad checksum", intact=2))
    assert "into a new run with nb-durable fork r2 NEW --at 2." in in_words_of("cli", damaged), in_words_of("cli", damaged)


def test_max_turns_becomes_the_flag_only_where_it_is_asked_to_change() -> None:
    limit = "reached the limit of 1 turns; resume with a higher max_turns to go on"
    for interface in ("cli", "notebook"):
        assert in_words_of(interface, limit).endswith("resume with a higher --max-turns to go on")
    line = "tasks.jsonl, line 1: 'max_turns' must be at least 1, not 0; a line may hold task, max_turns, tags"
    assert in_words_of("cli", line) == line


def test_python_calls_become_commands_of_each_front_end() -> None:
    said = "resume with in_doubt='skip'; inspect it with read_run('r3'); list_runs('runs.db') lists them all"
    assert in_words_of("cli", said) == (
        "resume with --in-doubt skip; inspect it with nb-durable show r3; nb-durable runs --store runs.db lists them all"
    )
    assert in_words_of("notebook", said) == (
        "resume with --in-doubt skip; inspect it with %agent_show r3; %agent_runs --store runs.db lists them all"
    )


def test_a_terminal_command_about_a_run_names_the_store_the_command_was_given() -> None:
    """'nb-durable resume r3', printed by a command given --store, looked for r3 in the default store."""
    said = "resume it with resume_agent('r3'); see read_run('r3'); list_runs() lists them; fork('r3', new_id, at=2)"
    assert in_words_of("cli", said, "sqlite:///my runs.db") == (
        "resume it with nb-durable resume r3 --store 'sqlite:///my runs.db'; see nb-durable show r3 --store 'sqlite:///my runs.db'; "
        "nb-durable runs --store 'sqlite:///my runs.db' lists them; nb-durable fork r3 NEW --at 2 --store 'sqlite:///my runs.db'"
    )
    assert in_words_of("cli", said) == (
        "resume it with nb-durable resume r3; see nb-durable show r3; nb-durable runs lists them; nb-durable fork r3 NEW --at 2"
    )
    assert in_words_of("notebook", said, "runs.db").startswith("resume it with %agent_resume r3; see %agent_show r3;")


def test_a_run_not_going_on_here_is_told_how_to_find_and_resume_it() -> None:
    elsewhere = str(RunNotRunningError(run_id="fix", going=["other"]))
    assert in_words_of("notebook", elsewhere).endswith(
        "(another kernel, or before a restart) is listed by %agent_runs and resumed with %agent_resume fix"
    ), in_words_of("notebook", elsewhere)
    assert in_words_of("cli", elsewhere).endswith("is listed by nb-durable runs and resumed with nb-durable resume fix")
    stopped = str(RunNotRunningError(run_id="fix", going=[], ended="interrupted"))
    assert in_words_of("notebook", stopped) == (
        "run 'fix' has already ended (interrupted) in the background: %agent_resume fix goes on from there"
    )


def test_batch_mode_refused_for_the_demo_model_names_the_flag_but_a_batch_line_keeps_its_key() -> None:
    """The CLI said "batch_api must be off for the offline demo model, ..., not True" to a
    person who had typed --batch-api."""
    from nb_durable.agent.run.prepare import demo_refuses_batch_mode

    for asked in (True, False):
        said = str(demo_refuses_batch_mode(asked=asked))
        for interface in ("cli", "notebook"):
            words = in_words_of(interface, said)
            assert words.startswith("--batch-api cannot be used with the offline demo model, which has no Message Batches API")
            assert not words.endswith("not True") and ("ANTHROPIC_API_KEY" in words) is not asked, words
    line = f"tasks.jsonl, line 2: {demo_refuses_batch_mode(asked=True)}"
    assert in_words_of("cli", line) == line


def test_a_runs_folder_that_cannot_be_written_is_told_to_name_another_with_the_store_flag(tmp_path: Path) -> None:
    # %agent_resume and nb-durable resume said "Pass root= a folder you can write": a Python argument neither takes.
    (tmp_path / "file").write_text("not a folder")
    with pytest.raises(StoreError) as raised:
        EventLog("r1", tmp_path / "file" / "runs")
    for interface in ("cli", "notebook"):
        said = in_words_of(interface, str(raised.value))
        assert "root=" not in said and said.endswith("Pass --store a folder you can write."), said


def test_another_model_for_a_resume_is_said_with_each_front_end_s_flag() -> None:
    # "resume with another model" said what, not how: the flag is --model in a terminal and a magic alike.
    from nb_durable.agent.run.outcomes import explain

    refused = explain("refused", {}, max_tokens=100)
    for said in (refused, explain("bad_tool_input", {"tool": "read_file", "invalid": 5}, max_tokens=100)):
        assert "with another model (model=M)" in said, said
        for interface in ("cli", "notebook"):
            assert "with another model (--model M)" in in_words_of(interface, said)
    # As the terminal's summary and the notebook's header print it.
    import io

    from nb_durable.agent.display.progress import TextProgress
    from nb_durable.agent.display.views import RunView
    from nb_durable.core.status import Status
    from nb_durable.jupyter.render import render_header, render_text

    run = RunView("r", Status.REFUSED, detail=refused)
    out = io.StringIO()
    TextProgress(out).run_changed(run)
    assert "what to do: the model declined to continue. Resume with another model (--model M)" in out.getvalue()
    assert "(--model M)" in render_header(run) and "(--model M)" in render_text(run, [])


def test_a_listing_command_naming_a_store_without_its_password_says_so_as_the_others_do() -> None:
    """An unknown run's 'nb-durable runs --store URL lists them all' named a PostgreSQL store
    without its password and did not say so, where 'nb-durable resume RUN --store URL' does."""
    from nb_durable.cli.hints import in_cli_words, password_left_out
    from nb_durable.errors import RunNotFoundError

    given, shown = "postgresql://ops:s3cret@db.example/runs", "postgresql://ops@db.example/runs"
    unknown = RunNotFoundError(run_id="nope", where=f"the PostgreSQL store {shown}", known=["a"], store=shown)
    said = in_cli_words(str(unknown), given)
    note = password_left_out(given)
    assert note and said.endswith(f"nb-durable runs --store {shown} lists them all.{note}"), said
    assert "s3cret" not in said
    resume = in_cli_words("run 'a' failed; resume_agent('a') to go on", given)
    assert resume.count(note) == 1 and in_cli_words(resume, given) == resume, "said once, however often it is put in words"
    assert in_cli_words(str(unknown), shown).endswith(f"--store {shown} lists them all."), "no password given, none left out"
