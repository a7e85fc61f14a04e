"""The durable agent: a folder per concept, nothing of Jupyter.

``settings`` (the settings table and the values derived from it), ``run`` (the loop, its
session, seams and points), ``models`` (the SDK's one importer, the scripted and demo
models, retries), ``tools`` and ``workspace`` (what the agent can do, confined), ``display``
(views, progress, exports, traces), ``money`` (prices, cost, budgets), ``fleet`` (background
runs, decisions, workers, batches, shared limits) and ``secrets``. Core + the anthropic SDK
(imported only when a real request is made); nothing here imports Jupyter. ``nb_durable`` exports the entry points people start with (``run_agent``,
``resume_agent``, ``AnthropicModel``, ``DemoModel``, ``ToolRegistry``, ``tool``); this
module holds the rest of the agent's public names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import exports as _exports
from .money import figures as _figures  # noqa: F401  (registers the run index's counter of tokens and dollars)

if TYPE_CHECKING:
    from .delegation.tree import (
        child_ids as child_ids,
    )
    from .display.progress import (
        TextProgress as TextProgress,
    )
    from .display.tracing import (
        TraceObserver as TraceObserver,
    )
    from .display.views import (
        RunView as RunView,
    )
    from .display.views import (
        StepId as StepId,
    )
    from .display.views import (
        StepView as StepView,
    )
    from .display.views import (
        ToolCall as ToolCall,
    )
    from .display.views import (
        view_of as view_of,
    )
    from .display.views import (
        views_of as views_of,
    )
    from .fleet.background_runs import (
        BackgroundRun as BackgroundRun,
    )
    from .fleet.background_runs import (
        background as background,
    )
    from .fleet.batch import (
        BatchHandle as BatchHandle,
    )
    from .fleet.batch import (
        batch_handle as batch_handle,
    )
    from .fleet.batch import (
        submit as submit,
    )
    from .fleet.batch import (
        submit_batch as submit_batch,
    )
    from .fleet.batch_file import (
        BatchTask as BatchTask,
    )
    from .fleet.batch_file import (
        read_batch as read_batch,
    )
    from .fleet.decisions import (
        PendingDecision as PendingDecision,
    )
    from .fleet.worker import (
        ResumeWorker as ResumeWorker,
    )
    from .models.anthropic import (
        AnthropicModel as AnthropicModel,
    )
    from .models.base import (
        Model as Model,
    )
    from .models.demo import (
        DemoModel as DemoModel,
    )
    from .models.demo import (
        prepare_demo_workspace as prepare_demo_workspace,
    )
    from .models.retry import (
        RetryPolicy as RetryPolicy,
    )
    from .money.cost import (
        Cost as Cost,
    )
    from .money.cost import (
        Price as Price,
    )
    from .money.cost import (
        Usage as Usage,
    )
    from .money.cost import (
        price_for as price_for,
    )
    from .run.crash import (
        CrashAt as CrashAt,
    )
    from .run.crash import (
        CrashPoint as CrashPoint,
    )
    from .run.crash import (
        KillAt as KillAt,
    )
    from .run.hooks import (
        Approval as Approval,
    )
    from .run.hooks import (
        Approver as Approver,
    )
    from .run.hooks import (
        DisplayWarning as DisplayWarning,
    )
    from .run.hooks import (
        InDoubtAsker as InDoubtAsker,
    )
    from .run.hooks import (
        Observer as Observer,
    )
    from .run.hooks import (
        Observers as Observers,
    )
    from .run.hooks import (
        RunHooks as RunHooks,
    )
    from .run.loop import (
        continue_agent as continue_agent,
    )
    from .run.loop import (
        resume_agent as resume_agent,
    )
    from .run.loop import (
        run_agent as run_agent,
    )
    from .run.outcomes import (
        AgentResult as AgentResult,
    )
    from .run.prepare import (
        PreparedRun as PreparedRun,
    )
    from .run.prepare import (
        prepare_run as prepare_run,
    )
    from .run.prepare import (
        run_id_for as run_id_for,
    )
    from .run.session import (
        EndpointChangedWarning as EndpointChangedWarning,
    )
    from .run.stopping import (
        RunStopped as RunStopped,
    )
    from .settings import (
        DEFAULT_CACHE_TTL as DEFAULT_CACHE_TTL,
    )
    from .settings import (
        DEFAULT_IN_DOUBT as DEFAULT_IN_DOUBT,
    )
    from .settings import (
        DEFAULT_MAX_TOKENS as DEFAULT_MAX_TOKENS,
    )
    from .settings import (
        DEFAULT_MAX_TURNS as DEFAULT_MAX_TURNS,
    )
    from .settings import (
        DEFAULT_MODEL as DEFAULT_MODEL,
    )
    from .settings import (
        DEFAULT_SYSTEM as DEFAULT_SYSTEM,
    )
    from .settings import (
        DEFAULT_THINKING as DEFAULT_THINKING,
    )
    from .settings import (
        EFFORTS as EFFORTS,
    )
    from .settings import (
        IN_DOUBT_CHOICES as IN_DOUBT_CHOICES,
    )
    from .settings import (
        AgentSettings as AgentSettings,
    )
    from .settings import (
        Change as Change,
    )
    from .settings import (
        SessionOptions as SessionOptions,
    )
    from .tools import (
        Tool as Tool,
    )
    from .tools import (
        ToolContext as ToolContext,
    )
    from .tools import (
        ToolRegistry as ToolRegistry,
    )
    from .tools import (
        ToolResult as ToolResult,
    )
    from .tools import (
        builtin_tools as builtin_tools,
    )
    from .tools import (
        tool as tool,
    )
    from .tools.mcp import (
        McpToolset as McpToolset,
    )
    from .tools.mcp import (
        mcp_example_config as mcp_example_config,
    )
    from .tools.mcp import (
        mcp_tools as mcp_tools,
    )
    from .tools.mcp import (
        tools_for_run as tools_for_run,
    )

# name -> the submodule that defines it, read from the block above: the one list of the names.
_PUBLIC, __getattr__, __dir__ = _exports(__name__)
__all__ = sorted(_PUBLIC)
