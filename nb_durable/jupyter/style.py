"""The timeline's styles, scoped under ``.nbd-timeline``: JupyterLab's theme variables with light
fallbacks, so a timeline reads in Lab and Notebook 7, light or dark (``render`` says which
classes mean what)."""

from __future__ import annotations

__all__ = ["STYLE"]

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
.nbd-gap{margin:2px 0;padding:2px 8px;font-size:12px;border-left:3px dashed var(--jp-border-color1,#8c959f);
 color:var(--jp-ui-font-color2,#57606a);overflow-wrap:anywhere;}
.nbd-left-out{font-size:12px;font-style:italic;color:var(--jp-ui-font-color2,#57606a);overflow-wrap:anywhere;}
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
