"""Restart policy: intensity, backoff and which exits lead to a restart."""

from __future__ import annotations

import enum
from collections import deque
from dataclasses import dataclass, field

from watchkeeper.supervise.backoff import Backoff
from watchkeeper.supervise.errors import ConfigurationError
from watchkeeper.supervise.events import ExitReason


class Restart(enum.StrEnum):
    """When a child that exited is started again."""

    PERMANENT = "permanent"
    """Always restarted, whatever the exit."""
    TRANSIENT = "transient"
    """Restarted only after an abnormal exit (error, signal, hang)."""
    TEMPORARY = "temporary"
    """Never restarted."""


@dataclass(frozen=True)
class RestartPolicy:
    """At most ``max_restarts`` restarts in ``period_s``, each after a backoff delay.

    A child's backoff attempt counter goes back to 0 once it has stayed up for
    ``stable_s`` seconds.
    """

    max_restarts: int = 3
    period_s: float = 5.0
    backoff: Backoff = field(default_factory=Backoff)
    stable_s: float = 10.0

    def __post_init__(self) -> None:
        if self.max_restarts < 0 or self.period_s <= 0 or self.stable_s < 0:
            raise ConfigurationError(
                "restart policy needs max_restarts >= 0, period_s > 0 and stable_s >= 0"
            )


def should_restart(restart: Restart, reason: ExitReason) -> bool:
    """Whether a child with restart type ``restart`` is restarted after ``reason``."""
    if reason is ExitReason.SHUTDOWN or restart is Restart.TEMPORARY:
        return False
    if restart is Restart.TRANSIENT:
        return reason.abnormal
    return True


class IntensityWindow:
    """Sliding record of restart times; computed on demand, never on a timer."""

    def __init__(self, max_restarts: int, period_s: float) -> None:
        self.max_restarts = max_restarts
        self.period_s = period_s
        self._times: deque[float] = deque()

    def record(self, now: float) -> bool:
        """Record a restart at ``now``; False if that exceeds the intensity."""
        self._times.append(now)
        while self._times and self._times[0] <= now - self.period_s:
            self._times.popleft()
        return len(self._times) <= self.max_restarts

    def __len__(self) -> int:
        return len(self._times)
