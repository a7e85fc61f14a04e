"""Tokens and dollars, paid live versus served by replay."""

from __future__ import annotations

import pytest

from nb_durable.agent.cost import Cost, Price, Usage, price_for


def test_usage_is_read_from_a_message_and_adds_up() -> None:
    message = {"usage": {"input_tokens": 100, "output_tokens": 20, "cache_read_input_tokens": 50, "cache_creation_input_tokens": None}}
    usage = Usage.of(message)
    assert usage == Usage(100, 20, 0, 50)
    assert (usage + usage).total == 340
    assert Usage.of({}) == Usage()


def test_prices_match_the_longest_prefix_and_can_be_overridden() -> None:
    assert price_for("claude-opus-4-5-20251101").input == 5
    assert price_for("claude-opus-4-1").input == 15
    assert price_for("claude-haiku-4-5").output == 5
    assert price_for("something-else") == price_for("claude-sonnet-4-5")
    mine = Price.simple(1, 2)
    assert price_for("claude-opus-4-5", {"claude-opus-4-5": mine}) is mine


def test_dollars_follow_the_table_including_cache_tokens() -> None:
    price = Price(input=3, output=15, cache_write=3.75, cache_read=0.3)
    usage = Usage(1_000_000, 100_000, 200_000, 1_000_000)
    assert price.dollars(usage) == pytest.approx(3 + 1.5 + 0.75 + 0.3)


def test_cost_splits_paid_from_saved() -> None:
    price = Price.simple(3, 15)
    cost = Cost().add(Usage(1000, 100), price, replayed=False).add(Usage(2000, 200), price, replayed=True)
    assert cost.paid == Usage(1000, 100) and cost.saved == Usage(2000, 200)
    assert cost.paid_dollars == pytest.approx(0.0045)
    assert cost.saved_dollars == pytest.approx(0.009)
    assert cost.to_json()["saved"]["input_tokens"] == 2000
