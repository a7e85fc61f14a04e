"""nb_durable: durable agents for Jupyter.

Every model call and every tool call is a *step* whose result is written to an append-only
log before the run moves on; after a crash or a kernel restart the run replays the recorded
steps (executing nothing) and continues live from the first unrecorded one.

``%load_ext nb_durable`` adds the ``%%agent`` magics; ``run_agent``/``resume_agent`` run the
same durable agent from Python; ``EventLog``/``run_step`` and ``durable_run``/``@step`` make
any Python code durable. The rest lives in ``nb_durable.errors`` (every error),
``nb_durable.agent`` (models, tools, observers, settings) and ``nb_durable.testing`` (the
scripted model and the store contract suite).

Every public name below loads on first use (PEP 562): the names are written once, as the
re-exports of the ``TYPE_CHECKING`` block, from which ``_lazy.exports`` derives the table
``_PUBLIC`` and ``__all__``. So ``import nb_durable``, the CLI and ``%load_ext`` pay only
for what they touch, and neither IPython, ipywidgets nor anthropic is imported until
something needs it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import exports as _exports

__version__ = "0.1.0"

if TYPE_CHECKING:
    from .agent.models.anthropic import (
        AnthropicModel as AnthropicModel,
    )
    from .agent.models.demo import (
        DemoModel as DemoModel,
    )
    from .agent.run.hooks import (
        Approval as Approval,
    )
    from .agent.run.loop import (
        continue_agent as continue_agent,
    )
    from .agent.run.loop import (
        resume_agent as resume_agent,
    )
    from .agent.run.loop import (
        run_agent as run_agent,
    )
    from .agent.run.outcomes import (
        AgentResult as AgentResult,
    )
    from .agent.tools import (
        ToolRegistry as ToolRegistry,
    )
    from .agent.tools import (
        tool as tool,
    )
    from .agent.tools.mcp import (
        mcp_tools as mcp_tools,
    )
    from .core.codec import (
        request_hash as request_hash,
    )
    from .core.context import (
        current_step as current_step,
    )
    from .core.durable import (
        durable_run as durable_run,
    )
    from .core.durable import (
        step as step,
    )
    from .core.in_doubt import (
        OutcomeUnknown as OutcomeUnknown,
    )
    from .core.log import (
        EventLog as EventLog,
    )
    from .core.log import (
        run_step as run_step,
    )
    from .core.runs import (
        list_runs as list_runs,
    )
    from .core.runs import (
        read_run as read_run,
    )
    from .core.steps import (
        StepRecord as StepRecord,
    )
    from .core.stores import (
        Store as Store,
    )
    from .core.stores import (
        open_store as open_store,
    )
    from .core.whole_runs.fork import (
        fork as fork,
    )
    from .core.whole_runs.transfer import (
        copy_runs as copy_runs,
    )
    from .errors import (
        DivergenceError as DivergenceError,
    )
    from .errors import (
        InDoubtError as InDoubtError,
    )
    from .errors import (
        NbDurableError as NbDurableError,
    )
    from .errors import (
        RunError as RunError,
    )
    from .errors import (
        RunFailedError as RunFailedError,
    )
    from .errors import (
        RunLockedError as RunLockedError,
    )
    from .errors import (
        RunNotFoundError as RunNotFoundError,
    )
    from .errors import (
        StoreError as StoreError,
    )
    from .jupyter.magics import (
        load_ipython_extension as load_ipython_extension,
    )
    from .jupyter.magics import (
        unload_ipython_extension as unload_ipython_extension,
    )

# name -> the submodule that defines it, read from the block above: the one list of the names.
_PUBLIC, __getattr__, __dir__ = _exports(__name__)
__all__ = sorted([*_PUBLIC, "__version__"])
