"""The one backoff: exponential growth, a cap, and full, equal or no jitter.

Everything that waits before trying again (supervised restarts, outbox
retries, the ops webhook, chat channels) asks this function for the delay,
each with its own numbers.
"""

from __future__ import annotations

import math
import random as _random
from collections.abc import Callable

#: ``jitter`` that draws the whole delay at random between 0 and its ceiling.
FULL_JITTER = 1.0
#: ``jitter`` that keeps half the delay and draws the other half at random.
EQUAL_JITTER = 0.5
#: ``jitter`` that makes the delay deterministic.
NO_JITTER = 0.0


def backoff_ceiling(attempt: int, *, initial: float, factor: float, cap: float) -> float:
    """The delay before try ``attempt`` (0-based) without jitter.

    That is ``min(cap, initial * factor**attempt)``, never overflowing.
    """
    if attempt < 0:
        raise ValueError("attempt counts from 0")
    if initial <= 0 or cap <= 0:
        return 0.0
    # Decide in log space so a large attempt never overflows a float.
    log_delay = math.log(initial) + attempt * math.log(factor)
    if log_delay >= math.log(cap):
        return cap
    try:
        return min(cap, initial * factor**attempt)
    except OverflowError:
        return min(cap, math.exp(log_delay))


def backoff_delay(
    attempt: int,
    *,
    initial: float,
    factor: float = 2.0,
    cap: float,
    jitter: float = NO_JITTER,
    random: Callable[[], float] = _random.random,
) -> float:
    """Seconds to wait before try ``attempt`` (0-based).

    ``jitter`` is the fraction of the delay drawn at random (:data:`FULL_JITTER`,
    :data:`EQUAL_JITTER`, :data:`NO_JITTER` or anything between); ``random``
    returns floats in ``[0, 1)``; inject a fixed source in tests.
    """
    ceiling = backoff_ceiling(attempt, initial=initial, factor=factor, cap=cap)
    if jitter == 0 or ceiling == 0:
        return ceiling
    return ceiling * (1.0 - jitter * random())
