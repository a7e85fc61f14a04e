"""A run as a readable notebook: the task, each model turn and each tool call, with outputs.

Model turns become Markdown cells: the assistant's thinking folded in a
``<details class="nbd-thinking">``, then its text made inert (``markdown.inert``), so neither
Jupyter nor nbconvert meets raw HTML from a model. Tool calls become code cells whose source
says what ran (the bash command, the file path) and whose output is what the tool returned,
or, for a skipped step, its outcome; a recorded settings change and a follow-up message become
Markdown cells. The notebook is for reading, not for running: its first cell says so, and the
tool cells are commented out, so Run All does nothing. ``runnable=True`` (``nb-durable export
--runnable``) writes them as real cells (``%%bash``, ``%%writefile``), which re-run the
recorded effects against today's world.

The notebook is written to a temporary file and renamed into place (``write_notebook``), so a
full disk leaves what was at the path whole and raises ``StoreFullError``, as the log does.

Thinking is made inert: ``<``, ``>`` and ``&`` are escaped, and its line breaks are written as
``&#10;`` inside one ``<pre>``, so the whole section is a single-line HTML block that no
Markdown renderer reads as Markdown.
"""

from __future__ import annotations

import json
import os
import stat
from html import escape
from pathlib import Path
from typing import Any, Literal

from ...core.runs import RunRecord
from ...errors import StoreFullError, full_disk
from ..workspace.files import replace_whole
from .inert_text import direction_controls, terminal_text
from .ipynb import Notebook, Stream, code_cell, dumps, markdown_cell
from .markdown import inert
from .progress import describe_input
from .step_views import answered_by, wait_said
from .views import RunView, StepView, state_word, tree_words, views_of
from .words import in_words_of

__all__ = ["export_notebook", "notebook_of", "write_notebook"]


def notebook_of(record: RunRecord, *, runnable: bool = False, run: RunView | None = None, child: bool = False) -> Notebook:
    """The notebook of a recorded run (tool cells commented out unless ``runnable``),
    headed by ``run``, its view, when given: a parent's bills its tree (``with_children``'s), its
    own cost said beside it (``tree_words``), as every view of a parent does. ``child``: its cells
    go after its parent's, in the parent's notebook, which already warns what its cells are."""
    own, steps = views_of(record)
    run = own if run is None else run
    words = tree_words(run)
    settings = record.summary.settings
    cells = [
        *([] if child else [markdown_cell(_warning(runnable))]),
        markdown_cell(
            ("---\n\n# Child run" if child else "# Run") + f" `{run.run_id}`\n\n**Status:** {state_word(run.status)} · **model:** {inert(run.model)} "
            f"({inert(run.model_kind)}) · **turns:** {run.turns} · **tokens:** {run.cost.paid.input_tokens:,} in, "
            f"{run.cost.paid.output_tokens:,} out"
            # Escaped: a notebook's Markdown reads the text between two dollar signs as math.
            + (f" · {words}".replace("$", "\\$") if words else "")
            + "\n\n**Task**\n\n" + _quote(inert(run.task))
        ),
    ]
    for step in steps:
        switched = f"\n\n**Decision:** {_escaped(step.switched)}" if step.switched else ""
        if step.kind == "model":
            text = inert(step.output) if step.output else _no_text(step)
            by = answered_by(step, run.model)
            head = f"**Model, turn {step.turn}** ({inert(by)})" if by else f"**Model, turn {step.turn}**"
            cells.append(markdown_cell(f"{head}\n\n{_thinking(step.thinking)}{text}{switched}"))
            continue
        if step.kind == "settings":
            cells.append(markdown_cell(f"**Settings changed before turn {step.turn}:** {_escaped(step.output)}{switched}"))
            continue
        if step.kind == "compact":
            cells.append(markdown_cell(f"**Compaction before turn {step.turn}:** {_escaped(step.output)}"))
            continue
        if step.kind == "user":
            cells.append(markdown_cell(f"**Follow-up before turn {step.turn}**\n\n" + _quote(_escaped(step.output))))
            continue
        source = _tool_source(step.title, step.input)
        # A runnable cell is what runs, so it keeps the command as recorded (a record is only
        # read), and a note before it says when that command reads otherwise than it runs.
        hidden = direction_controls(source) if runnable else []
        if hidden:
            cells.append(markdown_cell(
                f"**Careful:** the cell below holds Unicode direction controls ({', '.join(hidden)}), so it may "
                "read otherwise than it runs; it runs as recorded."
            ))  # fmt: skip
        name: Literal["stdout", "stderr"] = "stderr" if step.is_error or (step.state != "recorded" and not step.output) else "stdout"
        said = step.output or (_unsettled(step) if step.state != "recorded" else "")
        body = said if said.endswith("\n") else said + "\n"
        cells.append(code_cell(
            source if runnable else _commented(terminal_text(source)), Stream(name, terminal_text(body)),
            {"nb_durable": {"step_id": step.step_id, "state": step.state, "decision": step.decision}},
        ))  # fmt: skip
    # What to do next, in the words of the notebook it is read in (%agent_resume r --model M).
    if run.detail:  # stopped short: what the reply holds is not the finished work, and a resume goes on
        said = f"**{state_word(run.status)}:** {inert(in_words_of('notebook', run.detail))}"
        cells.append(markdown_cell(f"## Result\n\n{said}" + (f"\n\n{inert(run.text)}" if run.text else "")))
    elif run.text or run.error:
        cells.append(markdown_cell("## Result\n\n" + inert(run.text or f"Error: {in_words_of('notebook', run.error)}")))
    return Notebook(cells, {"nb_durable": {"run_id": run.run_id, "settings": settings, "runnable": runnable}})


