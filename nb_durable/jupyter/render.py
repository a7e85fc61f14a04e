"""The timeline as HTML and as text: the static form of the widget, escaped throughout.

Every string that came from a run (task, model text, tool input and output, errors) goes
through ``html.escape`` before it reaches markup (the final answer through
``agent.display.markdown.to_html``, which escapes first, then allows a few Markdown constructs), because ipywidgets' HTML widget and
notebook renderers insert it as raw HTML. Styles are scoped under ``.nbd-timeline`` and use
JupyterLab's theme variables with light fallbacks, so the timeline reads in Lab and
Notebook 7, light or dark, and in nbconvert or on GitHub (which drop the styles).

Stable CSS classes, one per step state: ``nbd-replayed``, ``nbd-live``, ``nbd-in_flight``,
``nbd-waiting`` (it asks a person), ``nbd-retrying``, ``nbd-failed``, ``nbd-cut_off``, ``nbd-in_doubt``, ``nbd-skipped``, ``nbd-recorded``; a row's
kind is its ``data-kind`` (``model``, ``tool``, ``approval``, ``settings`` for a recorded
settings change, ``user`` for a follow-up); one class per run status on the header's badge
(``nbd-status-completed``, ``nbd-status-truncated``, ... every outcome, plus ``queued``, ``running``
``waiting`` and ``in_doubt``). Past the saved detail budget (``budget``), a row in the middle of the run folds a
``nbd-left-out`` note in place of its detail, and a ``nbd-gap`` line stands where those rows
begin. A model step's thinking is a dimmed ``<details class="nbd-thinking">`` before
its answer, open while the step streams. A live header also carries ``nbd-gone``, shown
only under the front end's ``jupyter-widgets-disconnected`` class (the kernel died or
restarted), where it replaces the "running" badge with how to go on, and no badge pulses. The buttons
(``controls``) are styled here too: a compact bar, and answer buttons whose colours read in
either theme.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..agent.display.inert_text import html_text, terminal_text
from ..agent.display.markdown import to_html
from ..agent.display.progress import (
    SIMULATED_NOTE,
    cost_parts,
    describe_input,
    in_scope,
    run_cost_line,
)
from ..agent.display.step_ids import StepId
from ..agent.display.step_views import answered_by, retries_said, usage_text, wait_said
from ..agent.display.views import ALL_SESSIONS, RunView, StepView, many, state_word, tree_words
from ..agent.display.words import in_words_of
from ..core.status import Status
from .budget import DETAIL_BUDGET, gap, gap_note, row_note
from .style import STYLE

__all__ = [
    "STYLE",
    "StaticTimeline",
    "UNFINISHED",
    "render_header",
    "render_later",
    "render_page",
    "render_static",
    "render_step",
    "render_steps",
    "render_text",
    "resume_hint",
]

DETAIL_LIMIT = 20_000
"""Characters of a step's input or output shown in its details; longer ones are cut, saying so."""



def _cut(text: str, limit: int = DETAIL_LIMIT) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n… ({len(text) - limit:,} more characters not shown)"


