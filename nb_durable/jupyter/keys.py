"""``%agent_key``: set an API key for this kernel without it ever reaching a cell or its output.

``%env ANTHROPIC_API_KEY=sk-...`` writes the key into the cell's source and echoes it in the
output, and both are saved with the notebook. ``read_key`` asks for it with ``getpass``
instead (the front end shows a password box; nothing typed is echoed or stored in the
notebook or in IPython's history) and puts it in ``os.environ`` of this kernel only. The
other safe way is the environment Jupyter starts in (``ANTHROPIC_API_KEY=... jupyter lab``,
or a secrets manager that sets it).
"""

from __future__ import annotations

import getpass
import os
import re

from ..agent.secrets.redaction import is_secret_name

__all__ = ["DEFAULT_KEY_VARIABLE", "read_key"]

DEFAULT_KEY_VARIABLE = "ANTHROPIC_API_KEY"
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def read_key(variable: str = DEFAULT_KEY_VARIABLE) -> str:
    """Ask for ``variable``'s value with getpass, set it in ``os.environ``; return what to tell the person.

    ValueError (with what to do) for a name that is not a variable's or that does not hold a
    secret, and for an empty answer (the variable is left as it was).
    """
    if not _NAME.match(variable):
        raise ValueError(f"{variable!r} is not an environment variable name; try %agent_key ANTHROPIC_API_KEY")
    if not is_secret_name(variable):
        raise ValueError(
            f"{variable} is not named like a credential (KEY, TOKEN, SECRET, PASSWORD, ...), so it would be "
            "neither stripped from tool environments nor masked; set ordinary variables with %env"
        )
    value = getpass.getpass(f"{variable} (typed text is hidden and not saved in the notebook): ").strip()
    if not value:
        raise ValueError(f"nothing was entered, so {variable} is unchanged")
    was_set = variable in os.environ
    os.environ[variable] = value
    return (
        f"{variable} is {'replaced' if was_set else 'set'} for this kernel ({len(value)} characters, not shown). "
        "It lives in this kernel's memory only: after a restart, run %agent_key again."
    )
