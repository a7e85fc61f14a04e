"""Prices: overrides over genai-prices over the bundled table, which agrees with genai-prices."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from nb_durable.agent.money.cost import Usage
from nb_durable.agent.money.prices import (
    DEFAULT_PRICES,
    Price,
    bundled_price,
    genai_price,
    price_for,
    price_of_reply,
)

REPO = Path(__file__).resolve().parents[2]
needs_genai_prices = pytest.mark.skipif(
    sys.version_info < (3, 11), reason="genai-prices supports Python 3.11 and later"
)
# Model names a reply or a user may use: genai-prices' ids, their dated snapshots, and ours.
SNAPSHOT = "-20260101"
# genai-prices' names (price keys) for Price's rates.
GENAI_KEYS = {
    "input": "input_mtok",
    "output": "output_mtok",
    "cache_read": "cache_read_mtok",
    "cache_write_5m": "cache_write_mtok",
    "cache_write_1h": "cache_write_1h_mtok",
}


def anthropic_models() -> list[Any]:
    from genai_prices.data_snapshot import get_snapshot

    provider = next(p for p in get_snapshot().providers if p.id == "anthropic")
    return list(provider.models)


def genai_rates(prices: Any, tier: int = 0) -> dict[str, float]:
    """genai-prices' own rates for a model, read straight from its data (only those it has)."""
    out: dict[str, float] = {}
    thresholds: list[int] = []
    for key, name in GENAI_KEYS.items():
        value = getattr(prices, name)
        if value is None:
            continue
        if isinstance(value, Decimal):
            out[key] = float(value)
        else:
            thresholds = [t.start for t in value.tiers]
            out[key] = float(value.base if tier == 0 else value.tiers[tier - 1].price)
    if tier < len(thresholds):
        out["long_above"] = thresholds[tier]
        out.update({f"long.{k}": v for k, v in genai_rates(prices, tier + 1).items()})
    return out


@needs_genai_prices
def test_the_bundled_table_agrees_with_genai_prices_for_every_model_both_know() -> None:
    now = datetime.now(tz=timezone.utc)
    names: dict[str, Any] = {}  # a model name -> genai-prices' model it matches
    models = anthropic_models()
    for model in models:
        for name in (model.id, model.id + SNAPSHOT, *DEFAULT_PRICES):
            if model.is_match(name) and not any(m.is_match(name) for m in models[: models.index(model)]):
                names.setdefault(name, model)
    assert len({m.id for m in names.values()}) == len(models), "a genai-prices model went unchecked"
    diffs = []
    for name, model in sorted(names.items()):
        theirs = genai_rates(model.get_prices(now))
        bundled = bundled_price(name)
        if bundled is None:
            diffs.append(f"{name}: missing from the bundled table (genai-prices: {theirs})")
            continue
        ours = bundled.rates()
        for key, value in theirs.items():
            if ours.get(key) != pytest.approx(value):
                diffs.append(
                    f"{name} (bundled entry {bundled.model!r}, genai-prices {model.id!r}): "
                    f"{key} bundled {ours.get(key)} != genai-prices {value}"
                )
        extra = sorted(k for k in ours if k.startswith("long") and k not in theirs)
        if extra:
            diffs.append(f"{name}: bundled has long-context rates genai-prices lacks: {extra}")
    assert not diffs, "the bundled table disagrees with genai-prices:\n" + "\n".join(diffs)


def realistic_usages() -> list[Usage]:
    """One turn early in a run, one deep into it with a warm cache, one past the long-context line."""
    return [
        Usage(3_200, 450, 0, 0),
        Usage(1_150, 900, 11_000, 38_000, cache_creation_1h_input_tokens=8_000),
        Usage(2_000, 1_200, 20_000, 210_000, cache_creation_1h_input_tokens=5_000),
    ]