def _one_line(text: str, width: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _label(view: StepView) -> str:
    if view.state == "retrying" and view.attempt:  # none: it waits on a shared limit, or moved to another model
        return f"retrying {view.attempt}/{view.max_attempts}"
    return state_word(view.state)


def _brief(view: StepView) -> str:
    if view.kind == "model":
        if view.state == "retrying":
            return view.error
        return view.output or (f"(stop: {view.stop_reason})" if view.stop_reason else "")
    if view.kind in ("settings", "user"):
        return view.output
    summary = describe_input(view.title, view.input) if view.input is not None else ""
    if view.output:
        summary += "  → " + ("error: " if view.is_error else "") + view.output
    return summary


def _brief_html(view: StepView) -> str:
    """The row's one-line summary; a model step with nothing said yet shows its thinking, dimmed."""
    brief = _brief(view)
    if brief or not view.thinking:
        return f'<span class="nbd-brief">{html_text(_one_line(brief))}</span>'
    thinking = " ".join(view.thinking.split())
    if view.state == "in_flight" and len(thinking) > 160:
        thinking = "…" + thinking[-159:]  # while it streams, the newest thought is the news
    return f'<span class="nbd-brief nbd-brief-thinking">{html_text(_one_line(thinking))}</span>'


def _thinking_html(view: StepView) -> str:
    if not view.thinking:
        return ""
    opened = " open" if view.state == "in_flight" else ""
    return (
        f'<details class="nbd-thinking"{opened}><summary>thinking · {len(view.thinking):,} characters</summary>'
        f"<pre>{html_text(_cut(view.thinking))}</pre></details>"
    )


def _meta(view: StepView, run_model: str) -> str:
    parts = [answered_by(view, run_model)] if answered_by(view, run_model) else []
    if view.usage is not None:
        parts.append(usage_text(view.usage))
    if view.ms is not None and view.state in ("live", "recorded"):
        parts.append(f"{view.ms / 1000:.2f}s")
    if retries_said(view):
        parts.append(retries_said(view))
    waiting = wait_said(view, drawn_once=True)  # no timer redraws a row: a countdown would stand still
    if waiting:
        parts.append(waiting)
    if view.decision:
        parts.append(view.decision)
    return " · ".join(parts)


def detail_size(view: StepView, inner: str = "") -> int:
    """Characters of a row's detail, as ``budget.gap`` weighs it: its texts as shown (each cut at
    ``DETAIL_LIMIT``), and the markup folded in, before escaping."""
    texts = [view.thinking, view.output, view.error]
    if view.input is not None:
        texts.append(json.dumps(view.input, ensure_ascii=False, indent=2))
    return sum(min(len(t), DETAIL_LIMIT) for t in texts if t) + len(inner)


def render_step(view: StepView, inner: str = "", *, left_out: str = "", run_model: str = "") -> str:
    """One step's row: a badge, a one-line summary, and the thinking, input and output folded;
    ``inner`` is markup (escaped already) folded in after them: a child run's own timeline.
    A row whose detail is ``left_out`` (``budget``) folds that note instead. ``run_model``: the
    run's own model, which its header names (a turn another model answered says which)."""
    # A long run's saved page holds thousands of rows: a row left out, or with no meta, spends
    # no markup on the element it does not need.
    if left_out:
        detail = f'<div class="nbd-detail nbd-left-out">{html_text(left_out)}</div>'
    else:
        detail = f'<div class="nbd-detail">{_detail_html(view, inner)}</div>'
    said = _meta(view, run_model)
    meta = f'<span class="nbd-meta">{html_text(said)}</span>' if said else ""
    # A model step streaming its thinking or answer is open, so the stream is seen as it comes.
    opened = " open" if view.state == "in_flight" and (view.thinking or view.output) and not left_out else ""
    return (
        f'<div class="nbd-step nbd-{html_text(view.state)}" data-kind="{html_text(view.kind)}" data-step="{html_text(view.step_id)}">'
        f"<details{opened}><summary>"
        f'<span class="nbd-badge">{html_text(_label(view))}</span>'
        f'<span class="nbd-title">{html_text(view.title)}</span>'
        f"{_brief_html(view)}"
        f"{meta}</summary>{detail}</details></div>"
    )


def _detail_html(view: StepView, inner: str) -> str:
    detail = [_thinking_html(view)]
    if view.input is not None:
        text = json.dumps(view.input, ensure_ascii=False, indent=2)
        detail.append(f'<div class="nbd-label">input</div><pre>{html_text(_cut(text))}</pre>')
    if view.output:
        cls = ' class="nbd-error"' if view.is_error else ""
        detail.append(f'<div class="nbd-label">output</div><pre{cls}>{html_text(_cut(view.output))}</pre>')
    if view.error and view.state in ("retrying", "failed", "cut_off"):
        attempts = f" (attempt {view.attempt}/{view.max_attempts})" if view.max_attempts and view.attempt else ""
        detail.append(f'<div class="nbd-label">error{attempts}</div><pre class="nbd-error">{html_text(_cut(view.error))}</pre>')
    return "".join(detail) + inner or '<div class="nbd-label">nothing yet</div>'


def _turn(view: StepView) -> int:
    return StepId.parse(view.step_id).turn


def _gap(views: list[StepView], inner: Mapping[str, str], run_id: str, budget: int | None) -> tuple[int, int, str]:
    """The rows whose detail is left out (``budget.gap``) and the note where they begin: one
    choice, so the HTML and the text leave out the same steps."""
    start, end = gap([detail_size(v, inner.get(v.step_id, "")) for v in views], budget)
    if start >= end:
        return start, end, ""
    return start, end, gap_note(run_id, end - start, _turn(views[start]), _turn(views[end - 1]))


def render_steps(
    views: Iterable[StepView],
    inner: Mapping[str, str] | None = None,
    *,
    run_id: str,
    budget: int | None = DETAIL_BUDGET,
    run_model: str = "",
) -> str:
    """Rows for many steps of run ``run_id``; ``inner`` folds markup into the rows of some steps,
    by step id. Past ``budget`` (``None``: no limit), the middle rows' detail is left out, saying
    so where they begin and in each. ``run_model`` as for ``render_step``."""
    inner = inner or {}
    views = list(views)
    start, end, note = _gap(views, inner, run_id, budget)
    rows = [render_step(v, inner.get(v.step_id, ""), run_model=run_model) for v in views[:start]]
    if note:
        rows.append(f'<div class="nbd-gap">{html_text(note)}</div>')
        rows += [render_step(v, left_out=row_note(run_id, _turn(v)), run_model=run_model) for v in views[start:end]]
    rows += [render_step(v, inner.get(v.step_id, ""), run_model=run_model) for v in views[end:]]
    return "".join(rows)


def _counts(run: RunView) -> str:
    """How many steps, and how this session met each: the parts add up to the whole, as the rows do."""
    if run.scope == ALL_SESSIONS:
        return f"{many(run.steps, 'step')} recorded"  # a run drawn from its log, not run
    settled = run.steps - run.replayed - run.live
    other = f", {run.unfinished}" if run.unfinished else f", {settled} in doubt or skipped" if settled else ""
    return f"{many(run.steps, 'step')} ({run.replayed} replayed, {run.live} live{other})"


def _elapsed(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f}s"
    return f"{int(seconds // 60)}m {int(seconds % 60):02d}s"


UNFINISHED = Status.STARTED
"""The status a live timeline's saved form shows: only a kernel that is still running knows more."""


GONE_NOTE = "the kernel running this stopped: run %load_ext nb_durable and %agent_resume {run_id} to go on"
"""What a live header says once its widget is disconnected (the kernel died or restarted)."""


def resume_hint(run: RunView) -> str:
    """What to do if the kernel running this run goes away, or '' for a run that has ended."""
    if not run.status.going and run.status != UNFINISHED:
        return ""
    return f"if the kernel restarts, run %load_ext nb_durable and %agent_resume {run.run_id}"


def _slug(status: str) -> str:
    return html_text(status.replace(" ", "_"))


def _money_html(run: RunView) -> str:
    """Paid, replay saved and caching saved, side by side; a simulated cost says so on hover."""
    cost = run.cost
    said = html_text(in_scope(run.scope)) + " · ".join(
        f"{label} <b>{tokens:,}</b> tokens ({html_text(money)})" if tokens is not None else f"{label} <b>{html_text(money)}</b>"
        for label, tokens, money in cost_parts(cost)
    )
    if run.children:
        said += f' · <span class="nbd-tree-cost">{html_text(tree_words(run))}</span>'
    if cost.simulated:
        return f'<span class="nbd-money nbd-simulated" title="{html_text(SIMULATED_NOTE)}">{said}</span>'
    return f'<span class="nbd-money">{said}</span>'


def _stopped(run: RunView) -> bool:
    """A run that stopped short for a named reason, whose header says what to do."""
    return run.status.stopped_short and bool(run.detail)


def render_header(run: RunView) -> str:
    """The run's header: id, status badge, counts, time, dollars paid vs saved, what to do."""
    demo = '<span class="nbd-demo">demo model, offline</span>' if run.model_kind == "demo" else ""
    where = f'<span class="nbd-facts nbd-where">log: {html_text(run.location)}</span>' if run.location else ""
    hint = f'<span class="nbd-hint">{html_text(resume_hint(run))}</span>' if resume_hint(run) else ""
    if run.status.going:
        # Shown only by the front end's own class for a widget whose kernel went away.
        hint += f'<span class="nbd-gone">{html_text(GONE_NOTE.format(run_id=run.run_id))}</span>'

    facts = f"{_counts(run)} · {many(run.turns, 'turn')} · {_elapsed(run.elapsed)}"
    detail = f'<span class="nbd-run-detail">{html_text(in_words_of("notebook", run.detail))}</span>' if _stopped(run) else ""
    return (
        f'<div class="nbd-header nbd-run-{_slug(run.status)}">'
        f'<span class="nbd-run-id">{html_text(run.run_id)}</span>'
        f'<span class="nbd-status nbd-status-{_slug(run.status)}">{html_text(state_word(run.status))}</span>'
        f'<span class="nbd-facts">{html_text(facts)}</span>'
        f"{_money_html(run)}{demo}{where}{hint}{detail}</div>"
    )


def render_answer(run: RunView) -> str:
    """The final answer (what there is of it, for a run that stopped short), or the error that stopped the run."""
    if run.error and run.status != "completed" and not _stopped(run):
        return f'<div class="nbd-answer"><div class="nbd-label">stopped</div><pre class="nbd-error">{html_text(in_words_of("notebook", run.error))}</pre></div>'
    if run.text:
        label = '<div class="nbd-label">answer so far</div>' if _stopped(run) else ""
        # The model's Markdown, escaped first, then an allow-list of markup (agent.display.markdown).
        return f'<div class="nbd-answer nbd-markdown">{label}{to_html(run.text)}</div>'
    return ""


def render_later(line: str) -> str:
    """The line a later cell's session of the run added under this display's header, or ''."""
    return f'<div class="nbd-later">{html_text(line)}</div>' if line else ""


def render_page(
    run: RunView,
    steps: Iterable[StepView],
    *,
    later: str = "",
    inner: Mapping[str, str] | None = None,
    budget: int | None = DETAIL_BUDGET,
) -> str:
    """The whole timeline as one self-contained HTML fragment (the widget's static form);
    ``later`` is what a later cell's session did (``displays``), ``inner`` and ``budget`` as for
    ``render_steps``."""
    return (
        f'{STYLE}<div class="nbd-timeline">{render_header(run)}{render_later(later)}'
        f"<div>{render_steps(steps, inner, run_id=run.run_id, budget=budget, run_model=run.model)}</div>{render_answer(run)}</div>"
    )


def render_text(
    run: RunView,
    steps: Iterable[StepView],
    *,
    later: str = "",
    inner: Mapping[str, str] | None = None,
    budget: int | None = DETAIL_BUDGET,
) -> str:
    """The timeline as plain text, for consoles and text/plain: a line per step, and the thinking
    of the steps whose detail the HTML keeps (``inner`` and ``budget`` as for ``render_page``)."""
    views = list(steps)
    start, end, note = _gap(views, inner or {}, run.run_id, budget)
    lines = [f"run {run.run_id}: {state_word(run.status)} · {_counts(run)} · {run_cost_line(run)}"]
    if later:
        lines.append(later)
    if run.location:
        lines.append(f"log: {run.location}")
    if resume_hint(run):
        lines.append(resume_hint(run))
    if _stopped(run):
        lines.append(f"what to do: {in_words_of('notebook', run.detail)}")
    for at, view in enumerate(views):
        if at == start and note:
            lines.append(f"  … {note}")
        # An approval's line ends with who decided and the reason they gave: never cut.
        by = answered_by(view, run.model)
        brief = ", ".join(filter(None, (f"({by}) {_brief(view)}" if by else _brief(view), wait_said(view, drawn_once=True))))
        lines.append(f"  {_label(view):<13} {view.title:<18} {_one_line(brief, 400 if view.kind == 'approval' else 80)}")
        if view.decision:
            lines.append(f"  {'':<13} {'':<18} decided: {view.decision}")
        if view.thinking and not start <= at < end:
            lines.append(f"  {'':<13} {'':<18} thinking: {_one_line(view.thinking, 80)}")
    if run.error and run.status != "completed" and not _stopped(run):
        lines.append(f"stopped: {in_words_of('notebook', run.error)}")
    elif run.text:
        lines.append("")
        lines.append(run.text)
    # Plain text reaches consoles, and renderers that obey escape codes: what a run said stays, inert.
    return terminal_text("\n".join(lines).replace("\r\n", "\n"))


@dataclass(frozen=True)
class StaticTimeline:
    """A timeline drawn once: HTML and text, no widget (a finished run, ``%agent_show``)."""

    html: str
    text: str

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, str]:
        return {"text/html": self.html, "text/plain": self.text}


def render_static(
    run: RunView,
    steps: Iterable[StepView],
    *,
    later: str = "",
    inner: Mapping[str, str] | None = None,
    budget: int | None = DETAIL_BUDGET,
) -> StaticTimeline:
    """Both saved forms of a timeline, leaving out the same steps' detail (as ``render_page``)."""
    views = list(steps)
    return StaticTimeline(
        render_page(run, views, later=later, inner=inner, budget=budget),
        render_text(run, views, later=later, inner=inner, budget=budget),
    )
