"""Host checks that act: while a disk is low or memory critical, the programs a check names
do not start (nor restart), and the pause says why.

Each ``[host_checks.NAME]`` is one of the supervision library's checks (``DiskCheck``,
``MemoryCheck``); a check that answers unhealthy *closes* its gate. A program's
``hold`` asks :meth:`Gates.reason_for` before each start. Running programs go on
running: a pause only keeps what is not running from starting. When a gate opens
again, the host releases the held programs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from watchkeeper.config import HostCheckConfig
from watchkeeper.errors import NotFound
from watchkeeper.programs.plan import GroupPlan
from watchkeeper.supervise import Clock, DiskCheck, HealthCheck, HealthStatus, MemoryCheck

log = logging.getLogger(__name__)
_MB = 2**20


@dataclass
class Gate:
    """One host check, the programs it pauses, and its latest answer."""

    name: str
    config: HostCheckConfig
    check: HealthCheck
    pauses: frozenset[str]
    status: HealthStatus = HealthStatus.HEALTHY
    detail: str = "not checked yet"
    #: The clock time of its latest answer.
    checked_at: float | None = field(default=None)

    @property
    def closed(self) -> bool:
        """Whether it holds the starts of the programs it pauses."""
        return self.status is HealthStatus.UNHEALTHY


def _check_of(config: HostCheckConfig) -> HealthCheck:
    if config.kind == "disk":
        assert config.path is not None
        assert config.min_free_mb is not None
        return DiskCheck(config.path, critical_free_bytes=int(config.min_free_mb * _MB))
    assert config.min_available_mb is not None
    return MemoryCheck(available_critical_bytes=int(config.min_available_mb * _MB))


def _targets(names: Sequence[str], plans: Sequence[GroupPlan]) -> frozenset[str]:
    """The programs ``names`` stand for: a group stands for its programs."""
    found: set[str] = set()
    for plan in plans:
        for program in plan.programs:
            if program.name in names or (plan.declared and plan.name in names):
                found.add(program.name)
    return frozenset(found)


class Gates:
    """Every host check of the configuration, and whether it pauses a program now."""

    def __init__(
        self, configs: Mapping[str, HostCheckConfig], plans: Sequence[GroupPlan], clock: Clock
    ) -> None:
        self.clock = clock
        self.gates = [
            Gate(name, config, _check_of(config), _targets(config.pauses, plans))
            for name, config in configs.items()
        ]

    @property
    def interval_s(self) -> float | None:
        """How often to look again (the shortest interval), or ``None`` with no check."""
        return min((g.config.interval_s for g in self.gates), default=None)

    def set_floor(self, name: str, mb: float) -> Gate:
        """Move check ``name``'s floor (a disk's free space, the memory available) to ``mb``
        in the running configuration; it answers by the new floor from its next look."""
        gate = next((g for g in self.gates if g.name == name), None)
        if gate is None:
            known = ", ".join(g.name for g in self.gates) or "none"
            raise NotFound(f"no host check {name!r}; the host checks are: {known}")
        key = "min_free_mb" if gate.config.kind == "disk" else "min_available_mb"
        gate.config = gate.config.model_copy(update={key: mb})
        gate.check = _check_of(gate.config)
        return gate

    def reason_for(self, program: str) -> str | None:
        """Why ``program`` must not start now, or ``None``."""
        closed = [g for g in self.gates if g.closed and program in g.pauses]
        if not closed:
            return None
        return "; ".join(f"paused by host check {g.name}: {g.detail}" for g in closed)

    async def look(self, on_change: Callable[[Gate], None]) -> bool:
        """Run every check once; ``on_change`` for each that opened or closed. Whether one
        opened (the held programs may start now)."""
        opened = False
        for gate in self.gates:
            was = gate.closed
            try:
                result = await gate.check.run()
                gate.status, gate.detail = result.status, result.detail
            except Exception as exc:  # noqa: BLE001 - a check that breaks pauses nothing
                log.warning(
                    "Host check %s raised: %r", gate.name, exc, extra={"action": "host_check"}
                )
                gate.status, gate.detail = HealthStatus.DEGRADED, f"the check failed: {exc!r}"
            gate.checked_at = self.clock.now()
            if gate.closed != was:
                opened = opened or was
                on_change(gate)
        return opened

    async def watch(self, on_change: Callable[[Gate], None], release: Callable[[], None]) -> None:
        """Look every interval until cancelled; ``release`` whenever a gate opens."""
        interval = self.interval_s
        if interval is None:
            return
        while True:
            await self.clock.sleep_until(self.clock.now() + interval)
            if await self.look(on_change):
                release()
