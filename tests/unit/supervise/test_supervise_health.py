"""HealthMonitor aggregation, thresholds, flag and payload, on a ManualClock."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

import pytest

from watchkeeper.supervise import (
    GLOBAL_HEALTH_FLAG,
    CheckResult,
    HealthFlag,
    HealthMonitor,
    HealthStatus,
    ManualClock,
    health_payload,
    set_healthy,
)

pytestmark = pytest.mark.anyio

H, D, U = HealthStatus.HEALTHY, HealthStatus.DEGRADED, HealthStatus.UNHEALTHY


class Scripted:
    """A check that answers from a script, then repeats its last answer."""

    def __init__(self, name: str, statuses: Iterable[HealthStatus]) -> None:
        self.name = name
        self.script = list(statuses)
        self.runs = 0

    async def run(self) -> CheckResult:
        status = self.script[min(self.runs, len(self.script) - 1)]
        self.runs += 1
        return CheckResult(status, f"run {self.runs}")


def monitor(clock: ManualClock | None = None, **kwargs: float) -> HealthMonitor:
    return HealthMonitor(clock=clock or ManualClock(), flag=HealthFlag(), **kwargs)  # type: ignore[arg-type]


async def test_a_check_must_fail_n_times_in_a_row_to_flip() -> None:
    m = monitor(failure_threshold=3)
    m.register(Scripted("db", [U, U, H, U, U, U, H]))
    seen = [(await m.run_once()).status for _ in range(7)]
    assert seen == [H, H, H, H, H, U, H]


async def test_overall_status_is_the_worst_and_non_critical_checks_only_degrade() -> None:
    m = monitor(failure_threshold=1)
    m.register(Scripted("cache", [D]))
    assert (await m.run_once()).status is D
    m.register(Scripted("search", [U]), critical=False)
    assert (await m.run_once()).status is D
    m.register(Scripted("db", [U]))
    report = await m.run_once()
    assert report.status is U
    assert {c.name: c.status for c in report.checks} == {"cache": D, "search": U, "db": U}


async def test_the_flag_overrides_checks() -> None:
    m = monitor()
    m.register(Scripted("ok", [H]))
    m.flag.set(False, "draining")
    report = await m.run_once()
    assert (report.status, report.flag_reason) == (U, "draining")
    m.flag.set(True)
    assert (await m.run_once()).status is H


def test_the_global_flag_is_what_monitors_read_by_default() -> None:
    m = HealthMonitor(clock=ManualClock())
    try:
        set_healthy(False, "maintenance")
        assert m.report().status is U
        assert health_payload(m)[0] == 503
    finally:
        set_healthy(True)
    assert GLOBAL_HEALTH_FLAG.healthy
    assert m.report().status is H


async def test_a_check_that_raises_is_unhealthy_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Broken:
        name = "broken"

        async def run(self) -> CheckResult:
            raise OSError("socket gone")

    m = monitor(failure_threshold=1)
    m.register(Broken())
    with caplog.at_level(logging.WARNING):
        report = await m.run_once()
    assert report.status is U
    assert "socket gone" in report.checks[0].last.detail
    assert any(getattr(r, "action", None) == "health_check" for r in caplog.records)


async def test_a_check_that_hangs_times_out_on_the_clock() -> None:
    class Hanging:
        name = "hanging"

        async def run(self) -> CheckResult:
            await asyncio.Event().wait()
            return CheckResult(H)

    clock = ManualClock(autojump=True)
    m = monitor(clock, failure_threshold=1, check_timeout_s=2.0)
    m.register(Hanging())
    report = await asyncio.wait_for(m.run_once(), 10)
    assert clock.now() == 2.0
    assert report.status is U
    assert "timed out" in report.checks[0].last.detail


async def test_the_monitor_runs_checks_every_interval() -> None:
    clock = ManualClock(autojump=True)
    check = Scripted("db", [H])
    m = monitor(clock, interval_s=10.0)
    m.register(check)
    async with m:
        assert check.runs == 1
        for expected in (2, 3):
            # Just past the next interval: the monitor's run falls due first and settles.
            await clock.sleep_until(10.0 * (expected - 1) + 0.5)
            assert check.runs == expected
        assert check.runs == 3


async def test_payload_is_200_when_healthy_or_degraded_and_503_when_unhealthy() -> None:
    m = monitor(failure_threshold=1)
    check = Scripted("db", [H, D, U])
    m.register(check)
    codes = []
    for _ in range(3):
        await m.run_once()
        code, body = health_payload(m)
        codes.append((code, body["status"]))
    assert codes == [(200, "healthy"), (200, "degraded"), (503, "unhealthy")]
    checks = body["checks"]
    assert isinstance(checks, dict)
    assert checks["db"]["detail"] == "run 3"
