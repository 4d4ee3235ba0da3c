"""Health monitor: runs checks every interval and aggregates them into one status.

A check's effective status turns worse only after ``failure_threshold``
non-healthy results in a row, so one slow answer does not flip the whole
process; it turns healthy again on the first healthy result.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from watchkeeper.supervise.clock import Clock, MonotonicClock, wait_until_done
from watchkeeper.supervise.errors import ConfigurationError
from watchkeeper.supervise.scope import StopsOnExit

logger = logging.getLogger(__name__)


class HealthStatus(enum.StrEnum):
    """Health of one check or of the whole process, from best to worst."""

    HEALTHY = "healthy"
    DEGRADED = "degraded"
    UNHEALTHY = "unhealthy"

    @property
    def rank(self) -> int:
        return _RANK[self]


_RANK = {HealthStatus.HEALTHY: 0, HealthStatus.DEGRADED: 1, HealthStatus.UNHEALTHY: 2}


def worst(*statuses: HealthStatus) -> HealthStatus:
    """The worst of ``statuses`` (healthy when there are none)."""
    return max(statuses, key=lambda s: s.rank, default=HealthStatus.HEALTHY)


@dataclass(frozen=True)
class CheckResult:
    """What one run of a check found."""

    status: HealthStatus
    detail: str = ""
    data: Mapping[str, object] = field(default_factory=dict)


@runtime_checkable
class HealthCheck(Protocol):
    """A named check; ``run`` must not raise for expected failures."""

    name: str

    async def run(self) -> CheckResult:
        """Look at the thing once and say how it is."""


@dataclass(frozen=True)
class CheckReport:
    """A check's effective status after the failure threshold, and its last raw result."""

    name: str
    status: HealthStatus
    last: CheckResult
    consecutive_failures: int
    critical: bool
    checked_at: float | None


@dataclass(frozen=True)
class HealthReport:
    """The overall answer: worst effective status, the flag, and each check."""

    status: HealthStatus
    checks: tuple[CheckReport, ...]
    flag_healthy: bool
    flag_reason: str
    at: float


class HealthFlag:
    """A switch that code can turn off to declare the process unhealthy."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._healthy = True
        self._reason = ""

    def set(self, healthy: bool, reason: str = "") -> None:
        """Declare the process healthy or not, with a reason shown in reports."""
        with self._lock:
            self._healthy, self._reason = healthy, reason

    @property
    def healthy(self) -> bool:
        return self._healthy

    @property
    def reason(self) -> str:
        return self._reason


GLOBAL_HEALTH_FLAG = HealthFlag()
"""The process-wide flag; every monitor reads it unless given its own."""


def set_healthy(healthy: bool, reason: str = "") -> None:
    """Set the process-wide health flag."""
    GLOBAL_HEALTH_FLAG.set(healthy, reason)


@dataclass
class _Registered:
    check: HealthCheck
    critical: bool
    status: HealthStatus = HealthStatus.HEALTHY
    last: CheckResult = field(default_factory=lambda: CheckResult(HealthStatus.HEALTHY, "not run"))
    failures: int = 0
    checked_at: float | None = None


class HealthMonitor(StopsOnExit):
    """Runs registered checks every ``interval_s`` and keeps the latest report.

    A non-critical check can make the whole process at worst ``degraded``.
    """

    def __init__(
        self,
        *,
        interval_s: float = 10.0,
        failure_threshold: int = 3,
        check_timeout_s: float = 5.0,
        clock: Clock | None = None,
        flag: HealthFlag | None = None,
    ) -> None:
        if interval_s <= 0 or failure_threshold < 1 or check_timeout_s <= 0:
            raise ConfigurationError(
                "health monitor needs interval_s > 0, failure_threshold >= 1, check_timeout_s > 0"
            )
        self.interval_s = interval_s
        self.failure_threshold = failure_threshold
        self.check_timeout_s = check_timeout_s
        self.clock: Clock = clock or MonotonicClock()
        self.flag = flag or GLOBAL_HEALTH_FLAG
        self._checks: dict[str, _Registered] = {}
        self._task: asyncio.Task[None] | None = None

    def register(self, check: HealthCheck, *, critical: bool = True) -> HealthMonitor:
        """Add a check; names must be unique."""
        if check.name in self._checks:
            raise ConfigurationError(f"a health check named {check.name!r} is already registered")
        self._checks[check.name] = _Registered(check, critical)
        return self

    def report(self) -> HealthReport:
        """The latest aggregated report (checks not yet run count as healthy)."""
        reports = tuple(
            CheckReport(r.check.name, r.status, r.last, r.failures, r.critical, r.checked_at)
            for r in self._checks.values()
        )
        overall = worst(*(_contribution(r) for r in reports))
        if not self.flag.healthy:
            overall = HealthStatus.UNHEALTHY
        return HealthReport(overall, reports, self.flag.healthy, self.flag.reason, self.clock.now())

    async def run_once(self) -> HealthReport:
        """Run every check once, concurrently, and return the new report."""
        await asyncio.gather(*(self._run_check(r) for r in self._checks.values()))
        return self.report()

    async def _run_check(self, reg: _Registered) -> None:
        result = await self._guarded(reg.check)
        reg.last, reg.checked_at = result, self.clock.now()
        if result.status is HealthStatus.HEALTHY:
            reg.failures, reg.status = 0, HealthStatus.HEALTHY
            return
        reg.failures += 1
        if reg.failures >= self.failure_threshold:
            reg.status = result.status

    async def _guarded(self, check: HealthCheck) -> CheckResult:
        task = asyncio.ensure_future(check.run())
        deadline = self.clock.now() + self.check_timeout_s
        if not await wait_until_done(task, self.clock, deadline):  # type: ignore[arg-type]
            task.cancel()
            return CheckResult(HealthStatus.UNHEALTHY, f"timed out after {self.check_timeout_s} s")
        try:
            return task.result()
        except Exception as exc:
            logger.warning(
                "health check %s raised %r",
                check.name,
                exc,
                exc_info=True,
                extra={"action": "health_check"},
            )
            return CheckResult(HealthStatus.UNHEALTHY, f"check raised {exc!r}")

    async def start(self) -> HealthMonitor:
        """Run the checks now, then every ``interval_s`` in a background task."""
        await self.run_once()
        self._task = asyncio.create_task(self._loop(), name="health monitor")
        return self

    async def _enter(self) -> None:
        await self.start()

    async def stop(self) -> None:
        """Stop the background task."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _loop(self) -> None:
        next_at = self.clock.now() + self.interval_s
        while True:
            await self.clock.sleep_until(next_at)
            next_at += self.interval_s
            await self.run_once()


def _contribution(report: CheckReport) -> HealthStatus:
    # A non-critical check can degrade the process but never take it down.
    if report.critical or report.status is not HealthStatus.UNHEALTHY:
        return report.status
    return HealthStatus.DEGRADED