def _unsettled(step: StepView) -> str:
    """A step with no result, as its row in the timeline says it (failed, cut off, in doubt, in
    flight in a run being written; with the error recorded)."""
    said = ", ".join(filter(None, (step.error, wait_said(step))))
    return f"({state_word(step.state)}: {said})" if said else f"({state_word(step.state)})"


def _no_text(step: StepView) -> str:
    """A model turn with no text: why (``_unsettled``), or the reason it stopped."""
    if step.state != "recorded":
        return f"*{inert(_unsettled(step))}*"
    return f"*(no text; stop reason {step.stop_reason})*"


def _thinking(text: str) -> str:
    """A model turn's thinking, folded and inert, ahead of its answer (nothing without thinking)."""
    if not text:
        return ""
    inert = "&#10;".join(_escaped(text.strip("\n")).splitlines())
    return f'<details class="nbd-thinking"><summary>Thinking</summary><pre>{inert}</pre></details>\n\n'


def _warning(runnable: bool) -> str:
    head = (
        "> **This notebook is a record of an agent run, not a program.** Its code cells show what "
        "the agent's tools did (commands run, files written) and what they returned."
    )
    if runnable:
        return head + (
            " **Running a code cell does it again, for real**: the command runs and the file is "
            "written in this notebook's folder, against today's world. Read a cell before you run it."
        )
    return head + (
        " They are commented out, so running them (or Run All) does nothing; "
        "`nb-durable export --runnable` writes cells that re-run the effects."
    )


def _commented(source: str) -> str:
    lines = ["# " + line if line else "#" for line in source.splitlines()]
    return "\n".join(["# recorded; not run again (export with --runnable for a cell that runs it)", *lines])


def _escaped(text: str) -> str:
    """``text`` for a Markdown cell: no control or direction character (``terminal_text``), HTML escaped."""
    return escape(terminal_text(text), quote=False)


def _quote(text: str) -> str:
    return "\n".join("> " + line for line in text.splitlines()) or "> (empty)"


def _tool_source(name: str, tool_input: Any) -> str:
    if name == "run_bash" and isinstance(tool_input, dict) and "command" in tool_input:
        return "%%bash\n" + str(tool_input["command"])
    if name == "write_file" and isinstance(tool_input, dict) and "path" in tool_input:
        return f"%%writefile {tool_input['path']}\n{tool_input.get('content', '')}"
    return f"# {name}: {describe_input(name, tool_input)}\n# input: {json.dumps(tool_input, ensure_ascii=False)}"


def export_notebook(record: RunRecord, path: str | Path, *, runnable: bool = False) -> Path:
    """Write a run's notebook to ``path`` (see ``notebook_of`` and ``write_notebook``)."""
    return write_notebook(notebook_of(record, runnable=runnable), path, run_id=record.run_id)


def _stream(target: Path) -> bool:
    """Whether ``target`` is a device or a pipe (``/dev/stdout``), written as it is: no file to rename over."""
    try:
        mode = os.stat(target).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def write_notebook(notebook: Notebook, path: str | Path, *, run_id: str, elsewhere: str = "write it to a file on another disk") -> Path:
    """Write ``run_id``'s exported ``notebook`` at ``path``, renamed into place (a symlink is
    written through, as ``open`` would): a write that fails leaves what was there whole, not a
    cut-off notebook. A full disk (or quota, or file size limit) raises ``StoreFullError``, which
    says what to do, ``elsewhere`` naming the other way out."""
    target = Path(path)
    real = Path(os.path.realpath(target))
    existed = real.exists()
    mode = real.stat().st_mode & 0o7777 if existed else None
    data = dumps(notebook).encode("utf-8")
    try:
        if _stream(target):
            with open(target, "wb") as f:
                f.write(data)
        else:
            replace_whole(real, data, mode)
    except OSError as e:
        code = full_disk(e)
        if code is None:
            # Of the notebook's path as given: the temporary file beside it is no name a person typed.
            where = str(target) if real == Path(os.path.abspath(target)) else f"{target} (a link to {real})"
            raise OSError(e.errno, e.strerror, where) from None
        kept = "the file already there was left as it was" if existed else "no file was written"
        raise StoreFullError(
            doing=f"cannot export run {run_id!r} to {target}", path=str(target), code=code,
            then=f"export again ({kept})", elsewhere=elsewhere,
        ) from None  # fmt: skip
    return target
