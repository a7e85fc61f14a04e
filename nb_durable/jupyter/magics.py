"""The magics: ``%%agent``, ``%agent_resume``, ``%agent_runs``, ``%agent_show``, ``%agent_key`` (and,
in ``control_magics``, ``%agent_stop`` and ``%agent_wait``).

Thin on purpose: parse the arguments (``@magic_arguments``, so ``%agent?`` is the help),
turn a user's mistake into ``UsageError`` (a message, no traceback), and make one call into
``cells``. The settings' flags and their ``%config AgentMagics.<name>`` traits come from the
settings table (``flags``); only a command's own arguments (a run id, ``--new``, ``-o``) are
written here. Loading imports nothing heavy: the agent, the SDK and ipywidgets load on first use.

``%agent_key`` sets a key for this kernel without it ever reaching a cell or its output:
``%env ANTHROPIC_API_KEY=sk-...`` writes the key into the cell's source and echoes it in the
output, both saved with the notebook. ``read_key`` asks for it with ``getpass`` instead (a
password box; nothing typed is echoed or stored in the notebook or IPython's history) and
puts it in ``os.environ`` of this kernel only. The other safe way is the environment Jupyter
starts in (``ANTHROPIC_API_KEY=... jupyter lab``, or a secrets manager that sets it).

IPython finds the extension's hooks on the ``nb_durable`` package, which loads this module only
when they are called, so importing the package never imports IPython.
"""

from __future__ import annotations

import getpass
import os
import re
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import line_cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, kwds, magic_arguments

from ..agent.run.crash import crash_point
from .flags import (
    SettingTraits,
    arguments_of,
    flags_and_words,
    going_on,
    listing_flags,
    table_flags,
    taken_by,
    turns,
    user_mistakes,
    values_of,
    variable_name,
)

__all__ = ["AgentMagics", "load_ipython_extension", "unload_ipython_extension"]

DEFAULT_KEY_VARIABLE = "ANTHROPIC_API_KEY"
_KEY_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


_OUTPUT = (("-o", "--output"), {"metavar": "VAR", "type": variable_name, "help": "store the run's result (an AgentResult) in this variable; with --background, its handle"})
_FOREGROUND = (("--foreground",), {"action": "store_true", "help": "hold the kernel for the run (the default, unless AgentMagics.background)"})


