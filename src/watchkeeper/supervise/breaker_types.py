"""What a circuit breaker takes and tells: its failure-rate window, the state changes it
gives its listeners and the snapshot of its counters (:mod:`.breaker` is the breaker)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from watchkeeper.supervise.breaker_state import CircuitState
from watchkeeper.supervise.errors import ConfigurationError


class NowSource(Protocol):
    """Anything with ``now() -> float`` (every :class:`~watchkeeper.supervise.Clock`)."""

    def now(self) -> float: ...


@dataclass(frozen=True)
class FailureRateWindow:
    """Open when, among the last ``size`` calls (at least ``min_calls``), the
    share of failures reaches ``threshold``."""

    size: int = 20
    min_calls: int = 10
    threshold: float = 0.5

    def __post_init__(self) -> None:
        if not 0 < self.min_calls <= self.size or not 0 < self.threshold <= 1:
            raise ConfigurationError(
                "failure rate window needs 0 < min_calls <= size and 0 < threshold <= 1"
            )


@dataclass(frozen=True)
class BreakerStateChange:
    """Given to listeners when this breaker sees its state change."""

    name: str
    old: CircuitState
    new: CircuitState
    at: float


@dataclass(frozen=True)
class BreakerStatistics:
    """An immutable snapshot of a breaker's counters (this process only)."""

    name: str
    state: CircuitState
    failure_count: int
    successes: int
    failures: int
    rejections: int
    ignored: int
    state_changes: int
    time_in_state: Mapping[CircuitState, float]


Listener = Callable[[BreakerStateChange], None]
