"""The models in use, the price each new call of them gets, and an admin's price overrides.

A price comes from the configuration file's ``[prices]`` first (read-only here:
it is changed in the file), then from an override an admin set (kept in the
database), then from the bundled price data. Overrides price new events only:
an event keeps the cost it was given when it arrived.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from watchkeeper.config import PriceOverride
from watchkeeper.errors import Conflict, InvalidInput
from watchkeeper.store.price_overrides import PriceOverrideStore, StoredPrice
from watchkeeper.timeline.prices import Pricer, Quote

#: What an override gives: USD per million tokens (cache prices default to the input's).
Prices = PriceOverride
#: The fields of a price, in the order a form or a body gives them.
PRICE_FIELDS = ("input_per_mtok", "output_per_mtok", "cache_read_per_mtok", "cache_write_per_mtok")
_NAMES = {
    "input_per_mtok": "the input price",
    "output_per_mtok": "the output price",
    "cache_read_per_mtok": "the cache read price",
    "cache_write_per_mtok": "the cache write price",
}
NAME_MAX = {"provider": 100, "model": 200}
#: How far back a model counts as in use.
IN_USE = timedelta(days=90)


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """One provider's model: its use, the price a new call gets, and an admin's override."""

    provider: str | None
    model: str
    calls: int
    unpriced: int
    last_at: datetime | None
    quote: Quote
    override: StoredPrice | None


def _number(field: str, value: object) -> float | None:
    what = _NAMES[field]
    if value is None or (isinstance(value, str) and not value.strip()):
        if field in ("input_per_mtok", "output_per_mtok"):
            raise InvalidInput(f"{what} is required: USD per million tokens, like 3 or 0.25", field)
        return None
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise InvalidInput(f"{what} must be a number of USD per million tokens, not {value}", field)
    try:
        number = float(value)
    except ValueError:
        raise InvalidInput(
            f"{what} must be a number of USD per million tokens, like 3 or 0.25, not {value!r}",
            field,
        ) from None
    if not math.isfinite(number):
        raise InvalidInput(f"{what} must be a finite number, not {value!r}", field)
    if number < 0:
        raise InvalidInput(f"{what} cannot be negative ({value!r}): give 0 or more", field)
    return number


def parse_prices(given: Mapping[str, object]) -> Prices:
    """Prices from a form or a body, each problem said in words (which field, how to fix it)."""
    values = {field: _number(field, given.get(field)) for field in PRICE_FIELDS}
    return Prices.model_validate({k: v for k, v in values.items() if v is not None})


def _name(part: str, value: str) -> str:
    cleaned = value.strip().lower()
    if not cleaned:
        raise InvalidInput(f"name the {part}, as reported in timeline events", part)
    if len(cleaned) > NAME_MAX[part]:
        raise InvalidInput(f"the {part} name is longer than {NAME_MAX[part]} characters", part)
    return cleaned


def stored_overrides(stored: Iterable[StoredPrice]) -> dict[tuple[str, str], PriceOverride]:
    """Stored overrides as the pricer takes them."""
    return {
        (s.provider, s.model): PriceOverride(
            input_per_mtok=s.input_per_mtok,
            output_per_mtok=s.output_per_mtok,
            cache_read_per_mtok=s.cache_read_per_mtok,
            cache_write_per_mtok=s.cache_write_per_mtok,
        )
        for s in stored
    }


def set_price(
    store: PriceOverrideStore,
    pricer: Pricer,
    provider: str,
    model: str,
    prices: Prices,
    by: str,
    now: datetime,
) -> StoredPrice:
    """Store an override; refused where the configuration file prices the model."""
    provider, model = _name("provider", provider), _name("model", model)
    if pricer.configured(provider, model):
        raise Conflict(
            f'{provider}/{model} is priced in the configuration file ([prices."{provider}/'
            f'{model}"]), which wins over an override: change it there'
        )
    price = StoredPrice(
        provider,
        model,
        prices.input_per_mtok,
        prices.output_per_mtok,
        prices.cache_read_per_mtok,
        prices.cache_write_per_mtok,
        by,
        now,
    )
    store.set(price)
    return price


def listing(store: PriceOverrideStore, pricer: Pricer, now: datetime) -> list[ModelPrice]:
    """The models used in the last :data:`IN_USE` (most recent first), then those priced but
    not used in that time."""
    overrides = {(s.provider, s.model): s for s in store.stored()}
    found: list[ModelPrice] = []
    seen: set[tuple[str | None, str]] = set()
    for used in store.models_seen(now - IN_USE):
        key = (used.provider, used.model)
        seen.add(key)
        override = overrides.get((used.provider, used.model)) if used.provider else None
        found.append(
            ModelPrice(
                used.provider,
                used.model,
                used.calls,
                used.unpriced,
                used.last_at,
                pricer.quote(used.provider, used.model, now),
                override,
            )
        )
    unused = [*pricer.configured_keys(), *overrides]
    for provider, model in unused:
        if (provider, model) in seen:
            continue
        seen.add((provider, model))
        found.append(
            ModelPrice(
                provider,
                model,
                0,
                0,
                None,
                pricer.quote(provider, model, now),
                overrides.get((provider, model)),
            )
        )
    return found
