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

from ..agent.observe import RunView, StepView
from ..agent.progress import describe_input

__all__ = ["STYLE", "render_header", "render_page", "render_step", "render_steps", "render_text"]

DETAIL_LIMIT = 20_000
"""Characters of a step's input or output shown in its details; longer ones are cut, saying so."""

STYLE = """<style>
.nbd-timeline{font-family:var(--jp-ui-font-family,system-ui,sans-serif);font-size:13px;line-height:1.4;
 color:var(--jp-ui-font-color1,#1f2328);max-width:100%;}
.nbd-timeline *{box-sizing:border-box;}
.nbd-header{display:flex;flex-wrap:wrap;gap:4px 14px;align-items:baseline;padding:6px 8px;margin-bottom:4px;
 border:1px solid var(--jp-border-color2,#d0d7de);border-radius:6px;background:var(--jp-layout-color2,#f6f8fa);}
.nbd-run-id{font-weight:600;font-family:var(--jp-code-font-family,monospace);}
.nbd-facts,.nbd-money{color:var(--jp-ui-font-color2,#57606a);}
.nbd-money b{color:var(--jp-ui-font-color1,#1f2328);font-weight:600;}
.nbd-demo{font-size:11px;padding:0 6px;border-radius:8px;background:rgba(130,80,223,.15);color:#8250df;}
.nbd-step{border-left:3px solid var(--jp-border-color2,#d0d7de);margin:1px 0;padding:1px 0 1px 6px;}
.nbd-step summary{cursor:pointer;list-style:none;display:flex;gap:8px;align-items:baseline;overflow:hidden;white-space:nowrap;}
.nbd-step summary::-webkit-details-marker{display:none;}
.nbd-step summary::before{content:"\\25B8";color:var(--jp-ui-font-color3,#8c959f);}
.nbd-step details[open] summary::before{content:"\\25BE";}
.nbd-badge{flex:none;min-width:74px;text-align:center;font-size:11px;font-weight:600;padding:0 6px;border-radius:8px;}
.nbd-title{flex:none;font-weight:600;font-family:var(--jp-code-font-family,monospace);}
.nbd-brief{flex:1 1 auto;min-width:0;overflow:hidden;text-overflow:ellipsis;color:var(--jp-ui-font-color2,#57606a);}
.nbd-meta{flex:none;color:var(--jp-ui-font-color3,#8c959f);font-size:11px;}
.nbd-detail{margin:4px 0 6px 16px;}
.nbd-detail .nbd-label{font-size:11px;text-transform:uppercase;letter-spacing:.04em;color:var(--jp-ui-font-color3,#8c959f);}
.nbd-detail pre,.nbd-answer pre{margin:2px 0 6px;padding:6px 8px;max-height:24em;overflow:auto;white-space:pre-wrap;
 word-break:break-word;font-family:var(--jp-code-font-family,monospace);font-size:12px;
 background:var(--jp-layout-color2,#f6f8fa);color:var(--jp-content-font-color1,#1f2328);border-radius:4px;}
.nbd-answer{margin-top:6px;}
.nbd-error{color:#cf222e;}
.nbd-replayed{border-left-color:#6e7781;} .nbd-replayed .nbd-badge{background:rgba(110,119,129,.18);color:var(--jp-ui-font-color2,#57606a);}
.nbd-recorded{border-left-color:#6e7781;} .nbd-recorded .nbd-badge{background:rgba(110,119,129,.18);color:var(--jp-ui-font-color2,#57606a);}
.nbd-live{border-left-color:#2da44e;} .nbd-live .nbd-badge{background:rgba(45,164,78,.18);color:#2da44e;}
.nbd-in_flight{border-left-color:#0969da;} .nbd-in_flight .nbd-badge{background:rgba(9,105,218,.18);color:#3b8eea;animation:nbd-pulse 1.2s ease-in-out infinite;}
.nbd-retrying{border-left-color:#bf8700;} .nbd-retrying .nbd-badge{background:rgba(191,135,0,.2);color:#bf8700;}
.nbd-failed{border-left-color:#cf222e;} .nbd-failed .nbd-badge{background:rgba(207,34,46,.18);color:#e5534b;}
.nbd-in_doubt{border-left-color:#8250df;} .nbd-in_doubt .nbd-badge{background:rgba(130,80,223,.18);color:#a371f7;}
.nbd-skipped{border-left-color:#8250df;} .nbd-skipped .nbd-badge{background:rgba(130,80,223,.12);color:#a371f7;}
.nbd-run-completed .nbd-status{color:#2da44e;} .nbd-run-failed .nbd-status,.nbd-run-in_doubt .nbd-status{color:#e5534b;}
.nbd-run-running .nbd-status{color:#3b8eea;} .nbd-run-interrupted .nbd-status{color:#bf8700;}
.nbd-run-crashed .nbd-status{color:#e5534b;font-weight:600;}
@keyframes nbd-pulse{50%{opacity:.45;}}
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


def _elapsed(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f}s"
    return f"{int(seconds // 60)}m {int(seconds % 60):02d}s"


def render_header(run: RunView) -> str:
    """The run's header: id, status, counts, time, tokens and dollars paid vs saved."""
    cost = run.cost
    demo = '<span class="nbd-demo">demo model, offline</span>' if run.model_kind == "demo" else ""
    facts = f"{run.steps} steps · {run.replayed} replayed · {run.live} live · {run.turns} turns · {_elapsed(run.elapsed)}"
    money = (
        f"paid <b>{cost.paid.total:,}</b> tokens (${cost.paid_dollars:.4f}) · "
        f"replay saved <b>{cost.saved.total:,}</b> tokens (${cost.saved_dollars:.4f})"
    )
    return (
        f'<div class="nbd-header nbd-run-{escape(run.status)}">'
        f'<span class="nbd-run-id">{escape(run.run_id)}</span>'
        f'<span class="nbd-status">{escape(run.status.replace("_", " "))}</span>'
        f'<span class="nbd-facts">{escape(facts)}</span>'
        f'<span class="nbd-money">{money}</span>{demo}</div>'
    )


def render_answer(run: RunView) -> str:
    """The final answer, or the error that stopped the run."""
    if run.error and run.status != "completed":
        return f'<div class="nbd-answer"><div class="nbd-label">stopped</div><pre class="nbd-error">{escape(run.error)}</pre></div>'
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
        f"run {run.run_id}: {run.status.replace('_', ' ')} · {run.steps} steps ({run.replayed} replayed, "
        f"{run.live} live) · paid {cost.paid.total:,} tokens (${cost.paid_dollars:.4f}) · replay saved "
        f"{cost.saved.total:,} tokens (${cost.saved_dollars:.4f})"
    ]
    for view in steps:
        lines.append(f"  {_label(view):<13} {view.title:<18} {_one_line(_brief(view), 80)}")
    if run.error and run.status != "completed":
        lines.append(f"stopped: {run.error}")
    elif run.text:
        lines.append("")
        lines.append(run.text)
    return "\n".join(lines)