@needs_genai_prices
def test_dollars_match_genai_prices_calc_price_for_every_anthropic_model() -> None:
    from genai_prices import Usage as GenaiUsage
    from genai_prices import calc_price

    diffs = []
    for model in anthropic_models():
        has_cache = model.get_prices(datetime.now(tz=timezone.utc)).cache_read_mtok is not None
        for given in realistic_usages():
            usage = given if has_cache else Usage(given.input_tokens, given.output_tokens)
            theirs = calc_price(
                GenaiUsage(
                    input_tokens=usage.prompt_tokens,
                    output_tokens=usage.output_tokens,
                    cache_read_tokens=usage.cache_read_input_tokens,
                    cache_write_tokens=usage.cache_creation_input_tokens,
                    cache_write_1h_tokens=usage.cache_creation_1h_input_tokens,
                ),
                model.id,
                provider_id="anthropic",
            ).total_price
            for price in (price_for(model.id), bundled_price(model.id)):
                assert price is not None
                if price.dollars(usage) != pytest.approx(float(theirs), rel=1e-9):
                    diffs.append(f"{model.id} ({price.source}) {usage}: {price.dollars(usage)} != {theirs}")
    assert not diffs, "\n".join(diffs)


@needs_genai_prices
def test_genai_prices_prices_what_it_knows_and_the_table_the_rest() -> None:
    assert price_for("claude-sonnet-5-5").source == "genai-prices"
    assert price_for("claude-sonnet-4-5-20250929").model == "claude-sonnet-4-5"
    # genai-prices matches only exact names and dated snapshots of the 5.x models.
    preview = price_for("claude-sonnet-5-5-preview")
    assert (preview.source, preview.model) == ("bundled", "claude-sonnet-5-5")
    assert genai_price("demo") is None and price_for("demo").source == "bundled"


def test_list_prices_of_todays_models() -> None:
    sonnet = price_for("claude-sonnet-5-5")
    assert (sonnet.input, sonnet.output, sonnet.cache_write_5m, sonnet.cache_write_1h) == (2, 10, 2.5, 4)
    assert sonnet.cache_read == pytest.approx(0.1)
    opus = price_for("claude-opus-5-5-20260301")
    assert (opus.input, opus.output) == (4, 20)
    assert price_for("claude-opus-4-1").input == 15
    assert price_for("claude-haiku-4-5").output == 5
    assert price_for("something-else").rates() == price_for("claude-sonnet-5-5").rates()


def test_overrides_win_over_every_table() -> None:
    mine = Price.simple(1, 2)
    chosen = price_for("claude-sonnet-5-5-20260101", {"claude-sonnet": mine})
    assert chosen.rates() == mine.rates() and (chosen.source, chosen.model) == ("override", "claude-sonnet")
    assert price_for("claude-opus-5-5", {"claude-sonnet": mine}).source != "override"
    assert Price.simple(4, 20).rates() == {
        "input": 4,
        "output": 20,
        "cache_read": pytest.approx(0.4),
        "cache_write_5m": 5,
        "cache_write_1h": 8,
    }


def test_the_demo_models_price_is_simulated() -> None:
    demo = price_for("demo")
    assert demo.simulated and demo.model == "demo"
    assert demo.rates() == price_for("claude-sonnet-5-5").rates()
    assert not price_for("claude-sonnet-5-5").simulated


def test_a_reply_is_priced_by_the_model_that_answered() -> None:
    assert price_of_reply({"model": "claude-opus-5-5-20260301"}, "claude-sonnet-5-5").input == 4
    # A name no table knows (a scripted model's) is priced as the model that was asked for.
    assert price_of_reply({"model": "scripted"}, "claude-opus-4-1").input == 15
    assert price_of_reply({}, "claude-haiku-4-5").input == 1
    assert price_of_reply({"model": "demo"}, "claude-sonnet-5-5").simulated
    mine = Price.simple(1, 2)
    assert price_of_reply({"model": "claude-opus-5-5"}, "x", {"claude-opus": mine}).source == "override"


def test_without_genai_prices_the_bundled_table_prices_everything() -> None:
    script = """
import json, sys
sys.modules["genai_prices"] = None  # as if it were not installed
from nb_durable.agent.money.prices import price_for
out = {m: [price_for(m).source, price_for(m).model, price_for(m).rates(), price_for(m).simulated]
       for m in ("claude-sonnet-5-5-20260101", "claude-opus-5-5", "demo", "scripted")}
print(json.dumps(out))
"""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", script],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert {m: v[0] for m, v in out.items()} == dict.fromkeys(out, "bundled")
    assert out["claude-sonnet-5-5-20260101"][1] == "claude-sonnet-5-5"
    assert out["claude-sonnet-5-5-20260101"][2]["input"] == 2 and out["claude-opus-5-5"][2]["output"] == 20
    assert out["demo"][3] is True and out["scripted"][1] == "claude-sonnet-5-5"
