"""The magics: ``%%agent``, ``%agent_resume``, ``%agent_runs``, ``%agent_show``.

Thin on purpose: parse the arguments (``@magic_arguments``, so ``%agent?`` is the help),
turn a user's mistake into ``UsageError`` (a message, no traceback), and make one call into
``cells``. Defaults are traitlets of ``AgentMagics``: ``%config AgentMagics.model = "..."``.
Loading imports nothing heavy: the agent, the SDK and ipywidgets load on first use.
"""

from __future__ import annotations

from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from traitlets import Bool, Enum, Int, Unicode

from ..agent.settings import (
    DEFAULT_IN_DOUBT,
    DEFAULT_MAX_TOKENS,
    DEFAULT_MAX_TURNS,
    DEFAULT_MODEL,
    IN_DOUBT_CHOICES,
)
from ..errors import NbDurableError

__all__ = ["AgentMagics", "load", "unload"]


def _explained(call: Any) -> Any:
    """Run ``call``; a user's mistake (unknown, locked or diverged run, bad store) becomes UsageError.

    A run that failed (or is in doubt) is not a mistake in the cell: it keeps its own error.
    """
    try:
        return call()
    except NbDurableError as e:
        if e.user_mistake:
            from ..agent.progress import in_words_of

            raise UsageError(in_words_of("notebook", str(e))) from None
        raise


def _check_crash_at(value: int | None) -> None:
    if value is not None and value < 1:
        raise UsageError(f"--crash-at counts steps from 1, not {value}")


