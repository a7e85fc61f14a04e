"""The timeline shows thinking apart from the answer, a badge per run status, what a stopped
run should do next, and paid vs replay saved vs caching saved (labelled when simulated):
in the static HTML a notebook saves, in text/plain, and in the live widget as thinking streams.
"""

from __future__ import annotations

import html
import re
from dataclasses import replace
from pathlib import Path
from typing import Any, get_args

import pytest

from nb_durable.agent import RunHooks, run_agent, views_of
from nb_durable.agent.display.views import RunView, StepView
from nb_durable.agent.models.messages import text_message, tool_use_message
from nb_durable.agent.models.retry import RetryPolicy
from nb_durable.agent.models.scripted import ScriptedModel
from nb_durable.agent.money.cost import Cost, Usage
from nb_durable.agent.run.hooks import Observer, Observers
from nb_durable.core.events import RUN_OUTCOMES
from nb_durable.core.runs import read_run
from nb_durable.core.status import Status
from nb_durable.core.steps import RunStatus
from nb_durable.jupyter.render import render_header, render_page, render_step, render_text
from nb_durable.jupyter.timeline import Timeline

THOUGHT = "Check <b>notes</b> & list them.\n\n<img src=x onerror=alert(1)> then **answer**"
ESCAPED = "Check &lt;b&gt;notes&lt;/b&gt; &amp; list them.\n\n&lt;img src=x onerror=alert(1)&gt; then **answer**"
FAST = RetryPolicy(max_attempts=2, base_delay=0.0, jitter=0.0)


def model_step(**changes: Any) -> StepView:
    view = StepView("model:0", "model", 0, "live", "model turn 0", output="Here is the list.", thinking=THOUGHT)
    return view.but(**changes)


def thinking_block(html: str) -> str:
    found = re.search(r'<details class="nbd-thinking"( open)?><summary>[^<]*</summary><pre>(.*?)</pre></details>', html, re.S)
    assert found, html
    return found.group(0)


def test_a_model_steps_thinking_is_an_escaped_collapsed_details_before_its_answer() -> None:
    html = render_step(model_step())
    block = thinking_block(html)
    assert ESCAPED in block and " open" not in block.split(">")[0]
    assert "<img" not in html and "<b>notes" not in html  # nothing the model wrote is markup
    assert html.index("nbd-thinking") < html.index("<pre>Here is the list.</pre>")  # thinking, then the answer


def test_thinking_streaming_in_flight_is_open_and_the_brief_shows_its_newest_part() -> None:
    long = "first thought. " * 30 + "the newest <thought>"
    html = render_step(model_step(state="in_flight", output="", thinking=long))
    assert ' open' in thinking_block(html)
    brief = re.search(r'<span class="nbd-brief nbd-brief-thinking">(.*?)</span>', html)
    assert brief and brief.group(1).endswith("the newest &lt;thought&gt;")
    assert html.startswith('<div class="nbd-step nbd-in_flight" data-kind="model"') and "<details open>" in html


def test_a_step_without_thinking_has_no_thinking_section() -> None:
    assert "nbd-thinking" not in render_step(model_step(thinking=""))


def test_a_rows_tokens_count_the_whole_prompt_and_say_what_the_cache_served() -> None:
    usage = Usage(input_tokens=3, output_tokens=40, cache_creation_input_tokens=97, cache_read_input_tokens=900)
    assert '<span class="nbd-meta">1,000 in (900 cached) / 40 out' in render_step(model_step(usage=usage))


def test_a_row_with_no_tokens_or_timing_spends_no_markup_on_them() -> None:
    # A long run's page holds thousands of rows: an empty element in each was kilobytes saved.
    row = render_step(model_step(state="replayed"))
    assert "nbd-meta" not in row and '<span class="nbd-brief">Here is the list.</span></summary>' in row


@pytest.mark.parametrize("status", sorted({*RUN_OUTCOMES, *get_args(RunStatus)}))
def test_every_status_has_its_own_badge_class_and_colour(status: str) -> None:
    from nb_durable.jupyter.render import STYLE

    html = render_header(RunView("r", Status(status)))
    label = status.replace("_", " ")
    assert f'<span class="nbd-status nbd-status-{status}">{label}</span>' in html
    assert f'<div class="nbd-header nbd-run-{status}">' in html
    rule = re.search(rf"\.nbd-status-{status}[,{{][^}}]*}}", STYLE)
    assert rule and "background:" in rule.group(0), f"no colour for {status}"


def test_the_colours_of_the_new_outcomes_differ_from_each_other_and_from_completed() -> None:
    from nb_durable.jupyter.render import STYLE

    colours = {
        status: re.search(rf"\.nbd-status-{status}[^{{]*{{background:([^;]+);", STYLE).group(1)  # type: ignore[union-attr]
        for status in ("completed", "failed", "truncated", "refused", "context_full", "budget_exhausted")
    }
    assert len(set(colours.values())) == len(colours), colours