@magics_class
class AgentMagics(SettingTraits):
    """Durable Claude agents in cells; its settings (``%config AgentMagics``) are every cell's defaults.

    IPython adds each Magics instance to the shell's configurables, so ``%config`` reaches these.
    """

    @magic_arguments()
    @kwds(usage="%%%(prog)s [--run ID] [--model M] [--max-usd X] [--workspace DIR] [--background] [more flags below]")
    @table_flags(
        "run",
        {
            "first": [(("--run",), {"metavar": "ID", "help": "the run id (default: derived from the cell's text)"})],
            "command": [
                (
                    ("--new",),
                    {
                        "action": "store_true",
                        "help": "start a fresh run even if this cell ran before (with --run ID: run ID, refused if ID exists)",
                    },
                ),
                (
                    ("--continue",),
                    {
                        "dest": "follow",
                        "metavar": "RUN",
                        "nargs": "?",
                        "const": "",
                        "default": None,
                        "help": "give finished run RUN (default: the latest finished one) the cell's text as a "
                        "follow-up; the model, limit and budget flags change it from there (those that would start a run "
                        "otherwise, such as --workspace or --mcp, are refused)",
                    },
                ),
                _OUTPUT,
                _FOREGROUND,
                (
                    ("--crash-at",),
                    {
                        "metavar": "N",
                        "type": crash_point,
                        "help": "stop the run as a killed kernel would, as step N starts (for learning; resume it "
                        "after); K.N: as step N of the run's K-th child run starts (with --delegate)",
                    },
                ),
            ],
        },
    )
    @line_cell_magic
    def agent(self, line: str, cell: str | None = None) -> None:
        """Run a durable Claude agent on the cell's text (a cell magic: ``%%agent``, two %).

        Every model call and tool call is recorded in the run's log before the run moves on.
        Re-running a finished cell replays it (no model requests); re-running it after a
        kernel restart resumes it where it stopped. Without an API key it uses the offline
        demo model. Example::

            %%agent --max-usd 2 --background
            The tests in this project fail. Find out why and fix them.

        The five flags people use: ``--run ID`` names the run, ``--model M`` picks the model,
        ``--max-usd X`` is its budget, ``--workspace DIR`` the folder its tools work in, and
        ``--background`` returns at once: the run goes on in a thread of the kernel while you
        run other cells, and its timeline's buttons work (Stop, Approve/Deny, Rerun/Skip/Fail,
        Resume, Fork from here); every click is a recorded decision, with who made it and the
        reason typed beside it. In the foreground (the default) the cell holds the kernel: the
        interrupt button stops the run and questions come through the input box.

        Every setting below but ``--tag`` is also ``%config AgentMagics.<name> = value`` (its
        name with underscores), the default of every cell; a flag sets it for one cell. ``%config
        AgentMagics`` lists them all, among them ``approve_bash`` ("git push|rm -rf": matching
        run_bash commands wait for your approval), which has no flag.

        The model thinks adaptively (its thinking is shown, dimmed, between tools) and the
        conversation is cached between turns (--cache-ttl). A run ends *completed* only when
        the model finished; it may also end truncated (max_tokens), refused, context_full,
        budget_exhausted, bad_tool_input or unknown_stop, each resumable with %agent_resume and the fix it
        names. --fallback-model M moves an overloaded (or refusing) run to M, recorded; a full
        context is compacted into a summary (--compaction off: it stops context_full).
        ``--continue [RUN]`` gives a finished run the cell's text as a follow-up, recorded.
        ``--mcp FILE`` adds the tools of the MCP servers in an ``mcpServers`` JSON file (each
        call a step; a tool is external unless its server's config says ``"trusted": true``,
        then its annotations decide); ``--kernel-tools`` lets the agent
        list and inspect this notebook's variables and, with your approval, run Python among them.

        The other magics:

        * ``%agent_resume [RUN]``: after a crash or a kernel restart (``%load_ext nb_durable``
          first), go on with the named run, or the latest unfinished one, with every setting
          from its log. ``--in-doubt skip|rerun|fail|ask`` settles a tool cut off by the crash;
          ``--max-tokens``, ``--model``, ``--max-usd`` change the run from there (recorded).
        * ``%agent_key [VARIABLE]``: set a key through a hidden prompt, never in the notebook.
        * ``%agent_runs``: every run with its status, steps, tokens and dollars paid and
          saved by replay, and where the runs live.
        * ``%agent_show [RUN]``: a run's timeline from its log (the run updated last if you name
          none), without running anything; ``--turns 7-93`` shows only those turns, each step
          with its whole detail (a long run's timeline leaves the middle's out).
        * ``%agent_stop [RUN]``, ``%agent_wait [RUN]``: stop a background run at its next step
          boundary; block until it (or every background run) ends, for Run All and nbclient.

        Keys: the Messages API is used when ``ANTHROPIC_API_KEY``, ``ANTHROPIC_AUTH_TOKEN`` or
        ``ANTHROPIC_BASE_URL`` is set in the kernel's environment (set it before Jupyter starts,
        never with ``%env``, which prints it into the notebook); with none, the offline demo
        model runs on a demo project in ``demo-workspace/``. Secrets are redacted from tool
        output before it reaches the model or the log.

        Where runs live: ``runs/`` beside the notebook (one JSONL file per run), unless
        ``--store``, ``%config AgentMagics.store`` or ``$NB_DURABLE_STORE`` names another
        folder, ``sqlite:///runs.db`` or ``postgresql://...``. The timeline's header shows
        each run's log. From a terminal, ``nb-durable runs``, ``show``, ``resume`` and
        ``export`` read the same store. Every magic's line is read as a shell reads one: quote a
        value with spaces (``--workspace "my project"``, ``--tag 'needs review'``).
        """
        if cell is None:
            # %agent with one %: a line magic, so the words after it are not a task.
            flags, task = flags_and_words(self.agent, line)  # a flag mistake first: the example would carry it
            example = f"%%agent {flags}".rstrip() + "\n" + (task or "The tests in this project fail. Fix them.")
            raise UsageError(
                "%agent with one % is a line magic, so it has no task: %%agent (two %) is a cell magic. "
                f"Put it on the first line of a cell and the task on the lines below:\n\n{example}"
            )
        args = arguments_of(self.agent, line)
        if not cell.strip():
            raise UsageError(
                "%%agent needs a task: write it on the lines below the %%agent line, for example\n\n"
                "%%agent\nThe tests in this project fail. Fix them."
            )
        from . import cells

        if args.follow is not None:
            taken_by(args, "run", "continue", {"--run": args.run is not None, "--new": args.new, "--crash-at": args.crash_at is not None})
            values, kept = going_on(self, args, "run")
            result = user_mistakes(lambda: cells.continue_cell(args.follow or None, cell.strip(), values=values, configured=kept))
        else:
            values = values_of(self, args, "run", new_run=True)
            result = user_mistakes(
                lambda: cells.agent_cell(cell.strip(), run_id=args.run, new=args.new, values=values, crash_at=args.crash_at)
            )
        self._keep(args.output, result)

    @magic_arguments()
    @kwds(usage="%(prog)s [RUN] [--model M] [--max-usd X] [--background] [more flags below]")
    @argument("run", nargs="?", help="the run id (default: the latest unfinished agent run)")
    @table_flags(
        "resume",
        {
            "command": [
                _OUTPUT,
                _FOREGROUND,
                (("--crash-at",), {"metavar": "N", "type": crash_point, "help": "stop again as step N (K.N: of the K-th child run) starts, as a killed kernel would"}),
                (
                    ("--mcp-accept-changes",),
                    {
                        "action": "store_true",
                        "help": "go on although an MCP tool the run used changed its schema (recorded as a decision)",
                    },
                ),
                (
                    ("--rerun-python",),
                    {
                        "action": "store_true",
                        "help": "first execute the run's recorded run_python code again (replay does not rebuild variables)",
                    },
                ),
            ]
        },
    )
    @line_magic
    def agent_resume(self, line: str) -> None:
        """Resume a run after a crash or a kernel restart, with every setting from its log.

        After a restart, ``%load_ext nb_durable`` and ``%agent_resume`` are all it takes. A
        truncated run continues its turn (or asks it again with a higher --max-tokens); a
        refused or full one asks again (--model moves it to another model); a budget stop
        goes on with a larger --max-usd. Each change is recorded as a decision. ``%config
        AgentMagics`` values of the run's recorded settings are kept over (said first, where
        they differ); the flags change those a resume may change. A run with
        MCP tools restarts its servers and checks its tools still have the recorded schemas.
        Replay does not re-run ``run_python`` calls, so the variables they defined are gone
        after a restart: ``--rerun-python`` executes the recorded code again first. A timeline's
        Resume and Fork buttons resume as ``%agent_resume RUN --background`` does, asking by button
        about a step in doubt unless ``%config AgentMagics.in_doubt`` says otherwise.
        """
        args = arguments_of(self.agent_resume, line)
        values, kept = going_on(self, args, "resume")
        from . import cells

        result = user_mistakes(
            lambda: cells.resume_cell(
                args.run,
                values=values,
                crash_at=args.crash_at,
                mcp_accept_changes=args.mcp_accept_changes,
                rerun_python=args.rerun_python,
                configured=kept,
            )
        )
        self._keep(args.output, result)

    def _store(self, given: str | None) -> str | None:
        """The store a reading magic reads: ``--store`` as given (an empty one is refused, as
        ``nb-durable --store ''`` is, not taken for the default), else ``%config AgentMagics.store``."""
        return self.setting("store") if given is None else given

    def _keep(self, name: str | None, result: Any) -> None:
        """``-o VAR``: put the run's result in the user's namespace."""
        if name:
            assert self.shell is not None
            self.shell.user_ns[name] = result

    @magic_arguments()
    @argument("--store", metavar="URL", help="where runs live (default: %%config AgentMagics.store, else $NB_DURABLE_STORE or runs)")
    @listing_flags()
    @line_magic
    def agent_runs(self, line: str) -> Any:
        """List runs: status, steps, tokens and dollars paid vs saved by replay (by the sessions that
        went live: replaying a finished run writes nothing), last update, and the worker (host:pid)
        that last resumed each (``nb-durable worker``), newest first. A run that asks a person, in
        this kernel or any other process, is ``waiting``. A page cut short names the line for the next
        (``--after`` its last run's cursor). Read from the store's run index, a summary per run kept
        with every append: the logs stay the truth, and ``nb-durable check-index`` rebuilds the index
        from them and names any run whose row differs."""
        args = arguments_of(self.agent_runs, line)

        from .runs_table import runs_table

        return user_mistakes(
            lambda: runs_table(
                self._store(args.store), status=args.status or (), tags=args.tag or (),
                batch=args.batch, limit=args.limit or None, offset=args.offset, after=args.after,
                existing=args.store is not None,  # a store named here that is not there is a mistake: as nb-durable runs
            )
        )

    @magic_arguments()
    @argument("run", nargs="?", help="the run id (default: the run updated last)")
    @argument("--store", metavar="URL", help="where runs live")
    @argument(
        "--turns",
        type=turns,
        metavar="N[-M]",
        help="only the steps of these turns, each with its whole detail (a long run's timeline leaves the middle's out)",
    )
    @line_magic
    def agent_show(self, line: str) -> Any:
        """Draw a run's timeline from its log, without running anything."""
        args = arguments_of(self.agent_show, line)
        from . import cells

        return user_mistakes(
            lambda: cells.show_run(args.run, self._store(args.store), turns=args.turns)
        )

    @magic_arguments()
    @argument("variable", nargs="?", default=DEFAULT_KEY_VARIABLE, help=f"the variable to set (default: {DEFAULT_KEY_VARIABLE})")
    @line_magic
    def agent_key(self, line: str) -> None:
        """Ask for an API key with a hidden prompt and set it for this kernel; never echoed, never saved.

        Use it instead of ``%env ANTHROPIC_API_KEY=...``, which saves the key in the notebook.
        The key lives in this kernel's environment only (run it again after a restart); tools
        never see it, and it is masked in their output.
        """
        args = arguments_of(self.agent_key, line)
        try:
            print(read_key(args.variable))
        except ValueError as e:
            raise UsageError(str(e)) from None
        except NotImplementedError:  # IPython's StdinNotImplementedError: nobody to ask (nbclient)
            raise UsageError(
                f"this front end cannot ask for input, so %agent_key cannot read {args.variable}: set it "
                "in the environment Jupyter (or nbclient) starts in instead"
            ) from None
        except EOFError:  # the input ended (Ctrl-D, or a closed stdin) before a key was typed
            raise UsageError(f"no key was typed (the input ended), so {args.variable} is unchanged; run %agent_key again to type it") from None




