"""A running program's health checks: an HTTP probe, a heartbeat file, its memory.

They run every ``interval_s`` on the supervision clock while the program runs,
the first one ``interval_s`` after it has run ``start_s``: a program is never
probed before it had the time to come up. ``failures`` bad answers in a row (any
check unhealthy) restart it through its supervisor as an ``unhealthy`` exit,
counted in its group's intensity like a crash.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import psutil

from watchkeeper.config import ProgramHealthConfig
from watchkeeper.supervise import CheckResult, Clock, HealthCheck, HealthStatus, HttpCheck

log = logging.getLogger(__name__)

#: Called with the detail of the failing checks once they failed ``failures`` times in a row.
Fail = Callable[[str], Awaitable[None]]
#: Told each check's latest answer: name, status, detail.
Seen = Callable[[str, HealthStatus, str], None]


class HeartbeatFileCheck:
    """Unhealthy when the file the program touches is missing or older than its limit."""

    name = "heartbeat_file"

    def __init__(self, path: Path, max_age_s: float) -> None:
        self.path = path
        self.max_age_s = max_age_s

    async def run(self) -> CheckResult:
        """How old the file is (wall time: the program touches it on the host's clock)."""
        try:
            age = max(0.0, time.time() - os.stat(self.path).st_mtime)
        except OSError as exc:
            return CheckResult(
                HealthStatus.UNHEALTHY, f"no heartbeat file {self.path}: {exc.strerror}"
            )
        status = HealthStatus.UNHEALTHY if age > self.max_age_s else HealthStatus.HEALTHY
        return CheckResult(
            status, f"{self.path} touched {age:.0f} s ago (limit {self.max_age_s:g} s)"
        )


class TreeMemoryCheck:
    """Unhealthy when the program's processes together use more memory (RSS) than allowed."""

    name = "memory"

    def __init__(self, root: Callable[[], int | None], include_root: bool, max_bytes: int) -> None:
        self.root = root
        self.include_root = include_root
        self.max_bytes = max_bytes

    async def run(self) -> CheckResult:
        """The RSS of every process under the program's root, summed."""
        pid = self.root()
        if pid is None:
            return CheckResult(HealthStatus.HEALTHY, "not running")
        try:
            top = psutil.Process(pid)
            processes = top.children(recursive=True) + ([top] if self.include_root else [])
        except psutil.Error:
            return CheckResult(HealthStatus.HEALTHY, "its processes have just exited")
        rss = 0
        for process in processes:
            try:
                rss += process.memory_info().rss
            except psutil.Error:
                continue  # exited meanwhile
        status = HealthStatus.UNHEALTHY if rss > self.max_bytes else HealthStatus.HEALTHY
        limit = self.max_bytes / 2**20
        return CheckResult(
            status, f"{rss / 2**20:.0f} MiB in {len(processes)} processes (limit {limit:g} MiB)"
        )


def checks_of(
    config: ProgramHealthConfig, root: Callable[[], int | None], include_root: bool
) -> list[HealthCheck]:
    """The checks a program's ``health`` table asks for."""
    found: list[HealthCheck] = []
    if config.http is not None:
        found.append(HttpCheck("http", config.http, timeout_s=config.timeout_s))
    if config.heartbeat_file is not None:
        found.append(HeartbeatFileCheck(config.heartbeat_file, config.heartbeat_max_age_s))
    if config.max_memory_mb is not None:
        found.append(TreeMemoryCheck(root, include_root, int(config.max_memory_mb * 2**20)))
    return found


async def watch(
    config: ProgramHealthConfig,
    checks: list[HealthCheck],
    clock: Clock,
    start_s: float,
    seen: Seen,
    fail: Fail,
) -> None:
    """Run ``checks`` while the program runs; ``fail`` once they failed enough times in a row."""
    bad = 0
    await clock.sleep_until(clock.now() + start_s + config.interval_s)
    while True:
        failing = []
        for check in checks:
            result = await _run(check, config.timeout_s + 1.0)
            seen(check.name, result.status, result.detail)
            if result.status is HealthStatus.UNHEALTHY:
                failing.append(f"{check.name}: {result.detail}")
        bad = bad + 1 if failing else 0
        if bad >= config.failures:
            await fail(f"{'; '.join(failing)} ({bad} times in a row)")
            return
        await clock.sleep_until(clock.now() + config.interval_s)


async def _run(check: HealthCheck, limit_s: float) -> CheckResult:
    """One answer of ``check``; one that raises or hangs is unhealthy."""
    try:
        async with asyncio.timeout(limit_s):
            return await check.run()
    except TimeoutError:
        return CheckResult(HealthStatus.UNHEALTHY, f"no answer within {limit_s:g} s")
    except Exception as exc:  # noqa: BLE001 - a check that breaks is a failing check
        log.warning(
            "Health check %s raised: %r", check.name, exc, extra={"action": "program_health"}
        )
        return CheckResult(HealthStatus.UNHEALTHY, f"the check failed: {exc!r}")
