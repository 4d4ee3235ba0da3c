"""What ingest stores of a price: the same as a fresh price, however much the pricer keeps."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta, timezone

from watchkeeper.config import PriceOverride
from watchkeeper.records.timeline import Usage
from watchkeeper.timeline.prices import Columns, Pricer

OVERRIDES = {"acme/coder-1": PriceOverride(input_per_mtok=1, output_per_mtok=4)}
CALLS = [
    ("anthropic", "claude-haiku-4-5"),  # one price for all time
    ("quicksilverpro", "claude-haiku-4-5"),
    ("google", "claude-sonnet-4-6"),  # a new price from 2026-03-13
    ("anthropic", "claude-sonnet-4-6"),  # tiered from that day on: the library prices it
    ("anthropic", "claude-sonnet-4-5"),  # tiered
    ("deepseek", "deepseek-chat"),  # cheaper at some hours of the day
    ("ACME", "Coder-1"),  # the override, names as reported
    ("anthropic", "claude-private-9"),  # unknown: unpriced
    (None, "claude-haiku-4-5"),  # no provider: unpriced
    ("anthropic", None),  # tokens without a model: unpriced
]


def _stored(
    pricer: Pricer, call: tuple[str | None, str | None], usage: Usage, at: datetime
) -> Columns:
    price = pricer.price(*call, usage, at)
    named = price.version is not None
    return (
        price.cost,
        price.unpriced,
        price.model if named else None,
        price.provider if named else None,
        price.version,
    )


def test_columns_match_a_fresh_price_across_days_hours_and_repeats() -> None:
    rng = random.Random(4)
    kept = Pricer(OVERRIDES)
    start = datetime(2026, 3, 10, tzinfo=UTC)
    plus_five = timezone(timedelta(hours=5))
    for _ in range(300):
        call = CALLS[rng.randrange(len(CALLS))]
        at = start + timedelta(hours=rng.randrange(0, 24 * 8), minutes=rng.randrange(60))
        if rng.random() < 0.3:
            at = at.astimezone(plus_five)  # the UTC day is what counts, not the local one
        total = rng.randint(1_000, 400_000)
        usage = Usage(total, rng.randint(10, 4_000), total // 3, total // 20)
        day = int(at.timestamp() // 86400)
        assert kept.columns(*call, usage, at, day) == _stored(Pricer(OVERRIDES), call, usage, at)


def test_a_call_that_is_not_a_model_call_stores_no_price() -> None:
    at = datetime(2026, 3, 1, tzinfo=UTC)
    assert Pricer().columns(None, None, Usage(), at, 0) == (None, False, None, None, None)
