"""Timeline records: what a reporter sends, what is stored, token usage and price.

Frozen dataclasses and no I/O. This is the one module of the timeline that
:mod:`watchkeeper.store.timeline` imports, so the store never reaches the
services that call it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from watchkeeper.clock import rfc3339


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts of one call (``input_tokens`` includes the cached parts)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    @property
    def empty(self) -> bool:
        """No tokens at all."""
        return not (self.input_tokens or self.output_tokens)


@dataclass(frozen=True, slots=True)
class Price:
    """The cost of one call, and which price it was computed from."""

    cost: float | None
    unpriced: bool = False
    model: str | None = None
    provider: str | None = None
    version: str | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class NewEvent:
    """One phase as a reporter sends it. ``at`` is when the phase ended (default: now)."""

    phase: str
    at: datetime | None = None
    org: str | None = None
    job_id: str | None = None
    task_id: str | None = None
    round: int | None = None
    fingerprint: str | None = None
    outcome: str | None = None
    duration_s: float | None = None
    name: str | None = None
    role: str | None = None
    model: str | None = None
    provider: str | None = None
    usage: Usage = field(default_factory=Usage)
    rationale: str | None = None
    detail: str | None = None


@dataclass(frozen=True, slots=True)
class TimelineEvent:
    """One stored event, with the price it was given when it arrived."""

    id: int
    phase: str
    at: datetime
    received_at: datetime
    reporter: str
    org: str | None = None
    job_id: str | None = None
    task_id: str | None = None
    round: int | None = None
    fingerprint: str | None = None
    outcome: str | None = None
    duration_s: float | None = None
    name: str | None = None
    role: str | None = None
    model: str | None = None
    provider: str | None = None
    usage: Usage = field(default_factory=Usage)
    price: Price = field(default_factory=lambda: Price(None))
    rationale: str | None = None
    detail: str | None = None

    @property
    def started_at(self) -> datetime:
        """When the phase began: its end less its duration."""
        return self.at - timedelta(seconds=self.duration_s or 0.0)

    def as_dict(self) -> dict[str, Any]:
        """The event as the API and the execution record show it."""
        return {
            "id": self.id,
            "phase": self.phase,
            "at": rfc3339(self.at),
            "org": self.org,
            "job_id": self.job_id,
            "task_id": self.task_id,
            "round": self.round,
            "fingerprint": self.fingerprint,
            "outcome": self.outcome,
            "duration_s": self.duration_s,
            "name": self.name,
            "role": self.role,
            "model": self.model,
            "provider": self.provider,
            "input_tokens": self.usage.input_tokens,
            "output_tokens": self.usage.output_tokens,
            "cache_read_tokens": self.usage.cache_read_tokens,
            "cache_write_tokens": self.usage.cache_write_tokens,
            "cost": self.price.cost,
            "unpriced": self.price.unpriced,
            "price": None
            if self.price.version is None
            else {
                "model": self.price.model,
                "provider": self.price.provider,
                "version": self.price.version,
            },
            "rationale": self.rationale,
            "detail": self.detail,
            "reporter": self.reporter,
        }


@dataclass(frozen=True, slots=True)
class Ingested:
    """What one batch added: how many events, their cost, how many calls were unpriced."""

    count: int
    cost: float
    unpriced: int

    def as_dict(self) -> dict[str, Any]:
        """As the API answers."""
        return {"accepted": self.count, "cost": self.cost, "unpriced": self.unpriced}


#: ``(at, round, fingerprint)`` of one event, as the progress rule reads it
#: (:func:`watchkeeper.timeline.service.progress_time`).
Fact = tuple[float, int | None, str | None]
