"""The notebook layer: the only place IPython and ipywidgets are imported.

``magics`` holds the (thin) magics and the ``%load_ext`` hooks, ``cells`` what one
magic call does, ``timeline`` the live widget, ``render`` the static HTML it leaves, and ``namespace``
the agent's tools over the notebook's own variables (``kernel_tools``). The
names below load on first use, so ``%load_ext nb_durable`` does not import ipywidgets.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import exports as _exports

if TYPE_CHECKING:
    from .magics import (
        AgentMagics as AgentMagics,
    )
    from .namespace import (
        kernel_tools as kernel_tools,
    )
    from .timeline import (
        StaticTimeline as StaticTimeline,
    )
    from .timeline import (
        Timeline as Timeline,
    )

# name -> the submodule that defines it, read from the block above: the one list of the names.
_PUBLIC, __getattr__, __dir__ = _exports(__name__)
__all__ = sorted(_PUBLIC)
