"""A click a front end sends as soon as it can find a button is heard.

A front end (or a test driving one, as ``tests/jupyter/kernels.py`` does) finds the timeline's
buttons by their classes. A button's click handler must be in place before those classes are
sent, or a click sent the moment they arrive reaches a button with no handler and is lost: the
run then waits for ever on a question the person answered. It happened in about one in five
loaded runs of the kernel tests that click Skip, Rerun or Deny as soon as it appears.
"""

from __future__ import annotations

from typing import Any

import ipywidgets
import pytest
from ipywidgets import Button, Widget

from nb_durable.agent.fleet.decisions import APPROVAL_CHOICES, IN_DOUBT_CHOICES, PendingDecision
from nb_durable.jupyter.controls import QuestionBox


def click_on_arrival(monkeypatch: pytest.MonkeyPatch, css_class: str) -> list[Button]:
    """Click each Button the moment the state that gives it ``css_class`` is sent, as a fast front end would."""
    clicked: list[Button] = []
    send_state = Widget.send_state

    def sending(self: Widget, key: Any = None) -> None:
        send_state(self, key)
        if isinstance(self, Button) and css_class in self._dom_classes and self not in clicked:
            clicked.append(self)
            self._handle_msg({"content": {"data": {"method": "custom", "content": {"event": "click"}}}, "buffers": []})

    monkeypatch.setattr(Widget, "send_state", sending)
    return clicked


@pytest.mark.parametrize(
    ("kind", "choice"), [("in_doubt", c) for c in IN_DOUBT_CHOICES] + [("approval", c) for c in APPROVAL_CHOICES]
)
def test_an_answer_clicked_as_soon_as_its_button_can_be_found_is_heard(
    monkeypatch: pytest.MonkeyPatch, kind: str, choice: str
) -> None:
    pending = PendingDecision("r", "tool:0:0:toolu_1", kind, "run_bash", {"command": "ls"}, "why")  # type: ignore[arg-type]
    clicked = click_on_arrival(monkeypatch, f"nbd-{choice}")
    QuestionBox(ipywidgets, pending, enabled=True)
    assert len(clicked) == 1, "the button was never sent with its class"
    assert pending.answer is not None and pending.answer[0] == choice, "the click was lost"
    assert pending.decided
