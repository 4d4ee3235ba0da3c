"""What the supervision canvas reads and does beyond the supervision tree itself.

The canvas draws process runs as cards (each probed for liveness when read), the
health endpoint as a node of its own, and acts through the same services the API
uses: a program's command started as a fresh process run, the health monitor's
flag switched, a supervisor's strategy switched.
"""

from __future__ import annotations

import math
import os
import shutil
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import psutil

from watchkeeper.backoff import backoff_ceiling
from watchkeeper.clock import WallClock, rfc3339
from watchkeeper.errors import Conflict, NotFound, WatchkeeperError
from watchkeeper.notify.channels.base import Channel
from watchkeeper.notify.router import parse_place
from watchkeeper.notify.testcard import places_for, post_test_cards
from watchkeeper.procs import identity, reaper
from watchkeeper.procs.launch import LaunchRequest
from watchkeeper.programs import view
from watchkeeper.programs.gates import Gate
from watchkeeper.programs.host import ProgramHost
from watchkeeper.records.procs import ProcRun
from watchkeeper.redact import redact
from watchkeeper.server.deps import Services
from watchkeeper.server.health import assess
from watchkeeper.server.supervision import TREE, ServerSupervision
from watchkeeper.supervise import (
    CircuitBreaker,
    CircuitOpenError,
    CircuitState,
    Strategy,
    strategies,
)

#: How many runs the canvas draws as cards (the newest).
RUN_CARDS = 12
#: Where a load balancer probes this server.
PROBE_PATH = "/healthz"
#: Statuses of a run that still holds processes.
_LIVE = frozenset({"running", "starting", "pending", "created", "unknown"})


def _liveness(status: str, alive: bool | None) -> str:
    """``live`` (its owner answers), ``stale`` (left active, its owner gone) or ``ended``."""
    if status == reaper.STALE:
        return "stale"
    if status in _LIVE and alive is not False:
        return "live"
    return "ended"


def run_card(services: Services, run: ProcRun) -> dict[str, Any]:
    """One process run as a card: its status probed now, and who owns its processes."""
    engine = services.procs
    status = engine.effective_status(run)
    alive = engine.alive(run)
    liveness = _liveness(status, alive)
    owner = reaper.shim_ownership(run) if not run.reported else identity.Ownership.UNKNOWN
    origin = run.origin or {}
    return {
        "id": run.run_id,
        "name": run.name,
        "program": origin.get("program"),
        "status": status,
        "liveness": liveness,
        "alive": alive,
        "ownership": owner.value,
        "owner_pid": run.shim_pid,
        "pid": run.pid,
        "host": run.host,
        "exit_code": run.exit_code,
        "signal": run.signal,
        "reason": run.reason,
        "started_at": rfc3339(run.started_at) if run.started_at else None,
        "finished_at": rfc3339(run.finished_at) if run.finished_at else None,
        # Its record and log may go once nothing of it runs.
        "cleanable": liveness != "live",
    }


def run_cards(services: Services) -> list[dict[str, Any]]:
    """The newest process runs, active and recently ended, as cards."""
    runs = services.procs.runs(include_finished=True, limit=RUN_CARDS)
    return [run_card(services, run) for run in runs]


def endpoint(services: Services, supervision: ServerSupervision) -> dict[str, Any]:
    """The health endpoint: where it is probed and what it answers now (as ``/healthz``
    judges), beside the health monitor's flag."""
    health = assess(services, services.cluster.health(), supervision)
    report = supervision.monitor.report()
    return {
        "path": PROBE_PATH,
        "status": health.status.value,
        "code": health.code,
        "causes": [cause.detail for cause in health.causes],
        "flag_healthy": report.flag_healthy,
        "flag_reason": report.flag_reason,
    }


_MB = 2**20
#: The highest floor a dial takes, in MB (a petabyte): anything above is a typing slip.
MAX_FLOOR_MB = 1e9


