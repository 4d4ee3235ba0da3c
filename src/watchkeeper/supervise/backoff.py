"""Restart backoff: the settings of :func:`watchkeeper.backoff.backoff_delay`, checked once."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from watchkeeper.backoff import backoff_ceiling, backoff_delay
from watchkeeper.supervise.errors import ConfigurationError


@dataclass(frozen=True)
class Backoff:
    """Delay before restart attempt ``n`` (0-based): ``min(cap, initial * factor**n)``.

    ``jitter`` is the fraction of that delay that is randomised: ``1.0`` is
    "full jitter" (uniform between 0 and the delay), ``0.0`` is deterministic.
    ``random`` returns floats in ``[0, 1)``; inject a fixed source in tests.
    """

    initial: float = 0.1
    factor: float = 2.0
    cap: float = 30.0
    jitter: float = 1.0
    random: Callable[[], float] = field(default=random.random, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.initial < 0 or self.cap < 0:
            raise ConfigurationError("backoff initial and cap must be >= 0 seconds")
        if self.factor < 1:
            raise ConfigurationError("backoff factor must be >= 1 so delays never shrink")
        if not 0.0 <= self.jitter <= 1.0:
            raise ConfigurationError("backoff jitter is a fraction between 0.0 and 1.0")

    def ceiling(self, attempt: int) -> float:
        """The delay for ``attempt`` before jitter is applied."""
        return backoff_ceiling(attempt, initial=self.initial, factor=self.factor, cap=self.cap)

    def duration(self, attempt: int) -> float:
        """The delay before restart ``attempt``, with jitter from ``random``."""
        return backoff_delay(
            attempt,
            initial=self.initial,
            factor=self.factor,
            cap=self.cap,
            jitter=self.jitter,
            random=self.random,
        )

    @classmethod
    def none(cls) -> Backoff:
        """No delay at all between restarts."""
        return cls(initial=0.0, factor=1.0, cap=0.0, jitter=0.0)
