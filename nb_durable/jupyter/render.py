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
``waiting`` and ``in_doubt``). A model step's thinking is a dimmed ``<details class="nbd-thinking">`` before
its answer, open while the step streams. A live header also carries ``nbd-gone``, shown
only under the front end's ``jupyter-widgets-disconnected`` class (the kernel died or
restarted), where it replaces the "running" badge with how to go on, and no badge pulses. The buttons
(``controls``) are styled here too: a compact bar, and answer buttons whose colours read in
either theme.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from ..agent.display.inert_text import html_text, terminal_text
from ..agent.display.markdown import to_html
from ..agent.display.progress import (
    SIMULATED_NOTE,
    cost_line,
    cost_parts,
    describe_input,
    in_scope,
    in_words_of,
    usage_text,
)
from ..agent.display.views import ALL_SESSIONS, RunView, StepView, state_word
from ..core.status import Status

__all__ = [
    "STYLE",
    "UNFINISHED",
    "render_header",
    "render_later",
    "render_page",
    "render_step",
    "render_steps",
    "render_text",
    "resume_hint",
]

DETAIL_LIMIT = 20_000
"""Characters of a step's input or output shown in its details; longer ones are cut, saying so."""

STYLE = """<style>
.nbd-timeline{font-family:var(--jp-ui-font-family,system-ui,sans-serif);font-size:13px;line-height:1.4;
 color:var(--jp-ui-font-color1,#1f2328);max-width:100%;min-width:0;}
.nbd-timeline *{box-sizing:border-box;}
.nbd-timeline .jupyter-widgets{margin:0;min-width:0;}
.nbd-timeline .widget-html-content,.nbd-timeline .jupyter-widget-html-content{line-height:1.4;min-width:0;}
.nbd-timeline .widget-html:has(>.widget-html-content:empty),.nbd-timeline .widget-vbox:empty{display:none;}
.nbd-timeline .jupyter-widgets-disconnected::before{display:none;}
.nbd-timeline .nbd-style{display:none;}
.nbd-gone{display:none;}
.jupyter-widgets-disconnected .nbd-gone{display:inline;font-weight:600;}
.jupyter-widgets-disconnected .nbd-run-running .nbd-status,.jupyter-widgets-disconnected .nbd-run-running .nbd-hint,
.jupyter-widgets-disconnected .nbd-run-waiting .nbd-status,.jupyter-widgets-disconnected .nbd-run-waiting .nbd-hint{display:none;}
.nbd-header{display:flex;flex-wrap:wrap;gap:4px 14px;align-items:baseline;padding:6px 8px;margin-bottom:4px;
 border:1px solid var(--jp-border-color2,#d0d7de);border-radius:6px;background:var(--jp-layout-color2,#f6f8fa);}
.nbd-run-id{font-weight:600;font-family:var(--jp-code-font-family,monospace);}
.nbd-facts,.nbd-money{color:var(--jp-ui-font-color2,#57606a);}
.nbd-money b{color:var(--jp-ui-font-color1,#1f2328);font-weight:600;}
.nbd-demo{font-size:11px;padding:0 6px;border-radius:8px;background:rgba(130,80,223,.15);color:#6639ba;
 color:color-mix(in srgb,#a371f7 62%,var(--jp-ui-font-color1,#1f2328));}
.nbd-step{border-left:3px solid var(--jp-border-color2,#d0d7de);margin:1px 0;padding:1px 0 1px 6px;min-width:0;}
.nbd-step summary{cursor:pointer;list-style:none;display:flex;gap:8px;align-items:baseline;min-width:0;overflow:hidden;white-space:nowrap;}
.nbd-step summary::-webkit-details-marker{display:none;}
.nbd-step summary::before{content:"\\25B8";color:var(--jp-ui-font-color2,#57606a);}
.nbd-step details[open] summary::before{content:"\\25BE";}
.nbd-badge{flex:none;min-width:74px;text-align:center;font-size:11px;font-weight:600;line-height:16px;padding:0 6px;border-radius:8px;}
.nbd-title{flex:none;font-weight:600;font-family:var(--jp-code-font-family,monospace);}
.nbd-brief{flex:1 1 auto;min-width:0;overflow:hidden;text-overflow:ellipsis;color:var(--jp-ui-font-color2,#57606a);}
.nbd-meta{flex:none;color:var(--jp-ui-font-color2,#57606a);font-size:11px;}
.nbd-detail{margin:4px 0 6px 16px;min-width:0;}
.nbd-detail .nbd-label,.nbd-answer .nbd-label{font-size:11px;text-transform:uppercase;letter-spacing:.04em;color:var(--jp-ui-font-color2,#57606a);}
.nbd-timeline .nbd-detail pre,.nbd-timeline .nbd-answer pre{margin:2px 0 6px;padding:6px 8px;max-height:24em;overflow:auto;white-space:pre-wrap;
 overflow-wrap:anywhere;word-break:break-word;font-family:var(--jp-code-font-family,monospace);font-size:12px;
 background:var(--jp-layout-color2,#f6f8fa);color:var(--jp-content-font-color1,#1f2328);border-radius:4px;}
.nbd-answer{margin-top:6px;}
.nbd-markdown p,.nbd-markdown ul,.nbd-markdown ol{margin:4px 0;} .nbd-markdown code{font-family:var(--jp-code-font-family,monospace);}
.nbd-timeline .nbd-error{color:#b42318;color:color-mix(in srgb,#f85149 62%,var(--jp-ui-font-color1,#1f2328));}
.nbd-replayed,.nbd-recorded{border-left-color:#8c959f;}
.nbd-replayed .nbd-badge,.nbd-recorded .nbd-badge{background:rgba(110,119,129,.18);color:var(--jp-ui-font-color1,#1f2328);}
.nbd-live{border-left-color:#2da44e;} .nbd-live .nbd-badge{background:rgba(45,164,78,.18);color:#116329;
 color:color-mix(in srgb,#2da44e 62%,var(--jp-ui-font-color1,#1f2328));}
.nbd-in_flight{border-left-color:#2f81f7;} .nbd-in_flight .nbd-badge{background:rgba(47,129,247,.18);color:#0550ae;
 color:color-mix(in srgb,#2f81f7 62%,var(--jp-ui-font-color1,#1f2328));animation:nbd-pulse 1.2s ease-in-out infinite;}
.nbd-waiting{border-left-color:#bc4c00;} .nbd-waiting .nbd-badge,.nbd-status-waiting,.nbd-run-waiting .nbd-status{background:rgba(219,109,40,.22);
 color:#953800;color:color-mix(in srgb,#db6d28 35%,var(--jp-ui-font-color1,#1f2328));}
.nbd-retrying{border-left-color:#d29922;} .nbd-retrying .nbd-badge{background:rgba(210,153,34,.2);color:#7d4e00;
 color:color-mix(in srgb,#d29922 55%,var(--jp-ui-font-color1,#1f2328));}
.nbd-failed{border-left-color:#f85149;} .nbd-failed .nbd-badge{background:rgba(248,81,73,.18);color:#a40e26;
 color:color-mix(in srgb,#f85149 62%,var(--jp-ui-font-color1,#1f2328));}
.nbd-in_doubt,.nbd-skipped,.nbd-cut_off{border-left-color:#a371f7;}
.nbd-in_doubt .nbd-badge,.nbd-skipped .nbd-badge,.nbd-cut_off .nbd-badge{background:rgba(163,113,247,.18);color:#6639ba;
 color:color-mix(in srgb,#a371f7 62%,var(--jp-ui-font-color1,#1f2328));}
.nbd-status{flex:none;font-size:11px;font-weight:600;line-height:16px;padding:0 8px;border-radius:8px;
 background:rgba(110,119,129,.18);}
.nbd-status-completed,.nbd-run-completed .nbd-status{background:rgba(45,164,78,.18);color:#116329;
 color:color-mix(in srgb,#2da44e 35%,var(--jp-ui-font-color1,#1f2328));}
.nbd-status-failed,.nbd-run-failed .nbd-status,.nbd-status-crashed,.nbd-run-crashed .nbd-status{background:rgba(248,81,73,.18);
 color:#a40e26;color:color-mix(in srgb,#f85149 35%,var(--jp-ui-font-color1,#1f2328));}
.nbd-status-in_doubt,.nbd-run-in_doubt .nbd-status{background:rgba(163,113,247,.18);color:#6639ba;
 color:color-mix(in srgb,#a371f7 35%,var(--jp-ui-font-color1,#1f2328));}
.nbd-status-running,.nbd-run-running .nbd-status,.nbd-status-started,.nbd-run-started .nbd-status{background:rgba(47,129,247,.18);color:#0550ae;
 color:color-mix(in srgb,#2f81f7 35%,var(--jp-ui-font-color1,#1f2328));}
.nbd-status-queued,.nbd-run-queued .nbd-status{background:rgba(110,119,129,.14);color:#57606a;
 border:1px dashed rgba(110,119,129,.5);}
.nbd-status-interrupted,.nbd-run-interrupted .nbd-status{background:rgba(210,153,34,.2);color:#7d4e00;
 color:color-mix(in srgb,#d29922 35%,var(--jp-ui-font-color1,#1f2328));}
.nbd-status-truncated,.nbd-run-truncated .nbd-status{background:rgba(219,109,40,.2);color:#953800;
 color:color-mix(in srgb,#db6d28 35%,var(--jp-ui-font-color1,#1f2328));}
.nbd-status-refused,.nbd-run-refused .nbd-status,.nbd-status-unknown_stop,.nbd-run-unknown_stop .nbd-status{background:rgba(219,97,162,.2);color:#99286e;
 color:color-mix(in srgb,#db61a2 35%,var(--jp-ui-font-color1,#1f2328));}
.nbd-status-context_full,.nbd-run-context_full .nbd-status{background:rgba(27,124,131,.2);color:#0e5e63;
 color:color-mix(in srgb,#2a9ea6 35%,var(--jp-ui-font-color1,#1f2328));}
.nbd-status-budget_exhausted,.nbd-run-budget_exhausted .nbd-status{background:rgba(154,103,0,.22);color:#6a4700;
 color:color-mix(in srgb,#bf8700 35%,var(--jp-ui-font-color1,#1f2328));}
.nbd-status-bad_tool_input,.nbd-run-bad_tool_input .nbd-status{background:rgba(130,80,223,.18);color:#6639ba;
 color:color-mix(in srgb,#8250df 35%,var(--jp-ui-font-color1,#1f2328));}
.nbd-run-crashed .nbd-status{font-weight:700;}
.nbd-run-detail{flex:1 1 100%;color:var(--jp-ui-font-color1,#1f2328);}
.nbd-simulated{text-decoration:underline dotted;cursor:help;}
.nbd-timeline details.nbd-thinking{margin:2px 0 6px;}
.nbd-timeline details.nbd-thinking summary{cursor:pointer;font-size:11px;font-style:italic;color:var(--jp-ui-font-color2,#57606a);}
.nbd-timeline details.nbd-thinking pre{font-style:italic;color:var(--jp-ui-font-color2,#57606a);background:transparent;
 border-left:2px solid var(--jp-border-color2,#d0d7de);border-radius:0;}
.nbd-step details.nbd-thinking>summary::before{content:"\\25B8";}
.nbd-step details.nbd-thinking[open]>summary::before{content:"\\25BE";}
.nbd-brief-thinking{font-style:italic;}
.nbd-step[data-kind=settings]{border-left-style:dashed;}
.nbd-step[data-kind=user]{border-left-style:double;border-left-width:4px;}
.nbd-step[data-kind=user] .nbd-brief{color:var(--jp-ui-font-color1,#1f2328);}
.nbd-timeline:has(.nbd-header:not(.nbd-run-running):not(.nbd-run-started)) .nbd-badge,.jupyter-widgets-disconnected .nbd-badge{animation:none;}
.nbd-later{margin:0 0 4px;padding:2px 8px;font-size:12px;border-left:3px solid #2f81f7;color:var(--jp-ui-font-color1,#1f2328);}
.nbd-hint{flex-basis:100%;font-size:12px;color:var(--jp-ui-font-color2,#57606a);}
.nbd-runs td:first-child{white-space:nowrap;}
.nbd-timeline .nbd-bar,.nbd-timeline .nbd-question{flex-wrap:wrap;gap:4px 6px;align-items:center;margin:2px 0 4px;}
.nbd-timeline .nbd-question{margin-left:9px;}
.nbd-timeline .jupyter-button.nbd-button{width:auto;height:24px;line-height:22px;padding:0 10px;font-size:12px;flex:none;}
.nbd-timeline .nbd-fork-at,.nbd-timeline .nbd-reason{flex:none;height:24px;}
.nbd-timeline .nbd-fork-at input,.nbd-timeline .nbd-reason input{height:24px;}
.nbd-timeline .nbd-question .mod-success{background:#1a7f37;color:#fff;}
.nbd-timeline .nbd-question .mod-danger{background:#cf222e;color:#fff;}
.nbd-timeline .nbd-question .mod-warning{background:#bc4c00;color:#fff;}
.nbd-timeline .nbd-bar-note{flex:1 1 240px;font-size:12px;color:var(--jp-ui-font-color2,#57606a);}
.nbd-timeline .nbd-forks>.nbd-timeline,.nbd-timeline .nbd-child{margin:8px 0 0 12px;padding-left:8px;border-left:2px solid var(--jp-border-color2,#d0d7de);}
@keyframes nbd-pulse{50%{opacity:.55;}}
</style>"""

