"""What one model call cost, priced on the provider it actually ran on.

Prices come from the local override table (``[prices."provider/model"]``)
first, then from the prices an admin set (:meth:`Pricer.use_stored`, kept in
the database), then from the price data bundled with ``genai-prices``, as they
were at the time of the call. The bundled data is never updated over the network.
The provider is never guessed: a call without one, or with a model the data
does not know on that provider, is *unpriced* (cost ``None``), never free.

Token counts follow OpenTelemetry and ``genai-prices``: ``input_tokens`` is
every input token, cached ones included; ``cache_read_tokens`` and
``cache_write_tokens`` are the parts of it read from and written to the
provider's cache, each priced at its own rate.

``genai-prices`` takes about a millisecond per call; a price that is linear in
its token counts (no context-length tiers) is therefore turned once into four
per-token rates by asking the library itself, and each call is then priced
from them. Tiered prices always go through the library. How a reported
provider and model are priced is kept too (per UTC day of the call where the
price has start dates; prices by time of day are always looked up), so a
batch looks each one up once.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from watchkeeper.errors import ConfigError
from watchkeeper.records.timeline import Price, Usage

if TYPE_CHECKING:
    from watchkeeper.config import PriceOverride

log = logging.getLogger(__name__)
OVERRIDE_VERSION = "override"
#: The price version of a call priced by an override an admin set (not the file's).
STORED_VERSION = "override set by an admin"
_MTOK = Decimal(1_000_000)


#: Nothing to price: the event is not a model call.
NOT_A_CALL = Price(None)


@dataclass(frozen=True, slots=True)
class _Rates:
    """USD per token: uncached input, cache read, cache write, output."""

    input: Decimal
    cache_read: Decimal
    cache_write: Decimal
    output: Decimal

    def cost(self, usage: Usage) -> Decimal:
        uncached = usage.input_tokens - usage.cache_read_tokens - usage.cache_write_tokens
        return (
            uncached * self.input
            + usage.cache_read_tokens * self.cache_read
            + usage.cache_write_tokens * self.cache_write
            + usage.output_tokens * self.output
        )


@dataclass(frozen=True, slots=True)
class _Plan:
    """How every call of one reported provider and model is priced, whatever its time."""

    rates: _Rates
    model: str
    provider: str
    version: str


@dataclass(frozen=True, slots=True)
class _Dated:
    """The plans of a price with start dates, per UTC day of the call (epoch days)."""

    days: dict[int, _Plan]


#: Reported (provider, model) pairs (or days of one) whose pricing is kept; more start over.
_PLANS_KEPT = 4096
#: What a timeline row keeps of a price: cost, unpriced, and the matched model, provider
#: and price version (the names only where a version says what priced them).
Columns = tuple[float | None, bool, str | None, str | None, str | None]
_NOT_A_CALL_COLUMNS: Columns = (None, False, None, None, None)


def _override_rates(override: PriceOverride) -> _Rates:
    def per_token(value: float | None, fallback: float) -> Decimal:
        return Decimal(str(fallback if value is None else value)) / _MTOK

    return _Rates(
        per_token(override.input_per_mtok, 0.0),
        per_token(override.cache_read_per_mtok, override.input_per_mtok),
        per_token(override.cache_write_per_mtok, override.input_per_mtok),
        per_token(override.output_per_mtok, 0.0),
    )


def split_key(key: str) -> tuple[str, str]:
    """``"provider/model"`` as its two parts (the model may contain ``/`` itself)."""
    provider, _, model = key.partition("/")
    if not provider or not model:
        raise ConfigError(
            f'prices.{key!r}: name a price as "provider/model", e.g. [prices."acme/coder-1"]'
        )
    return provider.lower(), model.lower()


@dataclass(frozen=True, slots=True)
class Quote:
    """What a new call of one provider and model is priced at, and where the price comes from.

    ``source`` is ``config`` (the file's ``[prices]``), ``override`` (set by an admin),
    ``built-in`` (the bundled data) or ``None`` (unpriced). Prices are USD per million
    tokens; ``None`` where the source gives no flat price (a tiered one, or none).
    """

    source: str | None
    input_per_mtok: float | None = None
    output_per_mtok: float | None = None
    note: str = ""


class Pricer:
    """Prices calls: the file's overrides first, then an admin's, then the bundled data."""

    def __init__(self, overrides: Mapping[str, PriceOverride] | None = None) -> None:
        self._configured = {split_key(key): value for key, value in (overrides or {}).items()}
        self._overrides = {key: _override_rates(value) for key, value in self._configured.items()}
        self._stored: dict[tuple[str, str], PriceOverride] = {}
        self._stored_rates: dict[tuple[str, str], _Rates] = {}
        self._found: dict[tuple[str, str], tuple[Any, Any] | None] = {}
        self._linear: dict[int, tuple[Any, _Rates | None]] = {}
        #: Per reported (provider, model): its rates, or the one answer when it is unpriced.
        self._plans: dict[tuple[str, str], _Plan | _Dated | Price] = {}
        self._version: str | None = None

    def use_stored(self, stored: Mapping[tuple[str, str], PriceOverride]) -> None:
        """Price with the overrides an admin set (lowercased provider and model) from now on.

        The file's prices still win. Calls priced before keep their cost; a change forgets
        every kept plan, so the next call of each model is looked up again.
        """
        chosen = {(p.lower(), m.lower()): value for (p, m), value in stored.items()}
        if chosen == self._stored:
            return
        self._stored = chosen
        self._stored_rates = {key: _override_rates(value) for key, value in chosen.items()}
        self._plans = {}

    def configured(self, provider: str, model: str) -> bool:
        """Whether the configuration file prices ``model`` on ``provider``."""
        return (provider.lower(), model.lower()) in self._configured

    def configured_keys(self) -> list[tuple[str, str]]:
        """Every (provider, model) the configuration file prices, lowercased."""
        return sorted(self._configured)

    def quote(self, provider: str | None, model: str, at: datetime) -> Quote:
        """The price a new call of ``model`` on ``provider`` would get at ``at``."""
        if provider is None:
            return Quote(None, note="no provider reported: calls cannot be priced")
        key = (provider.lower(), model.lower())
        for source, table in (("config", self._configured), ("override", self._stored)):
            found = table.get(key)
            if found is not None:
                return Quote(source, found.input_per_mtok, found.output_per_mtok)
        located = self._lookup(key)
        if located is None:
            return Quote(None, note="no known price")
        try:
            rates = self._rates_of(located[1].get_prices(at))
        except (ValueError, ArithmeticError, TypeError) as exc:
            return Quote(None, note=f"cannot price: {exc}")
        if rates is None:
            return Quote("built-in", note="tiered by context length")
        return Quote("built-in", float(rates.input * _MTOK), float(rates.output * _MTOK))

    @property
    def version(self) -> str:
        """The version of the bundled price data."""
        if self._version is None:
            import genai_prices

            self._version = f"genai-prices {genai_prices.__version__}"
        return self._version

    def price(self, provider: str | None, model: str | None, usage: Usage, at: datetime) -> Price:
        """What ``usage`` of ``model`` on ``provider`` cost at ``at``."""
        return self._price(provider, model, usage, at, None)

    def columns(
        self, provider: str | None, model: str | None, usage: Usage, at: datetime, day: int
    ) -> Columns:
        """:meth:`price` as a timeline row stores it; ``day`` is ``at``'s epoch day (UTC).

        The ingest path: a call of a model priced before (on that day, where its price
        has start dates) costs a dictionary lookup and four multiplications.
        """
        if model is None:
            if usage.empty:
                return _NOT_A_CALL_COLUMNS
        elif provider is not None:
            plan = self._plans.get((provider, model))
            if type(plan) is _Dated:
                plan = plan.days.get(day)
            if type(plan) is _Plan:
                cost = float(plan.rates.cost(usage))
                return (cost, False, plan.model, plan.provider, plan.version)
        price = self._price(provider, model, usage, at, day)
        if price is NOT_A_CALL:
            return _NOT_A_CALL_COLUMNS
        version = price.version
        if version is None:
            return (price.cost, price.unpriced, None, None, None)
        return (price.cost, price.unpriced, price.model, price.provider, version)

    def _price(
        self, provider: str | None, model: str | None, usage: Usage, at: datetime, day: int | None
    ) -> Price:
        if model is None and usage.empty:
            return NOT_A_CALL
        if model is None or provider is None:
            missing = "model" if model is None else "provider"
            return Price(None, True, model, provider, None, f"no {missing} reported")
        reported = (provider, model)
        plan = self._plans.get(reported)
        if type(plan) is _Plan:
            cost = float(plan.rates.cost(usage))
            return Price(cost, False, plan.model, plan.provider, plan.version)
        if type(plan) is Price:
            return plan
        key = (provider.lower(), model.lower())
        rates = self._overrides.get(key)
        version = OVERRIDE_VERSION
        if rates is None:
            rates, version = self._stored_rates.get(key), STORED_VERSION
        if rates is not None:
            self._keep(reported, _Plan(rates, model, provider, version))
            return Price(float(rates.cost(usage)), False, model, provider, version)
        return self._bundled(reported, key, usage, at, day)

    def _keep(self, reported: tuple[str, str], plan: _Plan | _Dated | Price) -> None:
        if len(self._plans) >= _PLANS_KEPT:  # names come from reporters: keep memory bounded
            self._plans.clear()
        self._plans[reported] = plan

    def _keep_day(self, reported: tuple[str, str], day: int, plan: _Plan) -> None:
        dated = self._plans.get(reported)
        if type(dated) is not _Dated or len(dated.days) >= _PLANS_KEPT:
            dated = _Dated({})
            self._keep(reported, dated)
        dated.days[day] = plan

    def _bundled(
        self,
        reported: tuple[str, str],
        key: tuple[str, str],
        usage: Usage,
        at: datetime,
        day: int | None,
    ) -> Price:
        found = self._lookup(key)
        if found is None:
            unpriced = Price(None, True, key[1], key[0], self.version, "no known price")
            self._keep(reported, unpriced)
            return unpriced
        provider, model = found
        try:
            model_price = model.get_prices(at)
            rates = self._rates_of(model_price)
            if rates is not None:
                cost = rates.cost(usage)
            else:
                cost = model_price.calc_price(_library_usage(usage))["total_price"]
        except (ValueError, ArithmeticError, TypeError) as exc:  # the data cannot price this call
            log.warning(
                "Cannot price %s on %s: %s", key[1], key[0], exc, extra={"action": "price_call"}
            )
            return Price(None, True, model.id, provider.id, self.version, f"cannot price: {exc}")
        if rates is not None:
            plan = _Plan(rates, model.id, provider.id, self.version)
            if model_price is model.prices:  # one price for all time
                self._keep(reported, plan)
            elif day is not None and _by_start_date(model):
                self._keep_day(reported, day, plan)
        return Price(float(cost), False, model.id, provider.id, self.version)

    def _lookup(self, key: tuple[str, str]) -> tuple[Any, Any] | None:
        if key in self._found:
            return self._found[key]
        from genai_prices import data_snapshot

        try:
            found = data_snapshot.get_snapshot().find_provider_model(key[1], None, key[0], None)
        except LookupError:
            found = None
        self._found[key] = found
        return found

    def _rates_of(self, model_price: Any) -> _Rates | None:
        cached = self._linear.get(id(model_price))
        if cached is not None and cached[0] is model_price:
            return cached[1]
        rates = _linear_rates(model_price)
        self._linear[id(model_price)] = (model_price, rates)
        return rates


def _by_start_date(model: Any) -> bool:
    """Whether the model's price depends on the call's UTC day only (start dates, no hours)."""
    from genai_prices.types import StartDateConstraint

    return isinstance(model.prices, list) and all(
        price.constraint is None or isinstance(price.constraint, StartDateConstraint)
        for price in model.prices
    )


def _library_usage(usage: Usage) -> Any:
    from genai_prices import Usage as LibraryUsage

    return LibraryUsage(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_read_tokens=usage.cache_read_tokens,
        cache_write_tokens=usage.cache_write_tokens,
    )


def _linear_rates(model_price: Any) -> _Rates | None:
    """Per-token rates asked of the library itself, or ``None`` for a tiered price."""
    from genai_prices.types import TieredPrices

    if any(isinstance(value, TieredPrices) for value in vars(model_price).values()):
        return None
    million = 1_000_000

    def total(**counts: int) -> Decimal:
        result: Decimal = model_price.calc_price(_library_usage(Usage(**counts)))["total_price"]
        return result

    uncached = total(input_tokens=million)
    return _Rates(
        uncached / _MTOK,
        total(input_tokens=million, cache_read_tokens=million) / _MTOK,
        total(input_tokens=million, cache_write_tokens=million) / _MTOK,
        total(output_tokens=million) / _MTOK,
    )
