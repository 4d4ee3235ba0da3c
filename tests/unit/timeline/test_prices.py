"""Pricing: the provider the call ran on, cache tokens at their rates, unknown means unpriced."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from genai_prices import Usage as LibraryUsage
from genai_prices import calc_price

from watchkeeper.config import PriceOverride
from watchkeeper.errors import ConfigError
from watchkeeper.records.timeline import Usage
from watchkeeper.timeline.prices import NOT_A_CALL, OVERRIDE_VERSION, Pricer

AT = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
MILLION = Usage(input_tokens=1_000_000, output_tokens=1_000_000)


def test_the_same_model_on_two_providers_has_two_prices() -> None:
    pricer = Pricer()
    direct = pricer.price("anthropic", "claude-haiku-4-5", MILLION, AT)
    resold = pricer.price("quicksilverpro", "claude-haiku-4-5", MILLION, AT)
    assert direct.cost is not None and resold.cost is not None
    assert direct.cost != resold.cost
    assert (direct.provider, resold.provider) == ("anthropic", "quicksilverpro")
    assert direct.model == resold.model == "claude-haiku-4-5"
    assert direct.version is not None and direct.version.startswith("genai-prices ")
    for price, provider in ((direct, "anthropic"), (resold, "quicksilverpro")):
        library = calc_price(
            LibraryUsage(input_tokens=1_000_000, output_tokens=1_000_000),
            "claude-haiku-4-5",
            provider_id=provider,
            genai_request_timestamp=AT,
        )
        assert price.cost == pytest.approx(float(library.total_price))


def test_a_provider_that_does_not_sell_the_model_is_unpriced_never_another_provider_s() -> None:
    price = Pricer().price("openai", "claude-haiku-4-5", MILLION, AT)
    assert price.cost is None and price.unpriced and price.reason == "no known price"


def test_unknown_models_and_missing_providers_are_unpriced_not_free() -> None:
    pricer = Pricer()
    unknown = pricer.price("anthropic", "claude-private-9", MILLION, AT)
    assert unknown.cost is None and unknown.unpriced
    no_provider = pricer.price(None, "claude-haiku-4-5", MILLION, AT)
    assert no_provider.cost is None and no_provider.unpriced
    assert no_provider.reason == "no provider reported"
    tokens_without_model = pricer.price("anthropic", None, MILLION, AT)
    assert tokens_without_model.unpriced and tokens_without_model.reason == "no model reported"
    assert pricer.price(None, None, Usage(), AT) is NOT_A_CALL
    assert not NOT_A_CALL.unpriced


def test_cache_reads_and_writes_are_priced_at_their_own_rates() -> None:
    pricer = Pricer()
    plain = pricer.price("anthropic", "claude-haiku-4-5", Usage(input_tokens=1_000_000), AT)
    read = pricer.price(
        "anthropic", "claude-haiku-4-5", Usage(1_000_000, 0, cache_read_tokens=1_000_000), AT
    )
    write = pricer.price(
        "anthropic", "claude-haiku-4-5", Usage(1_000_000, 0, cache_write_tokens=1_000_000), AT
    )
    assert plain.cost is not None and read.cost is not None and write.cost is not None
    assert read.cost < plain.cost < write.cost


def test_the_fast_path_agrees_with_the_library_on_random_calls() -> None:
    pricer = Pricer()
    rng = random.Random(8)
    for provider, model in [
        ("anthropic", "claude-haiku-4-5"),
        ("anthropic", "claude-sonnet-4-6"),
        ("google", "claude-sonnet-4-6"),
        ("openai", "gpt-4o"),
        ("openrouter", "deepseek/deepseek-v4-pro"),
    ]:
        for _ in range(20):
            total = rng.randint(0, 400_000)
            read, write = rng.randint(0, total // 2), rng.randint(0, total // 3)
            out = rng.randint(0, 20_000)
            ours = pricer.price(provider, model, Usage(total, out, read, write), AT)
            library = calc_price(
                LibraryUsage(
                    input_tokens=total,
                    output_tokens=out,
                    cache_read_tokens=read,
                    cache_write_tokens=write,
                ),
                model,
                provider_id=provider,
                genai_request_timestamp=AT,
            ).total_price
            assert ours.cost == pytest.approx(float(library), rel=1e-9, abs=1e-12)


def test_an_override_prices_a_private_model_and_wins_over_the_data() -> None:
    pricer = Pricer(
        {
            "acme/coder-1": PriceOverride(
                input_per_mtok=2, output_per_mtok=8, cache_read_per_mtok=0.5
            ),
            "anthropic/claude-haiku-4-5": PriceOverride(input_per_mtok=0, output_per_mtok=0),
        }
    )
    usage = Usage(
        input_tokens=3_000_000,
        output_tokens=1_000_000,
        cache_read_tokens=1_000_000,
        cache_write_tokens=1_000_000,
    )
    price = pricer.price("acme", "coder-1", usage, AT)
    # 1M uncached at 2, 1M read at 0.5, 1M written at the input price (none given), 1M out at 8.
    assert Decimal(str(price.cost)) == Decimal("12.5")
    assert price.version == OVERRIDE_VERSION and not price.unpriced
    assert pricer.price("anthropic", "claude-haiku-4-5", MILLION, AT).cost == 0.0


def test_an_override_needs_a_provider_in_its_name() -> None:
    with pytest.raises(ConfigError, match="provider/model"):
        Pricer({"coder-1": PriceOverride(input_per_mtok=1, output_per_mtok=1)})


def test_prices_are_those_in_force_at_the_time_of_the_call() -> None:
    # The data changes this model's long-context price on 2026-03-13 (a tiered price, so the
    # library computes it); a call is charged what was in force when it was made.
    pricer = Pricer()
    usage = Usage(input_tokens=300_000, output_tokens=1000)
    charged = {}
    for moment in (datetime(2026, 3, 1, tzinfo=UTC), datetime(2026, 4, 1, tzinfo=UTC)):
        charged[moment] = pricer.price("anthropic", "claude-sonnet-4-6", usage, moment).cost
        expected = calc_price(
            LibraryUsage(input_tokens=300_000, output_tokens=1000),
            "claude-sonnet-4-6",
            provider_id="anthropic",
            genai_request_timestamp=moment,
        ).total_price
        assert charged[moment] == pytest.approx(float(expected))
    assert len(set(charged.values())) == 2