def dial(gate: Gate) -> dict[str, Any]:
    """A host check as a dial: what there is now against the floor it fails below."""
    config = gate.config
    if config.kind == "disk":
        assert config.path is not None
        assert config.min_free_mb is not None
        try:
            usage = shutil.disk_usage(config.path)
            value, total = usage.free / _MB, usage.total / _MB
        except OSError:
            value, total = 0.0, 0.0
        floor = config.min_free_mb
    else:
        assert config.min_available_mb is not None
        memory = psutil.virtual_memory()
        value, total, floor = memory.available / _MB, memory.total / _MB, config.min_available_mb
    return {
        "kind": config.kind,
        "value_mb": round(value),
        "total_mb": round(total),
        "floor_mb": floor,
        "headroom_mb": round(value - floor),
        "closed": gate.closed,
        "pauses": sorted(gate.pauses),
    }


def monitor(supervision: ServerSupervision) -> dict[str, Any]:
    """The health monitor: its overall answer (the ring) and each check (a dial)."""
    report = supervision.monitor.report()
    return {
        "id": "health",
        "name": "health",
        "status": report.status.value,
        "checks": [
            {"name": c.name, "status": c.status.value, "detail": c.last.detail}
            for c in report.checks
        ],
    }


#: How many agents the canvas draws (the ones heard from longest ago first).
AGENTS = 12
#: How many restarts a backoff timeline shows at least.
STEPS = 5


def agents(services: Services) -> list[dict[str, Any]]:
    """Work that reports itself (an agent, a worker): how long since its last heartbeat,
    against the lease it must renew within, on the server's clock."""
    now = services.clock()
    found: list[dict[str, Any]] = []
    for kind in sorted(services.push_kinds - {"program"}):
        for run in services.reports.running(kind, now):
            age = max(0.0, (now - run.last_seen_at).total_seconds())
            found.append(
                {
                    "id": f"{kind}/{run.run_id}",
                    "name": run.run_id,
                    "kind": kind,
                    "title": run.title,
                    "status": run.status.value,
                    "heartbeat_age_s": round(age, 3),
                    "timeout_s": run.lease_s,
                    "left_s": round(run.lease_s - age, 3),
                    "seen_at": rfc3339(run.last_seen_at),
                }
            )
    found.sort(key=lambda agent: -agent["heartbeat_age_s"])
    return found[:AGENTS]


def backoffs(host: ProgramHost) -> dict[str, dict[str, Any]]:
    """Each program's restart delays (without jitter), the one it waits out now and how long
    is left of it, on the supervisors' clock; by its node in the tree."""
    found = {}
    for plan in host.plans:
        group = host.groups.get(plan.name)
        if group is None:
            continue
        config = plan.backoff
        for info in group.supervisor.children():
            program = plan.member(info.name)
            if program is None:
                continue
            delays = [
                backoff_ceiling(k, initial=config.initial_s, factor=config.factor, cap=config.max_s)
                for k in range(max(STEPS, info.attempt + 1))
            ]
            left = None
            if info.restart_at is not None:
                left = round(max(0.0, info.restart_at - host.sv_clock.now()), 3)
            found[view.node_id(plan.name, info.name, program.grouped)] = {
                "attempt": info.attempt,
                "delays_s": delays,
                "jitter": config.jitter,
                "restart_in_s": left,
            }
    return found


def _attach(children: list[dict[str, Any]], plans: dict[str, dict[str, Any]]) -> None:
    for child in children:
        if child["id"] in plans:
            child["backoff_plan"] = plans[child["id"]]
        _attach(child.get("children") or [], plans)


def probe_in(breaker: CircuitBreaker) -> float | None:
    """Seconds until the breaker lets its one probe through (0: now, half-open in all but
    name); ``None`` while it is closed."""
    state = breaker.stored()
    if state.state is CircuitState.CLOSED:
        return None
    if state.state is CircuitState.HALF_OPEN or state.opened_at is None:
        return 0.0
    # The server's breakers count on the wall clock (their state may be shared).
    return round(max(0.0, state.opened_at + breaker.reset_timeout_s - WallClock().now()), 3)