def read_key(variable: str = DEFAULT_KEY_VARIABLE) -> str:
    """Ask for ``variable``'s value with getpass, set it in ``os.environ``; return what to tell the person.

    ValueError (with what to do) for a name that is not a variable's or that does not hold a
    secret, and for an empty answer (the variable is left as it was).
    """
    if not _KEY_NAME.match(variable):
        raise ValueError(f"{variable!r} is not an environment variable name; try %agent_key ANTHROPIC_API_KEY")
    from ..agent.secrets.redaction import is_secret_name  # on use: loading the magics stays light

    if not is_secret_name(variable):
        raise ValueError(
            f"{variable} is not named like a credential (KEY, TOKEN, SECRET, PASSWORD, ...), so it would be "
            "neither stripped from tool environments nor masked; set ordinary variables with %env"
        )
    value = getpass.getpass(f"{variable} (typed text is hidden and not saved in the notebook): ").strip()
    if not value:
        raise ValueError(f"nothing was entered, so {variable} is unchanged")
    was_set = variable in os.environ
    os.environ[variable] = value
    return (
        f"{variable} is {'replaced' if was_set else 'set'} for this kernel ({len(value)} characters, not shown). "
        "It lives in this kernel's memory only: after a restart, run %agent_key again."
    )


_AGENT_CELL = re.compile(r"%%agent(\s|$)")


