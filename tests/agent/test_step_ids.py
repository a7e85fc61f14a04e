"""``StepId`` owns the agent's step ids: every kind reads back as written, a point's second
change or follow-up is numbered (``settings:3:1``), and no other spelling is taken for one."""

from __future__ import annotations

import pytest

from nb_durable.agent.display.step_ids import StepId


@pytest.mark.parametrize(
    ("step", "text", "words"),
    [
        (StepId.model(3), "model:3", "model turn 3"),
        (StepId.tool(3, 0, "toolu_x"), "tool:3:0:toolu_x", "tool call 1 of turn 3"),
        (StepId.approval(3, 1, "toolu_y"), "approval:3:1:toolu_y", "approval of tool call 2 of turn 3"),
        (StepId.settings(3), "settings:3", "settings change before turn 3"),
        (StepId.settings(3, 1), "settings:3:1", "settings change 2 before turn 3"),
        (StepId.user(0, 2), "user:0:2", "follow-up 3 before turn 0"),
        (StepId.compact(2), "compact:2", "compaction before turn 2"),
    ],
)
def test_each_id_reads_back_as_written_and_says_its_words(step: StepId, text: str, words: str) -> None:
    assert str(step) == text and StepId.parse(text) == step and step.words() == words


@pytest.mark.parametrize("text", ["settings:3:0", "settings:3:01", "model:3:1", "compact:3:1", "user:3:x", "settings:3:1:2"])
def test_no_other_spelling_is_an_agent_step(text: str) -> None:
    assert not StepId.is_agent_step(text)


def test_a_settings_step_that_changed_nothing_reads_as_a_resume() -> None:
    assert StepId.settings(3).words(changed=False) == "resume before turn 3"
    assert StepId.settings(3, 1).words(changed=False) == "resume 2 before turn 3"
