"""``nb-durable`` on today's models: each outcome its exit code, each fix a flag, as a user types it.

Every command is ``python -m nb_durable.cli`` in a process of its own, talking to the loopback
Messages API through ``ANTHROPIC_BASE_URL``: a turn cut off while thinking exits 5 and
``resume --max-tokens`` asks it again (0); a refusal exits 6 and ``resume --model`` moves the
run (0); a full context window exits 7; a budget stop exits 8 and ``resume --max-usd``
raises it (0); a turn limit exits 130, saying ``--max-turns``, which ``resume --max-turns``
goes past (0); ``continue RUN MESSAGE`` gives a finished run a follow-up. Each change shows
in ``show`` as a recorded decision, and the whole run then replays with no request.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from nb_durable.core.runs import read_run
from tests.conftest import nb_durable_cli
from tests.fakes import MessagesAPIServer, reply, tool_use
from tests.fakes.messages_api.content import thinking, usage
from tests.fakes.messages_api.scenario import cut_off, refusal

MODEL = "claude-test-1"
RUN = "outcome"


def cli(server: MessagesAPIServer, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return nb_durable_cli(*args, cwd=cwd, ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="test-key")


@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "notes.txt").write_text("buy milk\n")
    return tmp_path


def run(server: MessagesAPIServer, work: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return cli(server, work, "run", "Tidy the notes.", "--run", RUN, "--model", MODEL, "--workspace", ".", *extra)


def test_truncated_exits_5_and_resume_with_more_room_completes(work: Path) -> None:
    with MessagesAPIServer([[cut_off(thinking("plan " * 300), "never", after=40), reply("Done.")]]) as server:
        first = run(server, work)
        assert first.returncode == 5, first.stderr
        assert "truncated" in first.stderr and "max_tokens" in first.stderr
        second = cli(server, work, "resume", RUN, "--max-tokens", "32000")
        assert second.returncode == 0, second.stderr
        assert [r.body["max_tokens"] for r in server.requests if r.endpoint == "messages"] == [16000, 32000]
        count = len(server.requests)
        shown = cli(server, work, "show", RUN)
        again = cli(server, work, "resume", RUN)
        assert len(server.requests) == count
    assert "max_tokens=32000" in shown.stdout
    assert again.returncode == 0


def test_refused_exits_6_and_resume_with_another_model_completes(work: Path) -> None:
    with MessagesAPIServer([[refusal(category="bio", explanation="Not this."), reply("Done.")]]) as server:
        first = run(server, work)
        assert first.returncode == 6 and "bio" in first.stderr, first.stderr
        second = cli(server, work, "resume", RUN, "--model", "claude-test-2")
        assert second.returncode == 0, second.stderr
        models = [r.body["model"] for r in server.requests if r.endpoint == "messages"]
    assert models == [MODEL, "claude-test-2"]


def test_context_full_exits_7(work: Path) -> None:
    with MessagesAPIServer([reply("partial", stop_reason="model_context_window_exceeded")]) as server:
        first = run(server, work)
    assert first.returncode == 7 and "Fork" in first.stderr
    # The status in words, as every other line says it; and how to move to another model.
    assert f"run {RUN} context full after 1 turns" in first.stdout and "context_full" not in first.stdout + first.stderr
    assert f"nb-durable: run {RUN} context full: " in first.stderr and "larger context window (--model M)" in first.stderr, first.stderr


def test_budget_exhausted_exits_8_and_resume_with_a_larger_budget_completes(work: Path) -> None:
    spend = usage(input_tokens=100, output_tokens=10_000)
    turns = [reply(f"step {i}", tool_use("list_dir", {}, id=f"toolu_{i}"), usage=spend) for i in range(3)]
    with MessagesAPIServer([*turns, reply("done")]) as server:
        first = run(server, work, "--max-usd", "0.35")
        assert first.returncode == 8 and "--max-usd" in first.stderr, first.stderr
        second = cli(server, work, "resume", RUN, "--max-usd", "5")
        assert second.returncode == 0, second.stderr
    steps = read_run(RUN, str(work / "runs")).steps
    assert any(s.step_id.startswith("settings:") and s.result["changes"] == {"max_usd": 5.0} for s in steps)


def test_a_turn_limit_exits_130_and_says_the_flag_that_goes_past_it(work: Path) -> None:
    """It said "resume with a higher max_turns" (the setting, not the flag), and the exit table
    "resume to go on", though a plain resume stops at the same limit again."""
    turns = [reply(f"step {i}", tool_use("list_dir", {}, id=f"toolu_{i}")) for i in range(2)]
    with MessagesAPIServer([*turns, reply("Done.")]) as server:
        first = run(server, work, "--max-turns", "1")
        assert first.returncode == 130, first.stderr
        assert first.stderr.endswith("reached the limit of 1 turns; resume with a higher --max-turns to go on\n"), first.stderr
        plain = cli(server, work, "resume", RUN)
        assert plain.returncode == 130 and ", 0 live." in plain.stdout, plain.stdout
        higher = cli(server, work, "resume", RUN, "--max-turns", "5")
        assert higher.returncode == 0, higher.stderr
        helped = cli(server, work, "--help")
    assert "130  interrupted: by Ctrl-C or a killed process (resume to go on), or at the turn limit (resume --max-turns N" in helped.stdout


def test_continue_gives_a_finished_run_a_follow_up(work: Path) -> None:
    with MessagesAPIServer([reply("Read them."), reply("Sorted too.")]) as server:
        assert run(server, work).returncode == 0
        followed = cli(server, work, "continue", RUN, "Now sort them.")
        assert followed.returncode == 0, followed.stderr
        last = [r for r in server.requests if r.endpoint == "messages"][-1].body["messages"]
    assert "Sorted too." in followed.stdout
    assert last[-1] == {"role": "user", "content": "Now sort them."}


def test_bad_flags_are_usage_errors(work: Path) -> None:
    with MessagesAPIServer([reply("x")]) as server:
        assert run(server, work, "--max-usd", "-1").returncode == 2
        assert run(server, work, "--cache-ttl", "2h").returncode == 2
        assert run(server, work, "--effort", "huge").returncode == 2
        missing = cli(server, work, "continue", "no-such-run", "more")
    assert missing.returncode == 2 and "no-such-run" in missing.stderr


def test_replaying_a_finished_run_with_a_lower_turn_limit_changes_nothing(work: Path) -> None:
    turns = [reply("Looking.", tool_use("list_dir", {}, id="toolu_1")), reply("Done.")]
    with MessagesAPIServer(turns) as server:
        assert run(server, work).returncode == 0
        log = work / "runs" / f"{RUN}.jsonl"
        before = log.read_bytes()
        again = cli(server, work, "resume", RUN, "--max-turns", "1")
        assert len([r for r in server.requests if r.endpoint == "messages"]) == 2
    assert again.returncode == 0, again.stderr
    assert "completed" in again.stdout
    assert log.read_bytes() == before, "a replay never rewrites a finished run"
    assert read_run(RUN, str(work / "runs")).summary.status == "completed"


def test_resuming_a_completed_run_with_a_new_budget_asks_nothing_and_writes_nothing(work: Path) -> None:
    with MessagesAPIServer([reply("Done.")]) as server:
        assert run(server, work).returncode == 0
        log = work / "runs" / f"{RUN}.jsonl"
        before = log.read_bytes()
        again = cli(server, work, "resume", RUN, "--max-usd", "5")
        asked = [r for r in server.requests if r.endpoint == "messages"]
    assert again.returncode == 0, again.stderr
    assert len(asked) == 1, "a completed run is not asked again"
    assert log.read_bytes() == before
