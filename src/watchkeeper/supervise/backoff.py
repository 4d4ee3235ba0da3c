"""Exponential backoff with a cap and jitter, as a pure function of the attempt."""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field

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
        if attempt < 0:
            raise ValueError("attempt counts from 0")
        if self.initial == 0 or self.cap == 0:
            return 0.0
        # Decide in log space so a large attempt never overflows a float.
        log_delay = math.log(self.initial) + attempt * math.log(self.factor)
        if log_delay >= math.log(self.cap):
            return self.cap
        try:
            return min(self.cap, self.initial * self.factor**attempt)
        except OverflowError:
            return min(self.cap, math.exp(log_delay))

    def duration(self, attempt: int) -> float:
        """The delay before restart ``attempt``, with jitter from ``random``."""
        ceiling = self.ceiling(attempt)
        if self.jitter == 0 or ceiling == 0:
            return ceiling
        return ceiling * (1.0 - self.jitter * self.random())

    @classmethod
    def none(cls) -> Backoff:
        """No delay at all between restarts."""
        return cls(initial=0.0, factor=1.0, cap=0.0, jitter=0.0)
