"""A run's settings: THE table (``table``), and all that is derived from it.

``table`` declares every setting once: ``AgentSettings`` (recorded when a run starts),
``SessionOptions`` (one session's, never recorded) and ``FrontEndOptions`` (a front end's
choices before a run), each setting declared with its ``columns``. ``rows`` reads them as
rows and derives the values' checks and JSON; ``change`` is what a resume or a follow-up may
change; ``flags`` makes the CLI's flags and the magics' arguments. Nothing here imports
the SDK or anything of Jupyter.
"""

from __future__ import annotations

from .change import CHANGEABLE as CHANGEABLE
from .change import Change as Change
from .rows import Setting as Setting
from .rows import rows_of as rows_of
from .table import *  # noqa: F403  (the table's names, as its __all__ lists them)
from .table import __all__ as _TABLE

__all__ = sorted([*_TABLE, "CHANGEABLE", "Change", "Setting", "rows_of"])