def empty_agent_cell(lines: list[str]) -> list[str]:
    """An input transformer: a ``%%agent`` cell with nothing below its first line gets one
    blank body line, so ``%%agent`` itself says a task is missing; IPython would refuse the
    empty body first and point at the line magic ``%agent``, which points back here."""
    if lines and _AGENT_CELL.match(lines[0]) and not "".join(lines[1:]).strip():
        return [lines[0].rstrip("\n") + "\n", "\n"]
    return lines


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext nb_durable``: register the magics (``%reload_ext`` and IPython config come here too)."""
    from .background import stop_at_shutdown
    from .control_magics import RunControlMagics

    ipython.register_magics(AgentMagics)
    ipython.register_magics(RunControlMagics)
    if empty_agent_cell not in ipython.input_transformers_cleanup:
        ipython.input_transformers_cleanup.append(empty_agent_cell)
    stop_at_shutdown(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext nb_durable``: remove the magics and their configurable."""
    manager = ipython.magics_manager
    for kind in ("line", "cell"):
        for name in ("agent", "agent_resume", "agent_runs", "agent_show", "agent_key", "agent_stop", "agent_wait"):
            manager.magics[kind].pop(name, None)
    if empty_agent_cell in ipython.input_transformers_cleanup:
        ipython.input_transformers_cleanup.remove(empty_agent_cell)
    ipython.configurables[:] = [c for c in ipython.configurables if not isinstance(c, AgentMagics)]
    manager.registry.pop("AgentMagics", None)
    manager.registry.pop("RunControlMagics", None)