@magics_class
class AgentMagics(Magics):
    """Durable Claude agents in cells; settings here are the defaults of every cell's flags.

    IPython adds each Magics instance to the shell's configurables, so ``%config`` reaches these.
    """

    model = Unicode(DEFAULT_MODEL, help="the Claude model (--model)").tag(config=True)
    store = Unicode("", help="where runs live: a folder, sqlite:///runs.db, ... (--store); '' means $NB_DURABLE_STORE or runs").tag(config=True)
    workspace = Unicode("", help="the folder the tools work in (--workspace); '' means . or, for the demo, ./demo-workspace").tag(config=True)
    max_turns = Int(DEFAULT_MAX_TURNS, help="model turns before a run stops (--max-turns)").tag(config=True)
    max_tokens = Int(DEFAULT_MAX_TOKENS, help="max_tokens of each model call").tag(config=True)
    in_doubt = Enum(list(IN_DOUBT_CHOICES), DEFAULT_IN_DOUBT, help="what to do with a tool cut off by a crash (--in-doubt)").tag(config=True)
    approve_bash = Unicode("", help="a regex: run_bash commands matching it need a person's approval").tag(config=True)
    demo = Bool(False, help="always use the offline demo model (--demo)").tag(config=True)

    @magic_arguments()
    @argument("--run", metavar="ID", help="the run id (default: derived from the cell's text)")
    @argument(
        "--new",
        action="store_true",
        help="start a fresh run even if this cell ran before (with --run ID: run ID, refused if ID exists)",
    )
    @argument("--model", metavar="M", help="the Claude model (default: AgentMagics.model)")
    @argument("--max-turns", metavar="N", type=int, help="model turns before the run stops")
    @argument("--workspace", metavar="DIR", help="the folder the tools work in")
    @argument("--store", metavar="URL", help="where runs live: a folder, sqlite:///runs.db, ...")
    @argument(
        "--in-doubt",
        choices=IN_DOUBT_CHOICES,
        help="a tool cut off by a crash: ask the person, run it again, tell the model it is unknown (skip), or stop",
    )
    @argument("--demo", action="store_true", help="use the offline demo model (the default without an API key)")
    @argument(
        "--crash-at",
        metavar="N",
        type=int,
        help="stop the run as a killed kernel would, as step N starts (for learning; resume it after)",
    )
    @argument("-o", "--output", metavar="VAR", help="store the run's result (an AgentResult) in this variable")
    @line_cell_magic
    def agent(self, line: str, cell: str | None = None) -> None:
        """Run a durable Claude agent on the cell's text (a cell magic: ``%%agent``, two %).

        Every model call and tool call is recorded in the run's log before the run moves on.
        Re-running a finished cell replays it (no model requests, nothing paid); re-running
        it after a kernel restart resumes it where it stopped. Example::

            %%agent --max-turns 10
            The tests in this project fail. Find out why and fix them.

        The agent works in the notebook's folder (or ``--workspace DIR``) and its run_bash
        tool runs real commands there; ``%config AgentMagics.approve_bash = "git push|rm -rf"``
        makes matching commands wait for your approval.

        The other magics:

        * ``%agent_resume [RUN]``: after a crash or a kernel restart (``%load_ext nb_durable``
          first), go on with the named run, or the latest unfinished one, with every setting
          from its log. ``--in-doubt skip|rerun|fail|ask`` settles a tool cut off by the crash.
        * ``%agent_runs``: every run with its status, steps, tokens and dollars paid and
          saved by replay, and where the runs live.
        * ``%agent_show RUN``: a run's timeline from its log, without running anything.

        Settings: the flags below, or ``%config AgentMagics.<name> = value`` for every cell
        (``model``, ``store``, ``workspace``, ``max_turns``, ``max_tokens``, ``in_doubt``,
        ``approve_bash``, ``demo``); ``%config AgentMagics`` lists them.

        Keys: the Messages API is used when ``ANTHROPIC_API_KEY``, ``ANTHROPIC_AUTH_TOKEN`` or
        ``ANTHROPIC_BASE_URL`` is set in the kernel's environment (set it before Jupyter starts,
        never with ``%env``, which prints it into the notebook); with none, the offline demo
        model runs on a demo project in ``demo-workspace/``. Secrets are redacted from tool
        output before it reaches the model or the log.

        Where runs live: ``runs/`` beside the notebook (one JSONL file per run), unless
        ``--store``, ``%config AgentMagics.store`` or ``$NB_DURABLE_STORE`` names another
        folder, ``sqlite:///runs.db`` or ``postgresql://...``. The timeline's header shows
        each run's log. From a terminal, ``nb-durable runs``, ``show``, ``resume`` and
        ``export`` read the same store.
        """
        if cell is None:
            # %agent with one %: a line magic, so the words after it are not a task.
            words = line.strip()
            flags, task = (words, "") if words.startswith("-") else ("", words)
            example = f"%%agent {flags}".rstrip() + "\n" + (task or "The tests in this project fail. Fix them.")
            raise UsageError(
                "%agent with one % is a line magic, so it has no task: %%agent (two %) is a cell magic. "
                f"Put it on the first line of a cell and the task on the lines below:\n\n{example}"
            )
        args = parse_argstring(self.agent, line)
        if not cell.strip():
            raise UsageError("%%agent needs a task: write it in the cell below the %%agent line.")
        if args.max_turns is not None and args.max_turns < 1:
            raise UsageError(f"--max-turns must be at least 1, not {args.max_turns}")
        _check_crash_at(args.crash_at)
        from . import cells

        result = _explained(
            lambda: cells.agent_cell(
                cell.strip(),
                run_id=args.run,
                new=args.new,
                model=args.model or self.model,
                demo=args.demo or self.demo,
                max_turns=args.max_turns or self.max_turns,
                max_tokens=self.max_tokens,
                workspace=args.workspace or self.workspace or None,
                store=args.store or self.store or None,
                in_doubt=args.in_doubt or self.in_doubt,
                approve_bash=self.approve_bash or None,
                crash_at=args.crash_at,
            )
        )
        self._keep(args.output, result)

    @magic_arguments()
    @argument("run", nargs="?", help="the run id (default: the latest unfinished run)")
    @argument("--in-doubt", choices=IN_DOUBT_CHOICES, help="what to do with a tool cut off by the crash")
    @argument("--max-turns", metavar="N", type=int, help="raise the run's turn limit")
    @argument("--store", metavar="URL", help="where runs live")
    @argument("--crash-at", metavar="N", type=int, help="stop again as step N starts, as a killed kernel would")
    @argument("-o", "--output", metavar="VAR", help="store the run's result in this variable")
    @line_magic
    def agent_resume(self, line: str) -> None:
        """Resume a run after a crash or a kernel restart, with every setting from its log.

        After a restart, ``%load_ext nb_durable`` and ``%agent_resume`` are all it takes.
        """
        args = parse_argstring(self.agent_resume, line)
        _check_crash_at(args.crash_at)
        from . import cells

        result = _explained(
            lambda: cells.resume_cell(
                args.run,
                store=args.store or self.store or None,
                in_doubt=args.in_doubt or self.in_doubt,
                max_turns=args.max_turns,
                crash_at=args.crash_at,
            )
        )
        self._keep(args.output, result)

    def _keep(self, name: str | None, result: Any) -> None:
        """``-o VAR``: put the run's result in the user's namespace."""
        if name:
            assert self.shell is not None
            self.shell.user_ns[name] = result

    @magic_arguments()
    @argument("--store", metavar="URL", help="where runs live")
    @line_magic
    def agent_runs(self, line: str) -> Any:
        """List runs: status, steps, tokens and dollars paid vs saved by replay, last update."""
        args = parse_argstring(self.agent_runs, line)
        from . import cells

        return _explained(lambda: cells.runs_table(args.store or self.store or None))

    @magic_arguments()
    @argument("run", help="the run id")
    @argument("--store", metavar="URL", help="where runs live")
    @line_magic
    def agent_show(self, line: str) -> Any:
        """Draw a run's timeline from its log, without running anything."""
        args = parse_argstring(self.agent_show, line)
        from . import cells

        return _explained(lambda: cells.show_run(args.run, args.store or self.store or None))


def load(ipython: Any) -> None:
    """Register the magics (``%load_ext``, ``%reload_ext`` and IPython config all come here)."""
    ipython.register_magics(AgentMagics)


def unload(ipython: Any) -> None:
    """Remove the magics and their configurable."""
    manager = ipython.magics_manager
    for kind in ("line", "cell"):
        for name in ("agent", "agent_resume", "agent_runs", "agent_show"):
            manager.magics[kind].pop(name, None)
    ipython.configurables[:] = [c for c in ipython.configurables if not isinstance(c, AgentMagics)]
    manager.registry.pop("AgentMagics", None)