def test_a_stopped_run_says_what_to_do_in_the_header_and_text_once() -> None:
    detail = "the model's answer was cut off at max_tokens=64. Resume to let it <continue>."
    run = RunView("r", Status.TRUNCATED, detail=detail, error=detail, text="partial")
    page = render_page(run, [])
    assert '<span class="nbd-run-detail">' + html.escape(detail) + "</span>" in page
    assert page.count("cut off at max_tokens") == 1  # not repeated as an error below
    assert "answer so far" in page and "partial" in page
    text = render_text(run, [])
    assert text.splitlines()[1] == f"what to do: {detail}"
    assert "stopped:" not in text


def test_a_failed_run_still_shows_its_error() -> None:
    page = render_page(RunView("r", Status.FAILED, error="the model said 401"), [])
    assert "nbd-error" in page and "the model said 401" in page and 'class="nbd-run-detail"' not in page


COST = Cost(
    paid=Usage(1000, 200), saved=Usage(3000, 500), paid_dollars=0.0123, saved_dollars=0.0456, cache_saved_dollars=0.0089
)


def test_the_header_shows_paid_replay_saved_and_caching_saved_side_by_side() -> None:
    html = render_header(RunView("r", Status.COMPLETED, cost=COST))
    money = re.sub(r"<[^>]+>", "", re.search(r'<span class="nbd-money">(.*?)</span>', html).group(1))  # type: ignore[union-attr]
    assert money == "paid 1,200 tokens ($0.0123) · replay saved 3,500 tokens ($0.0456) · caching saved $0.0089"
    assert "simulated" not in html
    assert "paid 1,200 tokens ($0.0123) · replay saved 3,500 tokens ($0.0456) · caching saved $0.0089" in render_text(
        RunView("r", Status.COMPLETED, cost=COST), []
    )


def test_a_simulated_cost_labels_every_dollar_and_says_why() -> None:
    run = RunView("r", Status.COMPLETED, model_kind="demo", cost=replace(COST, simulated=True))
    html = render_header(run)
    span = re.search(r'<span class="nbd-money nbd-simulated" title="([^"]+)">(.*?)</span>', html)
    assert span and span.group(1) == "the demo model&#x27;s figures are simulated, not a bill"
    dollars = re.findall(r"(\w+ )?\$\d", re.sub(r"<[^>]+>", "", span.group(2)))
    assert dollars == ["simulated "] * 3
    text = render_text(run, [])
    assert text.count("simulated $") == 3 and "(the demo model's figures are simulated, not a bill)" in text


def test_settings_and_follow_up_rows_read_as_a_decision_and_a_message() -> None:
    settings = StepView(
        "settings:2", "settings", 2, "live", "settings changed before turn 2",
        output="max_tokens=32000 by resume; the stopped turn is asked again",
    )  # fmt: skip
    user = StepView("user:3", "user", 3, "recorded", "follow-up before turn 3", output="now also <sort> them")
    html = render_step(settings) + render_step(user)
    assert '<div class="nbd-step nbd-live" data-kind="settings"' in html
    assert '<span class="nbd-brief">max_tokens=32000 by resume; the stopped turn is asked again</span>' in html
    assert '<div class="nbd-step nbd-recorded" data-kind="user"' in html
    assert '<span class="nbd-brief">now also &lt;sort&gt; them</span>' in html
    assert "null" not in html
    text = render_text(RunView("r", Status.COMPLETED), [settings, user])
    assert "max_tokens=32000 by resume" in text and "now also <sort> them" in text


def test_plain_text_shows_thinking_apart_from_the_answer() -> None:
    lines = render_text(RunView("r", Status.COMPLETED), [model_step()]).splitlines()
    step = next(i for i, line in enumerate(lines) if "model turn 0" in line)
    assert "Here is the list." in lines[step]
    assert lines[step + 1].strip().startswith("thinking: Check <b>notes</b> & list them.")


def test_plain_text_carries_no_escape_code_a_terminal_or_the_notebook_would_obey() -> None:
    # text/plain went out with a tool's and a model's escape codes: a console front end obeyed
    # them (clear the screen, retitle it), and a notebook's text/plain renderer can colour text
    # into its background; nb-durable show strips them.
    tool = StepView("tool:0:0:t", "tool", 0, "live", "run_bash", input={"command": "make"}, output="\x1b[30;40mhidden\x1b[0m\r100%")
    run = RunView("r", Status.COMPLETED, text="Done.\x1b[2J\x1b]0;pwned\x07 All good.\r\nBye.")
    text = render_text(run, [model_step(output="ok\x1b[8m"), tool])
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", text), repr(text)
    assert "run_bash" in text and "[30;40mhidden[0m 100%" in text, "what was said stays, inert"
    assert text.endswith("Done.[2J]0;pwned All good.\nBye.")


