"""The IPython extension hooks: ``%load_ext nb_durable`` and ``%unload_ext nb_durable``.

IPython looks these up on the ``nb_durable`` package; they load the magics module only when
called, so importing the package never imports IPython.
"""

from __future__ import annotations

from typing import Any

__all__ = ["load_ipython_extension", "unload_ipython_extension"]


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext nb_durable``: register the agent magics."""
    from .magics import load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext nb_durable``: remove the agent magics."""
    from .magics import unload

    unload(ipython)
