"""The timeline as HTML and as text: the static form of the widget, escaped throughout.

Every string that came from a run (task, model text, tool input and output, errors) goes
through ``html.escape`` before it reaches markup, because ipywidgets' HTML widget and
notebook renderers insert it as raw HTML. Styles are scoped under ``.nbd-timeline`` and use
JupyterLab's theme variables with light fallbacks, so the timeline reads in Lab and
Notebook 7, light or dark, and in nbconvert or on GitHub (which drop the styles).

Stable CSS classes, one per state: ``nbd-replayed``, ``nbd-live``, ``nbd-in_flight``,
``nbd-retrying``, ``nbd-failed``, ``nbd-in_doubt``, ``nbd-skipped``, ``nbd-recorded``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from html import escape

from ..agent.progress import describe_input, in_words_of
from ..agent.views import RunView, StepView

__all__ = [
    "STYLE",
    "UNFINISHED",
    "render_header",
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
.nbd-timeline .nbd-error{color:#b42318;color:color-mix(in srgb,#f85149 62%,var(--jp-ui-font-color1,#1f2328));}
.nbd-replayed,.nbd-recorded{border-left-color:#8c959f;}
.nbd-replayed .nbd-badge,.nbd-recorded .nbd-badge{background:rgba(110,119,129,.18);color:var(--jp-ui-font-color1,#1f2328);}
.nbd-live{border-left-color:#2da44e;} .nbd-live .nbd-badge{background:rgba(45,164,78,.18);color:#116329;
 color:color-mix(in srgb,#2da44e 62%,var(--jp-ui-font-color1,#1f2328));}
.nbd-in_flight{border-left-color:#2f81f7;} .nbd-in_flight .nbd-badge{background:rgba(47,129,247,.18);color:#0550ae;
 color:color-mix(in srgb,#2f81f7 62%,var(--jp-ui-font-color1,#1f2328));animation:nbd-pulse 1.2s ease-in-out infinite;}
.nbd-retrying{border-left-color:#d29922;} .nbd-retrying .nbd-badge{background:rgba(210,153,34,.2);color:#7d4e00;
 color:color-mix(in srgb,#d29922 55%,var(--jp-ui-font-color1,#1f2328));}
.nbd-failed{border-left-color:#f85149;} .nbd-failed .nbd-badge{background:rgba(248,81,73,.18);color:#a40e26;
 color:color-mix(in srgb,#f85149 62%,var(--jp-ui-font-color1,#1f2328));}
.nbd-in_doubt,.nbd-skipped{border-left-color:#a371f7;}
.nbd-in_doubt .nbd-badge,.nbd-skipped .nbd-badge{background:rgba(163,113,247,.18);color:#6639ba;
 color:color-mix(in srgb,#a371f7 62%,var(--jp-ui-font-color1,#1f2328));}
.nbd-run-completed .nbd-status{color:#116329;color:color-mix(in srgb,#2da44e 62%,var(--jp-ui-font-color1,#1f2328));}
.nbd-run-failed .nbd-status,.nbd-run-in_doubt .nbd-status,.nbd-run-crashed .nbd-status{color:#a40e26;
 color:color-mix(in srgb,#f85149 62%,var(--jp-ui-font-color1,#1f2328));}
.nbd-run-crashed .nbd-status{font-weight:600;}
.nbd-run-running .nbd-status{color:#0550ae;color:color-mix(in srgb,#2f81f7 62%,var(--jp-ui-font-color1,#1f2328));}
.nbd-hint{flex-basis:100%;font-size:12px;color:var(--jp-ui-font-color2,#57606a);}
.nbd-runs td:first-child{white-space:nowrap;}
.nbd-run-interrupted .nbd-status{color:#7d4e00;color:color-mix(in srgb,#d29922 55%,var(--jp-ui-font-color1,#1f2328));}
.nbd-timeline:has(.nbd-run-completed,.nbd-run-failed,.nbd-run-crashed,.nbd-run-interrupted,.nbd-run-in_doubt) .nbd-badge{animation:none;}
@keyframes nbd-pulse{50%{opacity:.55;}}
</style>"""

_LABELS = {
    "replayed": "replayed",
    "live": "live",
    "in_flight": "in flight",
    "retrying": "retrying",
    "failed": "failed",
    "in_doubt": "in doubt",
    "skipped": "skipped",
    "recorded": "recorded",
}


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
    return _LABELS.get(view.state, view.state)


def _brief(view: StepView) -> str:
    if view.kind == "model":
        if view.state == "retrying":
            return view.error
        return view.output or (f"(stop: {view.stop_reason})" if view.stop_reason else "")
    summary = describe_input(view.title, view.input) if view.input is not None else ""
    if view.output:
        summary += "  → " + ("error: " if view.is_error else "") + view.output
    return summary


def _meta(view: StepView) -> str:
    parts = []
    if view.usage is not None:
        parts.append(f"{view.usage.input_tokens:,} in / {view.usage.output_tokens:,} out")
    if view.ms is not None and view.state in ("live", "recorded"):
        parts.append(f"{view.ms / 1000:.2f}s")
    if view.attempt > 1 and view.state in ("live", "replayed", "recorded"):
        retries = view.attempt - 1
        parts.append(f"after {retries} retr{'y' if retries == 1 else 'ies'}")
    if view.decision:
        parts.append(view.decision)
    return " · ".join(parts)


