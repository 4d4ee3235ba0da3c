"""Time as watchkeeper reads it: UTC, timezone-aware, and always injectable."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import overload

#: What every service takes to read the time: ``utcnow`` in production, a
#: :class:`ManualClock` in tests.
Now = Callable[[], datetime]


def utcnow() -> datetime:
    """The current time in UTC, timezone-aware."""
    return datetime.now(UTC)


@overload
def from_epoch(value: float) -> datetime: ...
@overload
def from_epoch(value: None) -> None: ...
@overload
def from_epoch(value: float | None) -> datetime | None: ...
def from_epoch(value: float | None) -> datetime | None:
    """A stored epoch second as an aware UTC datetime.

    With :func:`to_epoch`, the one pair of converters between a time and the
    column that stores it; ``None`` (a NULL) passes through both.
    """
    return None if value is None else datetime.fromtimestamp(value, UTC)


@overload
def to_epoch(value: datetime) -> float: ...
@overload
def to_epoch(value: None) -> None: ...
@overload
def to_epoch(value: datetime | None) -> float | None: ...
def to_epoch(value: datetime | None) -> float | None:
    """An aware datetime as stored epoch seconds; naive values are taken as UTC."""
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.timestamp()


def rfc3339(value: datetime | None) -> str | None:
    """RFC 3339 text in UTC, as the API speaks it."""
    if value is None:
        return None
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


class ManualClock:
    """A clock that moves only when told to: for tests and benchmarks."""

    def __init__(self, start: datetime) -> None:
        self._now = start

    def __call__(self) -> datetime:
        return self._now

    def advance(self, seconds: float) -> datetime:
        """Move time forward and return the new time."""
        from datetime import timedelta

        self._now = self._now + timedelta(seconds=seconds)
        return self._now

    def set(self, value: datetime) -> None:
        """Jump to ``value``."""
        self._now = value
