"""What the notebook's input box asks: the tool call a person is asked to allow, whole or saying what it leaves out."""

from __future__ import annotations

import builtins
from typing import Any

import pytest

from nb_durable.core.steps import StepRecord
from nb_durable.jupyter import prompts


def asked(monkeypatch: pytest.MonkeyPatch, ask: Any) -> str:
    said: list[str] = []

    def answer(prompt: str = "") -> str:
        said.append(prompt)
        return "n"

    monkeypatch.setattr(builtins, "input", answer)
    ask()
    return said[0]


def test_an_approval_of_a_long_command_shows_its_end_and_says_what_it_leaves_out(monkeypatch: pytest.MonkeyPatch) -> None:
    # The prompt cut the command at 300 characters, silently: the end, the part that needed approval, was not shown.
    command = "echo " + "x" * 1000 + " && git push --force origin main"
    prompt = asked(monkeypatch, lambda: prompts._approve_in_cell("run_bash", {"command": command}, "matches approve_bash"))
    assert "git push --force origin main (matches approve_bash). Allow it? [y/N] " in prompt, prompt
    assert f"({len(command) - prompts.SHOWN:,} characters not shown: the row above has the whole input)" in prompt
    short = asked(monkeypatch, lambda: prompts._approve_in_cell("run_bash", {"command": "git push"}, "why"))
    assert short == "The agent wants to run run_bash: git push (why). Allow it? [y/N] "


def test_a_step_in_doubt_shows_the_end_of_its_input(monkeypatch: pytest.MonkeyPatch) -> None:
    tool_input = {"command": "sleep 1; " * 100 + "rm -rf build"}
    record = StepRecord(7, "tool:3:0:toolu_1", "in_doubt", "external", None, None, None, None, None, (), ())
    prompt = asked(monkeypatch, lambda: prompts._ask_in_cell(record, tool_input))
    assert "rm -rf build'}). Run it again (r)" in prompt and "characters not shown" in prompt, prompt
