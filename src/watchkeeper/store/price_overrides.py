"""Prices an admin set per provider and model, and the models the timeline has seen.

An override is one row per lowercased provider and model; setting it again
replaces it. The models in use are read from the timeline's events, grouped the
way the pricer looks a call up (provider and model lowercased).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import case, delete, func, select, true

from watchkeeper.clock import from_epoch, to_epoch
from watchkeeper.store.base import Accessor, upsert
from watchkeeper.store.schema.prices import price_overrides
from watchkeeper.store.schema.timeline import timeline_events

_P = price_overrides.c
_E = timeline_events.c
#: The most models a listing reads: names come from reporters.
MODELS_LISTED = 500


@dataclass(frozen=True, slots=True)
class StoredPrice:
    """One override: USD per million tokens (cache prices ``None`` when not given)."""

    provider: str
    model: str
    input_per_mtok: float
    output_per_mtok: float
    cache_read_per_mtok: float | None
    cache_write_per_mtok: float | None
    set_by: str
    set_at: datetime


@dataclass(frozen=True, slots=True)
class ModelSeen:
    """A provider and model the timeline holds calls of (``provider`` ``None``: not reported)."""

    provider: str | None
    model: str
    calls: int
    unpriced: int
    last_at: datetime


class PriceOverrideStore(Accessor):
    """Read, set and clear overrides; list the models in use."""

    def stored(self) -> list[StoredPrice]:
        """Every override, by provider and model."""
        with self._read("reading price overrides") as conn:
            rows = conn.execute(select(price_overrides).order_by(_P.provider, _P.model)).all()
        return [
            StoredPrice(
                r.provider,
                r.model,
                r.input_per_mtok,
                r.output_per_mtok,
                r.cache_read_per_mtok,
                r.cache_write_per_mtok,
                r.set_by,
                from_epoch(r.set_at),
            )
            for r in rows
        ]

    def set(self, price: StoredPrice) -> None:
        """Store ``price``, replacing any override of the same provider and model."""
        key = {"provider": price.provider.lower(), "model": price.model.lower()}
        values = {
            "input_per_mtok": price.input_per_mtok,
            "output_per_mtok": price.output_per_mtok,
            "cache_read_per_mtok": price.cache_read_per_mtok,
            "cache_write_per_mtok": price.cache_write_per_mtok,
            "set_by": price.set_by[:200],
            "set_at": to_epoch(price.set_at),
        }
        with self._write("setting a price override") as conn:
            upsert(conn, price_overrides, key, values)

    def clear(self, provider: str, model: str) -> bool:
        """Remove the override of ``provider``/``model``; whether there was one."""
        where = (_P.provider == provider.lower()) & (_P.model == model.lower())
        with self._write("clearing a price override") as conn:
            return bool(conn.execute(delete(price_overrides).where(where)).rowcount)

    def models_seen(self, since: datetime, limit: int = MODELS_LISTED) -> list[ModelSeen]:
        """The models the timeline holds calls of since ``since``, most recently used first.

        Bounded by time so the read walks the index on ``at``, not every event ever kept.
        """
        provider = func.lower(_E.provider)
        model = func.lower(_E.model)
        last = func.max(_E.at)
        query = (
            select(
                provider,
                model,
                func.count(),
                func.sum(case((_E.unpriced == true(), 1), else_=0)),
                last,
            )
            .where(_E.at >= to_epoch(since), _E.model.is_not(None))
            .group_by(provider, model)
            .order_by(last.desc())
            .limit(limit)
        )
        with self._read("reading the models in use") as conn:
            rows = conn.execute(query).all()
        return [
            ModelSeen(row[0], row[1], int(row[2]), int(row[3] or 0), from_epoch(row[4]))
            for row in rows
        ]
