"""What a circuit breaker's calls came to: the counts, and a small ring of the latest.

A count alone says how many failed, not when, nor why; the ring keeps the last few
calls that counted (each success and each failure, as the counters count them), when
each ended on the breaker's clock, and for a failure a short reason, so that a picture
of the breaker can show its recent calls beside its totals. Rejected calls never ran,
and excluded or cancelled ones proved nothing either way: neither is kept.

A reason is the exception's type and the first line of its message, as the breaker
saw it: whoever shows it outside the process redacts it first (the server's canvas
does), then shortens it, so a secret is never cut in two before redaction could
recognise it.
"""

from __future__ import annotations

import itertools
from collections import deque
from dataclasses import dataclass

from watchkeeper.supervise.errors import ConfigurationError

#: How many calls a breaker keeps unless told otherwise.
RECENT_CALLS = 20
#: A reason keeps at most this many characters: a bound on memory, not what is shown.
MAX_REASON = 1000


@dataclass(frozen=True)
class RecentCall:
    """One call that counted: when it ended (on the breaker's clock), whether it succeeded,
    and, for a failure, why (``None`` for a success)."""

    at: float
    ok: bool
    reason: str | None = None


@dataclass(frozen=True)
class CallCounts:
    """The counts and the ring, read at one instant: totals since the breaker was made,
    and the calls kept, newest first."""

    successes: int
    failures: int
    recent: tuple[RecentCall, ...]


def short_reason(exc: BaseException) -> str:
    """``exc`` in one line: its type's name, then the first line of its message if it has
    one (at most :data:`MAX_REASON` characters in all)."""
    try:
        lines = str(exc).strip().splitlines()
    except Exception:  # noqa: BLE001 - an unreadable message still leaves its type to name
        lines = []
    name = type(exc).__name__
    first = lines[0].strip() if lines else ""
    return (f"{name}: {first}" if first else name)[:MAX_REASON]


def read_count(counter: itertools.count[int]) -> int:
    """How far ``counter`` has counted from 0 (its next value)."""
    # itertools.count increments atomically under the GIL; its repr is its next value.
    return int(repr(counter)[6:-1])


class CallLog:
    """A breaker's successes and failures: counted since it was made, and the last ``size``
    of them kept (the oldest dropped first; 0 keeps none).

    Safe across threads without a lock, which a call through a closed breaker would pay
    for every time: the counters and the ring's append are atomic under the GIL. A read
    may see a call counted a moment before it is in the ring.
    """

    def __init__(self, size: int = RECENT_CALLS) -> None:
        if size < 0:
            raise ConfigurationError(f"a breaker keeps 0 or more recent calls, not {size}")
        self.size = size
        # Plain tuples, made into RecentCall only when read: the hot path stays cheap.
        self._ring: deque[tuple[float, bool, str | None]] = deque(maxlen=size)
        self._successes = itertools.count()
        self._failures = itertools.count()

    def succeeded(self, at: float) -> None:
        """Count a success that ended at ``at``."""
        next(self._successes)
        self._ring.append((at, True, None))

    def failed(self, at: float, reason: str | None) -> None:
        """Count a failure that ended at ``at``, for ``reason`` (``None``: not known)."""
        next(self._failures)
        self._ring.append((at, False, reason))

    @property
    def successes(self) -> int:
        """Successes counted since the breaker was made."""
        return read_count(self._successes)

    @property
    def failures(self) -> int:
        """Failures counted since the breaker was made."""
        return read_count(self._failures)

    def read(self) -> CallCounts:
        """The totals and the calls kept, newest first."""
        while True:
            try:
                kept = tuple(self._ring)
                break
            except RuntimeError:  # an append landed mid-copy (another thread): copy again
                continue
        recent = tuple(RecentCall(at, ok, reason) for at, ok, reason in reversed(kept))
        return CallCounts(self.successes, self.failures, recent)