#: How much of a failure's reason the canvas shows (counted after redaction).
REASON_CHARS = 120


def _reason(reason: str | None) -> str | None:
    if reason is None:
        return None
    # Redacted whole, then shortened: a secret cut in two first could escape its shape.
    shown = redact(reason)
    return shown if len(shown) <= REASON_CHARS else f"{shown[: REASON_CHARS - 1]}…"


def recent_calls(breaker: CircuitBreaker) -> list[dict[str, Any]]:
    """A breaker's latest successes and failures, newest first: when each ended (RFC 3339,
    UTC) and, for a failure, its reason redacted."""
    return [
        {
            # The server's breakers count on the wall clock: their times are epoch seconds.
            "at": rfc3339(datetime.fromtimestamp(call.at, UTC)),
            "ok": call.ok,
            "reason": _reason(call.reason),
        }
        for call in breaker.recent_calls()
    ]


class ProbeFailedError(WatchkeeperError):
    """The probe reached the dependency and it did not answer as it should."""


async def probe_breaker(
    supervision: ServerSupervision,
    channels: Mapping[str, Channel],
    ops_channels: list[str],
    name: str,
) -> str:
    """Send the one probe a breaker due for it lets through: for a channel's breaker, the test
    card to that channel's ops chat. It closes the breaker if it arrives, reopens it if not."""
    breaker = supervision.breakers.get(name)
    if breaker is None:
        known = ", ".join(sorted(supervision.breakers)) or "none"
        raise NotFound(f"no circuit breaker {name!r}; the breakers are: {known}")
    due = probe_in(breaker)
    if due is None:
        raise Conflict(f"breaker {name} is closed: calls go through, there is nothing to probe")
    if due > 0:
        raise Conflict(f"breaker {name} is open for {due:.0f} s more: no probe goes before then")
    channel = name.removeprefix("notify:")
    places = [p for p in places_for(ops_channels) if parse_place(p).channel == channel]
    if not name.startswith("notify:") or channel not in channels or not places:
        raise Conflict(f"breaker {name} guards no channel with an ops chat: nothing to probe with")

    async def probe() -> None:
        [card] = await post_test_cards(channels, places[:1])
        if card.state != "ok":
            raise ProbeFailedError(card.detail)

    try:
        await breaker.call_async(probe)
    except CircuitOpenError:
        raise Conflict(f"breaker {name} is letting another probe through now") from None
    except ProbeFailedError as exc:
        return (
            f"the probe failed ({exc}): breaker {name} is open again for "
            f"{breaker.reset_timeout_s:g} s"
        )
    return f"the probe passed (a test card posted to {places[0]}): breaker {name} is closed"


def snapshot(services: Services, supervision: ServerSupervision) -> dict[str, Any]:
    """Everything the canvas draws: the supervision tree, its runs, its endpoint, its health
    monitor, the host checks as dials, and each breaker's recent calls."""
    found = supervision.snapshot()
    host = supervision.programs
    dials = {f"host check {gate.name}": (gate.name, dial(gate)) for gate in host.gates.gates}
    for row in found["health"]:
        if row["name"] in dials:
            row["check"], row["dial"] = dials[row["name"]]
    plans = backoffs(host)
    for tree in found["trees"]:
        _attach(tree["children"], plans)
    for row in found["breakers"]:
        breaker = supervision.breakers[row["name"]]
        row["probe_in_s"] = probe_in(breaker)
        row["recent"] = recent_calls(breaker)
    found["agents"] = agents(services)
    found["runs"] = run_cards(services)
    found["endpoint"] = endpoint(services, supervision)
    found["monitor"] = monitor(supervision)
    found["programs"] = [
        {
            "name": name,
            "paused": host.gates.reason_for(name),
            "group": state.plan.group if state.plan.grouped else None,
        }
        for name, state in sorted(host.programs.items())
    ]
    found["probed_at"] = rfc3339(services.clock())
    return found


