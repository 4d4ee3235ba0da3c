"""What ``GET /healthz`` answers: ``ok``, ``degraded`` or ``failing``, each cause named.

The rule is liveness as Kubernetes means it, with Healthchecks.io's grace for a
late beat: **failing** (503) says this process does not do its job (it judges no
work, or cannot record what it judged), so restarting it is the cure to try, and
an orchestrator polling ``/healthz`` does. **degraded** (200) says it judges and
records, but something around it is impaired (a paging platform, a loop waiting
out its restart backoff, a late sweep): a restart would not help, an operator
should look (``watchkeeper doctor`` exits non-zero on either). Every cause is
judged on the injected clock from what the process already knows, plus the
lease row the cluster view reads. docs/supervision.md lists the causes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

from watchkeeper.clock import rfc3339

if TYPE_CHECKING:
    from watchkeeper.server.deps import Services
    from watchkeeper.supervise.health import HealthFlag
    from watchkeeper.watch.cluster_view import ClusterHealth
    from watchkeeper.watch.store_writes import StoreWrites

#: Sweeps may be this many check intervals (plus the longest read time limit) apart
#: before the sweep is late (degraded), and this many before it is failing.
LATE_INTERVALS = 2
FAILING_INTERVALS = 3
#: A write refused less than this many check intervals ago still counts: the lease loop
#: writes twice an interval, so about four writes must go through before health recovers.
QUIET_INTERVALS = 2


class Level(StrEnum):
    """How the server is, best first; ``failing`` answers 503."""

    OK = "ok"
    DEGRADED = "degraded"
    FAILING = "failing"


_RANK = {Level.OK: 0, Level.DEGRADED: 1, Level.FAILING: 2}


@dataclass(frozen=True, slots=True)
class Cause:
    """One reason the server is not ``ok``: which check, how bad, and what was seen."""

    check: str
    status: Level
    detail: str

    def as_dict(self) -> dict[str, str]:
        """The cause as ``/healthz`` lists it."""
        return {"check": self.check, "status": self.status.value, "detail": self.detail}


@dataclass(frozen=True, slots=True)
class Health:
    """Every cause found, worst first; the status is the worst of them."""

    causes: tuple[Cause, ...]

    @property
    def status(self) -> Level:
        """``ok`` without causes, else the worst cause's status."""
        return max((c.status for c in self.causes), key=_RANK.__getitem__, default=Level.OK)

    @property
    def code(self) -> int:
        """503 while failing (restart me), else 200."""
        return 503 if self.status is Level.FAILING else 200


class Supervised(Protocol):
    """What the assessment reads of the server's own supervision (``ServerSupervision``)."""

    @property
    def store_writes(self) -> StoreWrites: ...

    @property
    def sweeping_since(self) -> datetime | None: ...

    def snapshot(self) -> dict[str, Any]: ...

    @property
    def health_flag(self) -> HealthFlag: ...


def assess(found: Services, cluster: ClusterHealth, supervision: Supervised | None) -> Health:
    """What every check found; ``supervision`` is ``None`` for an app without one."""
    now = found.clock()
    sweeps = found.sweeper.health
    causes: list[Cause] = []
    # The cluster view calls a leader with failing sweeps a problem too: the sweep says it.
    if cluster.problem is not None and not (cluster.leader and not sweeps.working):
        causes.append(Cause("cluster", Level.FAILING, cluster.problem))
    sweeping_since = None if supervision is None else supervision.sweeping_since
    late = sweep_cause(found, cluster.leader, sweeping_since, now)
    if late is not None:
        causes.append(late)
    if supervision is not None:
        snapshot = supervision.snapshot()
        causes.extend(loop_causes(snapshot["trees"][0]["children"]))
        refused = store_cause(supervision.store_writes, found.settings.check_interval_s, now)
        if refused is not None:
            causes.append(refused)
        switched_off = flag_cause(supervision.health_flag)
        if switched_off is not None:
            causes.append(switched_off)
        paging = paging_cause(snapshot["breakers"])
        if paging is not None:
            causes.append(paging)
    causes.sort(key=lambda c: -_RANK[c.status])
    return Health(tuple(causes))


