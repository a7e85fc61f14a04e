"""A model step's text reaches an observer that draws steps as it streams, and costs nothing
to a run whose observer draws none (a worker's): no view is rebuilt for every piece."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nb_durable.agent import Observer, RunHooks, RunView, StepView, run_agent
from nb_durable.agent.models.base import TextCallback
from nb_durable.agent.models.messages import text_message
from nb_durable.agent.models.scripted import ScriptedModel
from nb_durable.agent.run.hooks import Observers

ANSWER = "The notes hold three items: milk, eggs and a reminder to call Ana about the lease."


class Asked(ScriptedModel):
    """A scripted model that notes whether each request came with a text callback."""

    def __init__(self, replies: list[Any]) -> None:
        super().__init__(replies, pieces=6)
        self.with_callback: list[bool] = []

    def create(
        self, request: Mapping[str, Any], on_text: TextCallback | None = None, on_thinking: TextCallback | None = None
    ) -> dict[str, Any]:
        self.with_callback.append(on_text is not None)
        return super().create(request, on_text, on_thinking)


class Steps(Observer):
    def __init__(self) -> None:
        self.outputs: list[str] = []

    def step_changed(self, step: StepView) -> None:
        if step.step_id == "model:0" and step.state == "in_flight":
            self.outputs.append(step.output)


class RunsOnly(Observer):
    def __init__(self) -> None:
        self.runs: list[RunView] = []

    def run_changed(self, run: RunView) -> None:
        self.runs.append(run)


def answered(workspace: Path, observer: Observer) -> Asked:
    model = Asked([text_message(ANSWER)])
    result = run_agent(
        "what do the notes say?", client=model, model="claude-test-1", workspace=workspace,
        store=str(workspace.parent / "runs"), hooks=RunHooks(observer=observer),
    )  # fmt: skip
    assert result.text == ANSWER
    return model


def test_an_observer_that_draws_steps_sees_the_text_grow_as_it_streams(workspace: Path) -> None:
    seen = Steps()
    model = answered(workspace, Observers(RunsOnly(), seen))
    assert model.with_callback == [True]
    assert len(seen.outputs) > 2 and seen.outputs[-1] == ANSWER
    assert all(ANSWER.startswith(text) for text in seen.outputs)


def test_a_run_whose_observer_draws_no_steps_is_asked_without_a_text_callback(workspace: Path) -> None:
    heard = RunsOnly()
    model = answered(workspace, Observers(heard, Observer()))
    assert model.with_callback == [False]
    assert heard.runs and heard.runs[-1].status == "completed"