def render_step(view: StepView) -> str:
    """One step's row: a badge, a one-line summary, and the full input and output folded."""
    detail = []
    if view.input is not None:
        text = json.dumps(view.input, ensure_ascii=False, indent=2)
        detail.append(f'<div class="nbd-label">input</div><pre>{escape(_cut(text))}</pre>')
    if view.output:
        cls = ' class="nbd-error"' if view.is_error else ""
        detail.append(f'<div class="nbd-label">output</div><pre{cls}>{escape(_cut(view.output))}</pre>')
    if view.error and view.state in ("retrying", "failed"):
        attempts = f" (attempt {view.attempt}/{view.max_attempts})" if view.max_attempts else ""
        detail.append(f'<div class="nbd-label">error{attempts}</div><pre class="nbd-error">{escape(_cut(view.error))}</pre>')
    body = "".join(detail) or '<div class="nbd-label">nothing yet</div>'
    return (
        f'<div class="nbd-step nbd-{escape(view.state)}" data-step="{escape(view.step_id)}">'
        f"<details><summary>"
        f'<span class="nbd-badge">{escape(_label(view))}</span>'
        f'<span class="nbd-title">{escape(view.title)}</span>'
        f'<span class="nbd-brief">{escape(_one_line(_brief(view)))}</span>'
        f'<span class="nbd-meta">{escape(_meta(view))}</span>'
        f'</summary><div class="nbd-detail">{body}</div></details></div>'
    )


def render_steps(views: Iterable[StepView]) -> str:
    """Rows for many steps."""
    return "".join(render_step(v) for v in views)


def _counts(run: RunView) -> str:
    if run.steps and not run.replayed and not run.live:
        return f"{run.steps} steps recorded"  # a run drawn from its log, not run
    return f"{run.steps} steps ({run.replayed} replayed, {run.live} live)"


def _elapsed(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f}s"
    return f"{int(seconds // 60)}m {int(seconds % 60):02d}s"


UNFINISHED = "started"
"""The status a live timeline's saved form shows: only a kernel that is still running knows more."""


def resume_hint(run: RunView) -> str:
    """What to do if the kernel running this run goes away, or '' for a run that has ended."""
    if run.status not in ("running", UNFINISHED):
        return ""
    return f"if the kernel restarts, run %load_ext nb_durable and %agent_resume {run.run_id}"


def render_header(run: RunView) -> str:
    """The run's header: id, status, counts, time, tokens and dollars paid vs saved, its log."""
    cost = run.cost
    demo = '<span class="nbd-demo">demo model, offline</span>' if run.model_kind == "demo" else ""
    where = f'<span class="nbd-facts nbd-where">log: {escape(run.location)}</span>' if run.location else ""
    hint = f'<span class="nbd-hint">{escape(resume_hint(run))}</span>' if resume_hint(run) else ""
    facts = f"{_counts(run)} · {run.turns} turns · {_elapsed(run.elapsed)}"
    money = (
        f"paid <b>{cost.paid.total:,}</b> tokens (${cost.paid_dollars:.4f}) · "
        f"replay saved <b>{cost.saved.total:,}</b> tokens (${cost.saved_dollars:.4f})"
    )
    return (
        f'<div class="nbd-header nbd-run-{escape(run.status)}">'
        f'<span class="nbd-run-id">{escape(run.run_id)}</span>'
        f'<span class="nbd-status">{escape(run.status.replace("_", " "))}</span>'
        f'<span class="nbd-facts">{escape(facts)}</span>'
        f'<span class="nbd-money">{money}</span>{demo}{where}{hint}</div>'
    )


def render_answer(run: RunView) -> str:
    """The final answer, or the error that stopped the run."""
    if run.error and run.status != "completed":
        return f'<div class="nbd-answer"><div class="nbd-label">stopped</div><pre class="nbd-error">{escape(in_words_of("notebook", run.error))}</pre></div>'
    if run.text:
        return f'<div class="nbd-answer"><pre>{escape(run.text)}</pre></div>'
    return ""


def render_page(run: RunView, steps: Iterable[StepView]) -> str:
    """The whole timeline as one self-contained HTML fragment (the widget's static form)."""
    return (
        f'{STYLE}<div class="nbd-timeline">{render_header(run)}'
        f"<div>{render_steps(steps)}</div>{render_answer(run)}</div>"
    )


def render_text(run: RunView, steps: Iterable[StepView]) -> str:
    """The timeline as plain text, for consoles and text/plain."""
    cost = run.cost
    lines = [
        f"run {run.run_id}: {run.status.replace('_', ' ')} · {_counts(run)} · paid {cost.paid.total:,} "
        f"tokens (${cost.paid_dollars:.4f}) · replay saved "
        f"{cost.saved.total:,} tokens (${cost.saved_dollars:.4f})"
    ]
    if run.location:
        lines.append(f"log: {run.location}")
    if resume_hint(run):
        lines.append(resume_hint(run))
    for view in steps:
        lines.append(f"  {_label(view):<13} {view.title:<18} {_one_line(_brief(view), 80)}")
    if run.error and run.status != "completed":
        lines.append(f"stopped: {in_words_of('notebook', run.error)}")
    elif run.text:
        lines.append("")
        lines.append(run.text)
    return "\n".join(lines)
