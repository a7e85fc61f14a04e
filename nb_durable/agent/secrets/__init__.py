"""Secrets never leave a tool: kept out of its environment, masked in its output.

``environment`` says which variables hold secrets and strips them from a tool's
environment; ``redaction`` holds the credentials a model object was given, and masks known
values in every form (``Redactor``, ``RedactingStream``); ``formats`` knows the forms a value may take and the well-known
credential formats masked even when no variable holds them; ``dumps`` reads the rows of a
hex dump back as the bytes they show.
"""

from __future__ import annotations

from .redaction import *  # noqa: F403  (the concept's names, as redaction's __all__ lists them)
from .redaction import __all__ as __all__