async def set_floor(supervision: ServerSupervision, check: str, mb: float) -> str:
    """Move a host check's floor (:class:`ValueError` for one that is not a size)."""
    if not math.isfinite(mb) or not 0 < mb <= MAX_FLOOR_MB:
        raise ValueError(f"the floor must be more than 0 and at most {MAX_FLOOR_MB:g} MB")
    return await supervision.programs.set_floor(check, mb)


def start_run(services: Services, host: ProgramHost, program: str) -> ProcRun:
    """Run ``program``'s command once more as a process run of its own (a fresh id), beside
    the supervised copy; :class:`NotFound` for a name this host does not run."""
    state = host.programs.get(program)
    if state is None:
        known = ", ".join(sorted(host.programs)) or "none"
        raise NotFound(f"no program {program!r} on {host.host}; there are: {known}")
    paused = host.gates.reason_for(program)
    if paused is not None:
        raise Conflict(f"{program} cannot start now: {paused}")
    config = state.plan.config
    directory = config.directory or services.settings.data_dir
    request = LaunchRequest(
        tuple(config.command),
        cwd=str(directory),
        name=f"{program} (from the canvas)",
        detach=True,
        origin={"program": program, "via": "canvas"},
        env={**os.environ, **config.environment},
    )
    return services.procs.start(request).run


def reclaim(services: Services, run_id: str) -> str:
    """Settle a stale run (left active, its owner gone): what ``procs reclaim`` does, for it.

    :class:`Conflict` when it is not stale: a live run is aborted, an ended one is settled.
    """
    engine = services.procs
    card = run_card(services, engine.get(run_id))
    if card["liveness"] != "stale":
        raise Conflict(
            f"run {run_id} is {card['liveness']}, not stale: only a run whose owner is gone "
            "is reclaimed"
        )
    report = engine.reap()
    after = engine.get(run_id)
    if run_id not in report.reclaimed and not after.status.ended:
        raise Conflict(f"run {run_id} could not be reclaimed now; it is {after.status.value}")
    return f"run {run_id} reclaimed: {after.status.value} ({after.reason or 'no reason given'})"


def _announce(supervision: ServerSupervision) -> None:
    """Tell every open page the picture moved (the stream's supervision event)."""
    for callback in tuple(supervision.on_change):
        callback()


def set_flag(supervision: ServerSupervision, healthy: bool, reason: str) -> str:
    """Switch the health monitor's flag: off, the monitor answers unhealthy whatever its
    checks say."""
    flag = supervision.monitor.flag
    flag.set(healthy, "" if healthy else reason or "switched off on the canvas")
    _announce(supervision)
    if healthy:
        return "the healthy flag is on: the health monitor answers from its checks again"
    return "the healthy flag is off: the health monitor answers unhealthy until it is switched on"


#: A rotation's next strategy: one-for-one and one-for-all in turn.
TURN = {
    Strategy.ONE_FOR_ONE: Strategy.ONE_FOR_ALL,
    Strategy.ONE_FOR_ALL: Strategy.ONE_FOR_ONE,
    Strategy.REST_FOR_ONE: Strategy.ONE_FOR_ALL,
}


def switch_strategy(supervision: ServerSupervision, node: str, strategy: Strategy) -> str:
    """Give the supervisor ``node`` (the server's tree, or a program group) ``strategy``."""
    if node == TREE:
        strategies.switch(supervision.supervisor, strategy)
        _announce(supervision)
        return (
            f"the server's tree is {strategy.value.replace('_', '-')} now, until the server "
            "restarts"
        )
    group = node.removeprefix("programs/")
    if group == node or "/" in group:
        raise NotFound(f"no supervisor {node!r}: the server's tree or a program group")
    if group not in {g.name for g in supervision.programs.plans if g.declared}:
        raise Conflict(f"{group} is a program alone, not a group: it has no strategy to switch")
    return supervision.programs.set_strategy(group, strategy)