def sweep_limits(found: Services) -> tuple[float, float]:
    """Seconds since the last good sweep past which it is late, and failing.

    A sweep starts at most a check interval after the last one began and reads
    every kind at once, each within its read time limit: the longest limit is the
    grace a sweep may legitimately take.
    """
    interval = found.settings.check_interval_s
    grace = max((a.config.timeout_s for a in found.sweeper.adapters.values()), default=0.0)
    return LATE_INTERVALS * interval + grace, FAILING_INTERVALS * interval + grace


def sweep_cause(
    found: Services, leads: bool, sweeping_since: datetime | None, now: datetime
) -> Cause | None:
    """Whether this replica's sweeps fail or are overdue; a follower sweeps nothing.

    ``sweeping_since`` is when this process last began to sweep (its loop started,
    or it took the lease); ``None`` when it runs no sweep loop, so only failing
    sweeps count.
    """
    if not leads:
        return None
    health = found.sweeper.health
    if not health.working:
        return Cause(
            "sweep",
            Level.FAILING,
            f"sweeps have failed since {rfc3339(health.failing_since)}: {health.last_error}",
        )
    if sweeping_since is None:
        return None
    last_ok = health.last_ok_at
    since = sweeping_since if last_ok is None else max(last_ok, sweeping_since)
    age = (now - since).total_seconds()
    late, failing = sweep_limits(found)
    if age <= late:
        return None
    interval = found.settings.check_interval_s
    return Cause(
        "sweep",
        Level.FAILING if age > failing else Level.DEGRADED,
        f"no sweep has succeeded for {age:.0f} s (interval {interval:g} s)",
    )


def loop_causes(children: list[dict[str, Any]]) -> list[Cause]:
    """A loop that is stopped or was given up on is failing; one waiting to restart, degraded."""
    causes = []
    for child in children:
        state, ident = child["state"], child["id"]
        title = child.get("title") or "its work"
        if state == "stopped":
            causes.append(
                Cause(
                    "loops",
                    Level.FAILING,
                    f"{ident} is stopped: nothing {title}; restart it (POST "
                    f"/api/v1/supervision/children/{ident}/restart) or restart the server",
                )
            )
        elif state == "gave_up":
            causes.append(
                Cause(
                    "loops",
                    Level.FAILING,
                    f"{ident} is not running: the supervision tree gave up after too many "
                    f"restarts (last exit: {child['last_exit']}); restart the server",
                )
            )
        elif state == "restarting":
            causes.append(
                Cause(
                    "loops",
                    Level.DEGRADED,
                    f"{ident} waits to restart after {child['last_exit']} "
                    f"({child['restarts']} restarts so far)",
                )
            )
    return causes


def store_cause(writes: StoreWrites, interval_s: float, now: datetime) -> Cause | None:
    """Failing from the first refused write until none has been refused for a while."""
    spell = writes.refusing(timedelta(seconds=QUIET_INTERVALS * interval_s))
    if spell is None:
        return None
    ago = max(0.0, (now - spell.last_at).total_seconds())
    return Cause(
        "store",
        Level.FAILING,
        f"the store refuses writes: {spell.error} ({spell.count} refused since "
        f"{rfc3339(spell.since)}, the last {ago:.0f} s ago)",
    )


def flag_cause(flag: HealthFlag) -> Cause | None:
    """Failing while an operator has switched the healthy flag off: they asked orchestrators
    to take this process out of service, and only ``/healthz`` tells them."""
    if flag.healthy:
        return None
    return Cause(
        "flag",
        Level.FAILING,
        f"the healthy flag is switched off ({flag.reason or 'no reason given'}); switch it on "
        "at the canvas' endpoint node to answer from the checks again",
    )


def paging_cause(breakers: list[dict[str, Any]]) -> Cause | None:
    """Degraded while a paging channel's breaker is open; says so when none can deliver."""
    paging = [b for b in breakers if b["name"].startswith("notify:")]
    opened = [b["name"] for b in paging if b["state"] == "open"]
    if not opened:
        return None
    names = ", ".join(opened)
    if len(opened) == len(paging):
        detail = (
            f"no paging channel can deliver: every breaker is open ({names}); cards and "
            "notices wait until a probe gets through"
        )
    else:
        delivering = ", ".join(b["name"] for b in paging if b["state"] != "open")
        detail = f"breaker open for {names}: its messages wait; {delivering} still deliver"
    return Cause("paging", Level.DEGRADED, detail)
