"""The magics: ``%%agent``, ``%agent_resume``, ``%agent_runs``, ``%agent_show``, ``%agent_key`` (and,
in ``control_magics``, ``%agent_stop`` and ``%agent_wait``).

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
from traitlets import Bool, Enum, Float, Int, Unicode

from ..agent.limits import ENV_MAX_CONCURRENT_CALLS, ENV_TOKENS_PER_MINUTE, CallLimits
from ..agent.settings import (
    CACHE_TTLS,
    DEFAULT_CACHE_TTL,
    DEFAULT_IN_DOUBT,
    DEFAULT_MAX_TOKENS,
    DEFAULT_MAX_TURNS,
    DEFAULT_MODEL,
    DEFAULT_THINKING,
    EFFORTS,
    IN_DOUBT_CHOICES,
    THINKING_MODES,
)
from ..errors import NbDurableError
from .flags import LIMITS as _LIMITS
from .flags import MODEL as _MODEL
from .flags import PLACE as _PLACE
from .flags import changes as _changes
from .flags import check_crash_at as _check_crash_at
from .flags import check_limits as _check_limits
from .flags import in_background as _in_background
from .flags import with_flags as _with

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


@magics_class
class AgentMagics(Magics):
    """Durable Claude agents in cells; settings here are the defaults of every cell's flags.

    IPython adds each Magics instance to the shell's configurables, so ``%config`` reaches these.
    """

    model = Unicode(DEFAULT_MODEL, help="the Claude model (--model)").tag(config=True)
    store = Unicode("", help="where runs live: a folder, sqlite:///runs.db, ... (--store); '' means $NB_DURABLE_STORE or runs").tag(config=True)
    workspace = Unicode("", help="the folder the tools work in (--workspace); '' means . or, for the demo, ./demo-workspace").tag(config=True)
    max_turns = Int(DEFAULT_MAX_TURNS, help="model turns before a run stops (--max-turns)").tag(config=True)
    max_tokens = Int(DEFAULT_MAX_TOKENS, help="max_tokens of each model call; thinking counts against it (--max-tokens)").tag(config=True)
    thinking = Enum(list(THINKING_MODES), DEFAULT_THINKING, help="adaptive thinking, or off for models without it (--thinking)").tag(config=True)
    effort = Enum(["", *EFFORTS], "", help="how much effort the model puts in (--effort); '' leaves the model's default").tag(config=True)
    cache_ttl = Enum(list(CACHE_TTLS), DEFAULT_CACHE_TTL, help="prompt caching between turns: 5m, 1h or off (--cache-ttl)").tag(config=True)
    max_usd = Float(0.0, help="stop a run before a model call that could take it past this many dollars (--max-usd); 0: no limit").tag(config=True)
    max_run_tokens = Int(0, help="stop a run before a model call that could take it past this many tokens; 0: no limit").tag(config=True)
    max_concurrent_calls = Int(0, help=f"model calls at once per endpoint, shared by every process using the store (--max-concurrent-calls); 0: ${ENV_MAX_CONCURRENT_CALLS} or no limit").tag(config=True)
    tokens_per_minute = Int(0, help=f"input tokens a minute per endpoint, shared by every process using the store (--tokens-per-minute); 0: ${ENV_TOKENS_PER_MINUTE} or no limit").tag(config=True)
    in_doubt = Enum(list(IN_DOUBT_CHOICES), DEFAULT_IN_DOUBT, help="what to do with a tool cut off by a crash (--in-doubt)").tag(config=True)
    approve_bash = Unicode("", help="a regex: run_bash commands matching it need a person's approval").tag(config=True)
    demo = Bool(False, help="always use the offline demo model (--demo)").tag(config=True)
    mcp_config = Unicode("", help="an mcpServers JSON file whose tools every run gets (--mcp)").tag(config=True)
    kernel_tools = Bool(False, help="let the agent list, inspect and (with approval) change this notebook's variables (--kernel-tools)").tag(config=True)
    background = Bool(False, help="run every cell's agent in the background (--background; --foreground for one cell)").tag(config=True)

    @magic_arguments()
    @argument("--run", metavar="ID", help="the run id (default: derived from the cell's text)")
    @argument(
        "--new",
        action="store_true",
        help="start a fresh run even if this cell ran before (with --run ID: run ID, refused if ID exists)",
    )
    @argument(
        "--continue",
        dest="follow",
        metavar="RUN",
        nargs="?",
        const="",
        default=None,
        help="give finished run RUN (default: the latest finished one) the cell's text as a follow-up",
    )
    @_with(*_MODEL)
    @argument("--effort", choices=EFFORTS, help="how much effort the model puts in (default: the model's own)")
    @_with(*_LIMITS)
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
    @argument("--mcp", metavar="FILE", help="an mcpServers JSON file (as Claude Desktop writes it): its servers' tools")
    @argument(
        "--kernel-tools",
        action="store_true",
        help="tools over this notebook: list_variables, inspect_variable, run_python (needs approval)",
    )
    @_with(*_PLACE)
    @argument(
        "-o",
        "--output",
        metavar="VAR",
        help="store the run's result (an AgentResult) in this variable; with --background, its handle",
    )
    @line_cell_magic
    def agent(self, line: str, cell: str | None = None) -> None:
        """Run a durable Claude agent on the cell's text (a cell magic: ``%%agent``, two %).

        Every model call and tool call is recorded in the run's log before the run moves on.
        Re-running a finished cell replays it (no model requests); re-running it after a
        kernel restart resumes it where it stopped. Without an API key it uses the offline
        demo model. ``--mcp FILE`` adds the tools of the MCP servers in an ``mcpServers`` JSON
        file (each call a step; external unless the server's config says ``"trusted": true``,
        then its annotations decide); ``--kernel-tools`` lets
        the agent list and inspect this notebook's variables and, with your approval, run
        Python among them. Example::

            %%agent --max-turns 10 --max-usd 2
            The tests in this project fail. Find out why and fix them.

        The model thinks adaptively (its thinking is shown, dimmed, between tools) and the
        conversation is cached between turns (--cache-ttl). A run ends *completed* only when
        the model finished; it may also end truncated (max_tokens), refused, context_full or
        budget_exhausted, each resumable with %agent_resume and the fix it names.
        ``--continue [RUN]`` gives a finished run the cell's text as a follow-up, recorded.

        The agent works in the notebook's folder (or ``--workspace DIR``) and its run_bash
        tool runs real commands there; ``%config AgentMagics.approve_bash = "git push|rm -rf"``
        makes matching commands wait for your approval.

        ``--background`` returns at once: the run goes on in a thread of the kernel while you
        run other cells, and its timeline's buttons work (Stop, Approve/Deny, Rerun/Skip/Fail,
        Resume, Fork from here); every click is a recorded decision, with who made it and the
        reason typed beside it. In the foreground (the default) the cell holds the kernel: the
        interrupt button stops the run and questions come through the input box.

        The other magics:

        * ``%agent_resume [RUN]``: after a crash or a kernel restart (``%load_ext nb_durable``
          first), go on with the named run, or the latest unfinished one, with every setting
          from its log. ``--in-doubt skip|rerun|fail|ask`` settles a tool cut off by the crash;
          ``--max-tokens``, ``--model``, ``--max-usd`` change the run from there (recorded).
        * ``%agent_key [VARIABLE]``: set a key through a hidden prompt, never in the notebook.
        * ``%agent_runs``: every run with its status, steps, tokens and dollars paid and
          saved by replay, and where the runs live.
        * ``%agent_show RUN``: a run's timeline from its log, without running anything.
        * ``%agent_stop [RUN]``, ``%agent_wait [RUN]``: stop a background run at its next step
          boundary; block until it (or every background run) ends, for Run All and nbclient.

        Settings: the flags below, or ``%config AgentMagics.<name> = value`` for every cell
        (``model``, ``store``, ``workspace``, ``max_turns``, ``max_tokens``, ``thinking``,
        ``effort``, ``cache_ttl``, ``max_usd``, ``max_run_tokens``, ``max_concurrent_calls``,
        ``tokens_per_minute``, ``in_doubt``, ``approve_bash``, ``demo``, ``mcp_config``,
        ``kernel_tools``, ``background``); ``%config AgentMagics`` lists them. ``--max-concurrent-calls`` and
        ``--tokens-per-minute`` are limits per endpoint that every kernel using the same store
        shares (a 429's retry-after pauses them all); not recorded.

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
        _check_limits(args)
        from . import cells

        if args.follow is not None:
            changes = _changes(args)
            result = _explained(
                lambda: cells.continue_cell(
                    args.follow or None,
                    cell.strip(),
                    store=args.store or self.store or None,
                    in_doubt=args.in_doubt or self.in_doubt,
                    max_turns=args.max_turns,
                    changes=changes,
                    shared=self._shared(args),
                    background=_in_background(args, self.background),
                )
            )
            self._keep(args.output, result)
            return

        result = _explained(
            lambda: cells.agent_cell(
                cell.strip(),
                run_id=args.run,
                new=args.new,
                model=args.model or self.model,
                demo=args.demo or self.demo,
                max_turns=args.max_turns or self.max_turns,
                max_tokens=args.max_tokens or self.max_tokens,
                thinking=args.thinking or self.thinking,
                effort=args.effort or self.effort or None,  # type: ignore[arg-type]  # both from EFFORTS
                cache_ttl=args.cache_ttl or self.cache_ttl,
                max_usd=args.max_usd or self.max_usd or None,
                max_run_tokens=args.max_run_tokens or self.max_run_tokens or None,
                workspace=args.workspace or self.workspace or None,
                store=args.store or self.store or None,
                in_doubt=args.in_doubt or self.in_doubt,
                approve_bash=self.approve_bash or None,
                crash_at=args.crash_at,
                mcp=args.mcp or self.mcp_config or None,
                kernel_tools=args.kernel_tools or self.kernel_tools,
                shared=self._shared(args),
                background=_in_background(args, self.background),
            )
        )
        self._keep(args.output, result)

    @magic_arguments()
    @argument("run", nargs="?", help="the run id (default: the latest unfinished run)")
    @argument("--in-doubt", choices=IN_DOUBT_CHOICES, help="what to do with a tool cut off by the crash")
    @argument("--max-turns", metavar="N", type=int, help="raise the run's turn limit")
    @_with(*_MODEL)
    @_with(*_LIMITS)
    @argument("--store", metavar="URL", help="where runs live")
    @argument("--crash-at", metavar="N", type=int, help="stop again as step N starts, as a killed kernel would")
    @argument("--mcp", metavar="FILE", help="the mcpServers file to start the run's servers from (default: the recorded one)")
    @argument(
        "--mcp-accept-changes",
        action="store_true",
        help="go on although an MCP tool the run used changed its schema (recorded as a decision)",
    )
    @argument(
        "--rerun-python",
        action="store_true",
        help="first execute the run's recorded run_python code again (replay does not rebuild variables)",
    )
    @_with(*_PLACE)
    @argument("-o", "--output", metavar="VAR", help="store the run's result in this variable; with --background, its handle")
    @line_magic
    def agent_resume(self, line: str) -> None:
        """Resume a run after a crash or a kernel restart, with every setting from its log.

        After a restart, ``%load_ext nb_durable`` and ``%agent_resume`` are all it takes. A
        truncated run continues its turn (or asks it again with a higher --max-tokens); a
        refused or full one asks again (--model moves it to another model); a budget stop
        goes on with a larger --max-usd. Each change is recorded as a decision. A run with
        MCP tools restarts its servers and checks its tools still have the recorded schemas.
        Replay does not re-run ``run_python`` calls, so the variables they defined are gone
        after a restart: ``--rerun-python`` executes the recorded code again first.
        """
        args = parse_argstring(self.agent_resume, line)
        _check_crash_at(args.crash_at)
        _check_limits(args)
        from . import cells

        result = _explained(
            lambda: cells.resume_cell(
                args.run,
                store=args.store or self.store or None,
                in_doubt=args.in_doubt or self.in_doubt,
                max_turns=args.max_turns,
                crash_at=args.crash_at,
                changes=_changes(args),
                mcp=args.mcp or None,
                mcp_accept_changes=args.mcp_accept_changes,
                rerun_python=args.rerun_python,
                shared=self._shared(args),
                background=_in_background(args, self.background),
            )
        )
        self._keep(args.output, result)

    def _shared(self, args: Any) -> CallLimits:
        """The limits shared through the store: the flags, else the settings (unset: the environment's)."""
        return CallLimits(
            args.max_concurrent_calls or self.max_concurrent_calls or None,
            args.tokens_per_minute or self.tokens_per_minute or None,
        )

    def _keep(self, name: str | None, result: Any) -> None:
        """``-o VAR``: put the run's result in the user's namespace."""
        if name:
            assert self.shell is not None
            self.shell.user_ns[name] = result

    @magic_arguments()
    @argument("--store", metavar="URL", help="where runs live")
    @line_magic
    def agent_runs(self, line: str) -> Any:
        """List runs: status, steps, tokens and dollars paid vs saved by replay, last update, and
        the worker (host:pid) that last resumed each (``nb-durable worker``)."""
        args = parse_argstring(self.agent_runs, line)

        from .runs_table import runs_table

        return _explained(lambda: runs_table(args.store or self.store or None))

    @magic_arguments()
    @argument("run", help="the run id")
    @argument("--store", metavar="URL", help="where runs live")
    @line_magic
    def agent_show(self, line: str) -> Any:
        """Draw a run's timeline from its log, without running anything."""
        args = parse_argstring(self.agent_show, line)
        from . import cells

        return _explained(lambda: cells.show_run(args.run, args.store or self.store or None))

    @magic_arguments()
    @argument("variable", nargs="?", default="ANTHROPIC_API_KEY", help="the variable to set (default: ANTHROPIC_API_KEY)")
    @line_magic
    def agent_key(self, line: str) -> None:
        """Ask for an API key with a hidden prompt and set it for this kernel; never echoed, never saved.

        Use it instead of ``%env ANTHROPIC_API_KEY=...``, which saves the key in the notebook.
        The key lives in this kernel's environment only (run it again after a restart); tools
        never see it, and it is masked in their output.
        """
        args = parse_argstring(self.agent_key, line)
        from .keys import read_key

        try:
            print(read_key(args.variable))
        except ValueError as e:
            raise UsageError(str(e)) from None
        except NotImplementedError:  # IPython's StdinNotImplementedError: nobody to ask (nbclient)
            raise UsageError(
                f"this front end cannot ask for input, so %agent_key cannot read {args.variable}: set it "
                "in the environment Jupyter (or nbclient) starts in instead"
            ) from None


def load(ipython: Any) -> None:
    """Register the magics (``%load_ext``, ``%reload_ext`` and IPython config all come here)."""
    from .background import stop_at_shutdown
    from .control_magics import RunControlMagics

    ipython.register_magics(AgentMagics)
    ipython.register_magics(RunControlMagics)
    stop_at_shutdown(ipython)


def unload(ipython: Any) -> None:
    """Remove the magics and their configurable."""
    manager = ipython.magics_manager
    for kind in ("line", "cell"):
        for name in ("agent", "agent_resume", "agent_runs", "agent_show", "agent_key", "agent_stop", "agent_wait"):
            manager.magics[kind].pop(name, None)
    ipython.configurables[:] = [c for c in ipython.configurables if not isinstance(c, AgentMagics)]
    manager.registry.pop("AgentMagics", None)
    manager.registry.pop("RunControlMagics", None)
