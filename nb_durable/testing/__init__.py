"""Helpers for people who test with nb_durable: a scripted model and the store contract.

Two things live here, both usable without pytest (nothing here imports pytest, IPython or
the anthropic SDK):

* ``ScriptedModel`` answers the agent's requests from a queue, with no key and no network;
  ``text_message``, ``tool_use_message``, ``make_message``, ``usage`` and ``api_error`` build
  what it answers with, exactly as the API would send it::

      model = ScriptedModel([tool_use_message([("run_bash", {"command": "ls"})]), text_message("done")])
      run_agent("list the files", client=model, workspace=tmp)

* ``check_store(fresh)`` (from ``store_contract``) runs the contract every store passes (memory, JSONL, SQLite,
  PostgreSQL, and a store of your own) against fresh stores, one per check::

      check_store(lambda: MyStore(new_empty_location()))

  ``STORE_CONTRACT`` holds the same checks as plain functions of a store spec, so a test
  runner can make each one a test case (``pytest.mark.parametrize("check", STORE_CONTRACT,
  ids=lambda c: c.__name__)``). A check passes by returning and fails by raising, usually
  ``AssertionError``.
"""

from __future__ import annotations

from ..agent.models.messages import api_error, make_message, text_message, tool_use_message, usage
from ..agent.models.scripted import ScriptedModel
from .store_contract import STORE_CONTRACT, check_store

__all__ = [
    "STORE_CONTRACT",
    "ScriptedModel",
    "api_error",
    "check_store",
    "make_message",
    "text_message",
    "tool_use_message",
    "usage",
]
