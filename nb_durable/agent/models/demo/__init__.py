"""The offline demo: an agent (``DemoModel``) that fixes a bundled project with the real tools.

``workspace`` ships the project and copies it where a run can work on it; ``scenario`` is what
the demo agent does, step by step, driven by what its tools return; ``reading`` is how it reads
that output; ``model`` answers Messages API requests from the scenario. No key, no network,
and nothing here imports ``anthropic``.
"""

from __future__ import annotations

from .model import LATENCY_ENV, DemoModel
from .scenario import DEMO_TASK
from .workspace import prepare_demo_workspace

__all__ = ["DEMO_TASK", "LATENCY_ENV", "DemoModel", "prepare_demo_workspace"]