def _cut(text: str, limit: int = DETAIL_LIMIT) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n… ({len(text) - limit:,} more characters not shown)"


def _one_line(text: str, width: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _label(view: StepView) -> str:
    if view.state == "retrying":
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


def _meta(view: StepView) -> str:
    parts = []
    if view.usage is not None:
        parts.append(usage_text(view.usage))
    if view.ms is not None and view.state in ("live", "recorded"):
        parts.append(f"{view.ms / 1000:.2f}s")
    if view.attempt > 1 and view.state in ("live", "replayed", "recorded"):
        retries = view.attempt - 1
        parts.append(f"after {retries} retr{'y' if retries == 1 else 'ies'}")
    if view.decision:
        parts.append(view.decision)
    return " · ".join(parts)


def render_step(view: StepView, inner: str = "") -> str:
    """One step's row: a badge, a one-line summary, and the thinking, input and output folded;
    ``inner`` is markup (escaped already) folded in after them: a child run's own timeline."""
    detail = [_thinking_html(view)]
    if view.input is not None:
        text = json.dumps(view.input, ensure_ascii=False, indent=2)
        detail.append(f'<div class="nbd-label">input</div><pre>{html_text(_cut(text))}</pre>')
    if view.output:
        cls = ' class="nbd-error"' if view.is_error else ""
        detail.append(f'<div class="nbd-label">output</div><pre{cls}>{html_text(_cut(view.output))}</pre>')
    if view.error and view.state in ("retrying", "failed", "cut_off"):
        attempts = f" (attempt {view.attempt}/{view.max_attempts})" if view.max_attempts else ""
        detail.append(f'<div class="nbd-label">error{attempts}</div><pre class="nbd-error">{html_text(_cut(view.error))}</pre>')
    body = "".join(detail) + inner or '<div class="nbd-label">nothing yet</div>'
    # A model step streaming its thinking or answer is open, so the stream is seen as it comes.
    opened = " open" if view.state == "in_flight" and (view.thinking or view.output) else ""
    return (
        f'<div class="nbd-step nbd-{html_text(view.state)}" data-kind="{html_text(view.kind)}" data-step="{html_text(view.step_id)}">'
        f"<details{opened}><summary>"
        f'<span class="nbd-badge">{html_text(_label(view))}</span>'
        f'<span class="nbd-title">{html_text(view.title)}</span>'
        f"{_brief_html(view)}"
        f'<span class="nbd-meta">{html_text(_meta(view))}</span>'
        f'</summary><div class="nbd-detail">{body}</div></details></div>'
    )


def render_steps(views: Iterable[StepView], inner: Mapping[str, str] | None = None) -> str:
    """Rows for many steps; ``inner`` folds markup into the rows of some steps, by step id."""
    inner = inner or {}
    return "".join(render_step(v, inner.get(v.step_id, "")) for v in views)


def _many(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _counts(run: RunView) -> str:
    """How many steps, and how this session met each: the parts add up to the whole, as the rows do."""
    if run.scope == ALL_SESSIONS:
        return f"{_many(run.steps, 'step')} recorded"  # a run drawn from its log, not run
    settled = run.steps - run.replayed - run.live
    other = f", {run.unfinished}" if run.unfinished else f", {settled} in doubt or skipped" if settled else ""
    return f"{_many(run.steps, 'step')} ({run.replayed} replayed, {run.live} live{other})"


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

    facts = f"{_counts(run)} · {_many(run.turns, 'turn')} · {_elapsed(run.elapsed)}"
    detail = f'<span class="nbd-run-detail">{html_text(run.detail)}</span>' if _stopped(run) else ""
    return (
        f'<div class="nbd-header nbd-run-{_slug(run.status)}">'
        f'<span class="nbd-run-id">{html_text(run.run_id)}</span>'
        f'<span class="nbd-status nbd-status-{_slug(run.status)}">{html_text(run.status.replace("_", " "))}</span>'
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


def render_page(run: RunView, steps: Iterable[StepView], *, later: str = "", inner: Mapping[str, str] | None = None) -> str:
    """The whole timeline as one self-contained HTML fragment (the widget's static form);
    ``later`` is what a later cell's session did (``displays``), ``inner`` as for ``render_steps``."""
    return (
        f'{STYLE}<div class="nbd-timeline">{render_header(run)}{render_later(later)}'
        f"<div>{render_steps(steps, inner)}</div>{render_answer(run)}</div>"
    )


def render_text(run: RunView, steps: Iterable[StepView], *, later: str = "") -> str:
    """The timeline as plain text, for consoles and text/plain."""
    lines = [f"run {run.run_id}: {run.status.replace('_', ' ')} · {_counts(run)} · {cost_line(run.cost, run.scope)}"]
    if later:
        lines.append(later)
    if run.location:
        lines.append(f"log: {run.location}")
    if resume_hint(run):
        lines.append(resume_hint(run))
    if _stopped(run):
        lines.append(f"what to do: {run.detail}")
    for view in steps:
        # An approval's line ends with who decided and the reason they gave: never cut.
        lines.append(f"  {_label(view):<13} {view.title:<18} {_one_line(_brief(view), 400 if view.kind == 'approval' else 80)}")
        if view.decision:
            lines.append(f"  {'':<13} {'':<18} decided: {view.decision}")
        if view.thinking:
            lines.append(f"  {'':<13} {'':<18} thinking: {_one_line(view.thinking, 80)}")
    if run.error and run.status != "completed" and not _stopped(run):
        lines.append(f"stopped: {in_words_of('notebook', run.error)}")
    elif run.text:
        lines.append("")
        lines.append(run.text)
    # Plain text reaches consoles, and renderers that obey escape codes: what a run said stays, inert.
    return terminal_text("\n".join(lines).replace("\r\n", "\n"))
