"""``but`` on a settings value: nothing changed is the value itself, a change is checked as any value is.

A run asks its settings ``but()`` before every model call, mostly with no changes: returning
the value (frozen, checked when made) spares a copy and a second pass over every row's check.
"""

from __future__ import annotations

import pytest

from nb_durable.agent.settings import AgentSettings, SessionOptions
from nb_durable.errors import SettingError


def test_but_with_no_changes_is_the_value_itself() -> None:
    settings = AgentSettings(task="Tidy up.", max_turns=3)
    options = SessionOptions(max_concurrent_calls=2)
    assert settings.but() is settings
    assert options.but() is options


def test_but_with_a_change_is_a_new_value_checked_as_any() -> None:
    settings = AgentSettings(task="Tidy up.", max_turns=3)
    changed = settings.but(max_turns=5)
    assert changed is not settings and changed.max_turns == 5 and settings.max_turns == 3
    assert changed == AgentSettings(task="Tidy up.", max_turns=5)
    with pytest.raises(SettingError, match=r"^max_turns must be at least 1, not 0$") as refused:
        settings.but(max_turns=0)
    with pytest.raises(SettingError) as made:
        AgentSettings(task="Tidy up.", max_turns=0)
    assert str(refused.value) == str(made.value), "the same error as the value made afresh"
    with pytest.raises(SettingError, match=r"^max_usd must be a positive number of dollars, not -1$"):
        settings.but(max_usd=-1)
    with pytest.raises(SettingError, match=r"^max_concurrent_calls must be at least 1, not 0$"):
        SessionOptions().but(max_concurrent_calls=0)