def recorded(tmp_path: Path, observer: Any = None) -> tuple[Any, str]:
    workspace = tmp_path / "work"
    workspace.mkdir(exist_ok=True)
    (workspace / "notes.txt").write_text("milk\n")
    model = ScriptedModel(
        [
            tool_use_message([("list_dir", {"path": "."}, "toolu_1")], thinking=THOUGHT),
            text_message("", stop_reason="max_tokens", thinking="still weighing <options>"),
        ]
    )
    store = str(tmp_path / "runs")
    hooks = RunHooks(sleep=lambda s: None) if observer is None else RunHooks(sleep=lambda s: None, observer=observer)
    result = run_agent(
        "list the notes", run_id="thinky", client=model, model="claude-test-1", workspace=workspace, store=store,
        retry=FAST, hooks=hooks,
    )  # fmt: skip
    return result, store


def test_a_recorded_runs_page_has_both_thinking_sections_and_the_truncated_badge(tmp_path: Path) -> None:
    result, store = recorded(tmp_path)
    assert result.status == "truncated"
    run, steps = views_of(read_run("thinky", store))
    page = render_page(run, steps)
    assert page.count('<details class="nbd-thinking">') == 2
    assert ESCAPED in page and "still weighing &lt;options&gt;" in page
    assert 'nbd-status nbd-status-truncated' in page and "max_tokens" in page
    assert "caching saved" in page


class Watch(Observer):
    """After each step change, the HTML of the timeline's live rows."""

    def __init__(self, timeline: Timeline) -> None:
        self.timeline = timeline
        self.seen: list[tuple[str, str]] = []

    def step_changed(self, step: StepView) -> None:
        boxes = self.timeline._rows.box.children  # the live rows, in boxes
        rows = [row for box in boxes for row in box.children]
        self.seen.append((step.state, "".join(row.value for row in rows)))


def test_the_live_widget_row_updates_as_thinking_streams_and_freezes_on_truncated(tmp_path: Path) -> None:
    timeline = Timeline(RunView("thinky", Status.RUNNING), throttle=0)
    watch = Watch(timeline)
    finished: list[bool] = []
    timeline.finish = lambda: finished.append(True)  # type: ignore[method-assign]
    recorded(tmp_path, Observers(timeline, watch))
    streaming = [html for state, html in watch.seen if state == "in_flight" and "nbd-thinking" in html]
    assert len(streaming) >= 2, "the row was not redrawn as thinking streamed"
    assert any('<details class="nbd-thinking" open>' in html for html in streaming)
    growing = [len(thinking_block(html)) for html in streaming[:3]]
    assert growing == sorted(growing) and growing[0] < growing[-1]
    assert timeline.run.status == "truncated" and finished == [True]


def test_agent_runs_and_agent_show_show_a_truncated_run_with_its_badge_thinking_and_what_to_do(
    ip: Any, tmp_path: Path
) -> None:
    from nb_durable.jupyter.render import STYLE

    recorded(tmp_path)  # the magics' default store is ./runs, and the shell works in tmp_path
    table = ip.run_line_magic("agent_runs", "")._repr_html_()
    assert '<tr class="nbd-run-truncated">' in table and '<span class="nbd-status">truncated</span>' in table
    assert re.search(r"\.nbd-run-truncated \.nbd-status[,{]", STYLE)
    bundle = ip.run_line_magic("agent_show", "thinky")._repr_mimebundle_()
    assert bundle["text/html"].count('<details class="nbd-thinking">') == 2
    assert '<span class="nbd-run-detail">the model&#x27;s answer was cut off at max_tokens=' in bundle["text/html"]
    assert "what to do: the model's answer was cut off" in bundle["text/plain"]
    assert "thinking: still weighing <options>" in bundle["text/plain"]


def test_the_header_counts_in_words_a_person_reads() -> None:
    # "1 steps (0 replayed, 1 live) · 1 turns" was the header of every run's first turn.
    one = RunView("r", Status.RUNNING, steps=1, live=1, turns=1, scope="this session")
    assert "1 step (0 replayed, 1 live) · 1 turn · " in render_header(one)
    recorded = RunView("r", Status.INTERRUPTED, steps=1, turns=1, scope="all sessions")
    assert "1 step recorded · 1 turn · " in render_header(recorded)
    # A session whose only step was cut off ran it: its header says so, not "recorded".
    cut = RunView("r", Status.CRASHED, steps=1, turns=0, unfinished="1 cut off", scope="this session")
    assert "1 step (0 replayed, 0 live, 1 cut off) · 0 turns · " in render_header(cut)
    assert render_text(cut, []).startswith("run r: crashed · 1 step (0 replayed, 0 live, 1 cut off) · ")


def test_no_step_header_or_answer_carries_a_direction_override() -> None:
    # A tool call's input drawn reversed ("\u202e") would ask approval for what it does not run.
    tricky = "rm -rf \u202e/ moc.elpmaxe\u202c"
    step = StepView("tool:0:0", "tool", 1, "live", f"run_bash {tricky}", input={"command": tricky}, output=tricky, error=tricky)
    run = RunView(run_id="r\u2066x\u2069", status=Status.COMPLETED, text=f"Ran {tricky}", task=tricky)
    header = render_header(run)
    assert "rx" in header and not set("\u2066\u2069") & set(header), header
    for shown in (render_step(step), render_page(run, [step]), render_text(run, [step])):
        assert not set("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069") & set(shown), repr(shown)
        assert "moc.elpmaxe" in shown
