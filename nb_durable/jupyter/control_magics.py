"""``%agent_stop`` and ``%agent_wait``: reach a run going on in the background of this kernel.

Thin like the other magics: parse, turn a mistake (no such background run, a bad timeout)
into ``UsageError``, and make one call into ``background``. ``%agent_wait`` makes a
notebook that starts runs with ``--background`` run top to bottom under Run All and
nbclient: it blocks until the run ends and fails the cell if the run did not complete, as
the foreground cell would have.
"""

from __future__ import annotations

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments

from ..agent.run.stopping import RunStopped
from ..agent.settings.flags import number_from_zero
from ..errors import NbDurableError, SimulatedCrash
from .flags import arguments_of, short_paragraph, user_mistakes, variable_name

__all__ = ["RunControlMagics"]


@magics_class
class RunControlMagics(Magics):
    """Stop and wait for background runs (``%%agent --background``)."""

    def _store(self) -> str | None:
        """The store ``%config AgentMagics.store`` names (None: the default), where a run another
        process writes is found."""
        assert self.shell is not None
        agent = next((c for c in self.shell.configurables if type(c).__name__ == "AgentMagics"), None)
        store = getattr(agent, "store", None)
        return store if isinstance(store, str) else None

    @magic_arguments()
    @argument("run", nargs="?", help="the run id (default: the only run going on in the background)")
    @line_magic
    def agent_stop(self, line: str) -> None:
        """Stop a background run at its next step boundary, recorded as interrupted; returns at once.

        A model call in flight is let finish (it is paid for either way); a running run_bash
        command is killed, and its step is in doubt. ``%agent_resume RUN`` goes on later.
        """
        args = arguments_of(self.agent_stop, line)
        from .background import stop_run

        handle = user_mistakes(lambda: stop_run(args.run, self._store()))
        print(f"nb_durable: run {handle.run_id} stops at its next step boundary; %agent_wait {handle.run_id} waits for it")

    @magic_arguments()
    @argument("run", nargs="?", help="the run id (default: every run going on in the background, and every one that ended unseen by a wait)")
    @argument("--timeout", metavar="S", type=number_from_zero, help="give up waiting after S seconds (the run goes on)")
    @argument("--store", metavar="URL", help="where a run another process runs is found (default: %%config AgentMagics.store)")
    @argument(
        "-o", "--output", metavar="VAR", type=variable_name,
        help="store the run's result in this variable (an AgentResult; of a run another process ran, its RunResult)",
    )  # fmt: skip
    @line_magic
    def agent_wait(self, line: str) -> None:
        """Block until a background run ends (or all of them); its timeline, in the cell that started it, freezes as recorded.

        Named no run, it also reports a run that ended before any wait saw it (a fast failure
        under Run All), unless a later cell went on with that run. A named run that another
        process runs (a worker, another kernel), or one queued for a worker, is waited for
        through its store, as ``nb-durable wait RUN`` waits.

        The cell fails if the run did not complete (failed, stopped, in doubt), as a foreground
        ``%%agent`` cell would, so Run All and nbclient stop there. The kernel's interrupt
        button stops the waiting, not the run (``%agent_stop`` stops the run). So does a
        question the run asks (approve a command, settle a step in doubt): no click reaches
        a kernel this cell holds, so the cell fails at once saying what is asked; answer it
        with the buttons or the run's handle, then wait again (a run another process runs is
        waited for while it asks: it is answered there).
        """
        args = arguments_of(self.agent_wait, line)
        if args.timeout is not None and not args.timeout > 0:
            raise UsageError(f"--timeout is a positive number of seconds, not {args.timeout}")
        from .background import wait_run

        try:
            result = user_mistakes(lambda: wait_run(args.run, args.timeout, self._store() if args.store is None else args.store))
        except (NbDurableError, TimeoutError, RunStopped, SimulatedCrash) as e:
            raise short_paragraph(e) from None  # the run did not complete: the cell fails, as in the foreground
        except KeyboardInterrupt:
            print("nb_durable: stopped waiting; the run goes on (in this kernel's background, %agent_stop stops it)")
            return
        if args.output:
            assert self.shell is not None
            self.shell.user_ns[args.output] = result
