"""The notebook layer: the only place IPython and ipywidgets are imported.

``extension`` holds the ``%load_ext`` hooks, ``magics`` the (thin) magics, ``cells`` what one
magic call does, ``timeline`` the live widget and ``render`` the static HTML it leaves. The
names below load on first use, so ``%load_ext nb_durable`` does not import ipywidgets.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import exports as _exports

_PUBLIC: dict[str, str] = {"AgentMagics": "magics", "StaticTimeline": "timeline", "Timeline": "timeline"}

__all__ = sorted(_PUBLIC)

if TYPE_CHECKING:
    from .magics import (
        AgentMagics as AgentMagics,
    )
    from .timeline import (
        StaticTimeline as StaticTimeline,
    )
    from .timeline import (
        Timeline as Timeline,
    )

__getattr__, __dir__ = _exports(__name__, _PUBLIC)
