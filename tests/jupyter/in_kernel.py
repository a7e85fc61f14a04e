"""Run inside a test kernel: what it was when it started, and ``reset``, which brings it back.

A kernel shared by the tests of a module (``tests/jupyter/conftest.py``) imports this module
first thing, so ``START_ENV`` is its environment as started. Between two tests ``reset``
stops every background run of the kernel and waits for each to record its stop, closes every
widget, puts the environment back (plus the next test's Messages API), moves to the next
test's folder, and unloads nb_durable and imports it again from scratch, so its module state
(the registries of background runs and timelines, keys held, memory stores) and its
configuration start empty as in a new kernel; the cell that calls it then ends with
``%reset -f`` (the user namespace). The SDK and Jupyter's libraries stay imported: that is
what sharing saves. ``test_shared_kernel.py`` checks that a test finds nothing of the one
before.
"""

from __future__ import annotations

import os
import sys
from typing import Any

START_ENV = dict(os.environ)


def reset(cwd: str, env: dict[str, str]) -> None:
    """Make this kernel as a fresh one started in ``cwd`` with ``env`` added would be."""
    from IPython import get_ipython

    import nb_durable.agent

    # Wherever the background runs live, stop_all is beside BackgroundRun (one concept).
    runs: Any = sys.modules[nb_durable.agent.BackgroundRun.__module__]
    runs.stop_all("stopped between two tests of a shared kernel")
    going = [run.run_id for run in runs.background_runs()]
    if going:
        raise RuntimeError(f"background runs {going} did not stop: this kernel cannot be shared")
    widgets = sys.modules.get("ipywidgets")
    if widgets is not None:
        widgets.Widget.close_all()
    shell = get_ipython()
    shell.run_line_magic("unload_ext", "nb_durable")
    background = sys.modules.get("nb_durable.jupyter.background")
    if background is not None and hasattr(background, "_on_exit_now"):
        shell.unobserve(background._on_exit_now, names="exit_now")
    for name in [m for m in sys.modules if m == "nb_durable" or m.startswith("nb_durable.")]:
        del sys.modules[name]
    for name in ("AgentMagics", "RunControlMagics"):
        shell.config.pop(name, None)
    os.environ.clear()
    os.environ.update(START_ENV)
    os.environ.update(env)
    os.chdir(cwd)
    shell.run_line_magic("load_ext", "nb_durable")
