"""The health checks of the server's own supervision: the store answers, sweeps succeed in
time, and each loop of the tree runs. The health monitor runs them every few seconds."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from typing import Any, Protocol

from watchkeeper.server.deps import Services
from watchkeeper.server.health import Level, sweep_cause
from watchkeeper.supervise import CheckResult, HealthStatus


class Sweeping(Protocol):
    """What :class:`SweepCheck` reads of the supervision: when this process began to sweep."""

    @property
    def sweeping_since(self) -> datetime | None: ...


class Children(Protocol):
    """What :class:`ChildCheck` reads of the supervision: one child as the API shows it."""

    def child(self, name: str) -> dict[str, Any]: ...


class StoreCheck:
    """Healthy while the database answers a real query (the open incidents are counted)."""

    name = "store"

    def __init__(self, services: Services) -> None:
        self._services = services

    async def run(self) -> CheckResult:
        """Count the open incidents once; how long it took is the detail."""
        started = time.perf_counter()
        try:
            count = await asyncio.to_thread(self._services.incidents.open_count)
        except Exception as exc:  # noqa: BLE001 - any failure to answer is the finding
            return CheckResult(HealthStatus.UNHEALTHY, f"the database did not answer: {exc}")
        took = (time.perf_counter() - started) * 1000
        return CheckResult(HealthStatus.HEALTHY, f"answered in {took:.0f} ms ({count} open)")


class SweepCheck:
    """Healthy while this replica's sweeps succeed in time (a follower sweeps nothing):
    the same judgement as ``/healthz``'s ``sweep`` cause."""

    name = "sweeps"

    def __init__(self, services: Services, supervision: Sweeping) -> None:
        self._services = services
        self._supervision = supervision

    async def run(self) -> CheckResult:
        """Read the sweeper's own account of its last sweeps, on the services' clock."""
        found = self._services
        leads = found.cluster.leadership.is_leader
        cause = sweep_cause(found, leads, self._supervision.sweeping_since, found.clock())
        if cause is None:
            return CheckResult(HealthStatus.HEALTHY, "sweeps succeed" if leads else "follows")
        status = HealthStatus.UNHEALTHY if cause.status is Level.FAILING else HealthStatus.DEGRADED
        return CheckResult(status, cause.detail)


class ChildCheck:
    """Healthy while the named child runs; degraded while it restarts; else unhealthy."""

    def __init__(self, supervision: Children, child: str) -> None:
        self.name = f"{child} running"
        self.child = child
        self._supervision = supervision

    async def run(self) -> CheckResult:
        """Look at the child's state in the tree."""
        child = self._supervision.child(self.child)
        state, last = child["state"], child["last_exit"]
        detail = f"{state}, {child['restarts']} restarts" + (f"; last exit {last}" if last else "")
        if state == "running":
            return CheckResult(HealthStatus.HEALTHY, detail)
        if state == "restarting":
            return CheckResult(HealthStatus.DEGRADED, detail)
        return CheckResult(HealthStatus.UNHEALTHY, detail)
