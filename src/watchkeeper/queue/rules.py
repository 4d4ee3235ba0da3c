"""Lease rules and blocked reasons: pure functions over frozen facts.

:func:`lease_block` is the one rule: may ``runner`` lease ``task`` now? It
returns the first failing reason in a fixed order, or ``None``; a task is
leasable by a runner exactly when the answer is ``None``. The store calls it
(through the queue service) inside the leasing transaction, and
:func:`explain` calls it read-only for every registered runner to say why a
queued task waits, so the explanation and the lease decision cannot disagree.

The fixed order, per (task, runner):

1. ``no_runner``: the runner does not serve the task's fleet (or is tied to
   another org);
2. ``runner_offline``: it has not heartbeated within ``offline_after_s`` (or
   has stopped);
3. ``runners_busy``: it already runs ``capacity`` tasks;
4. ``concurrency_cap``: the org runs ``max_concurrent_jobs`` jobs and this
   task would start another;
5. ``compute_cap``: the org used its ``monthly_agent_minutes``.

A queued task's reason is the furthest any runner got in that order
(``awaiting_runner`` when one got through). When no live runner serves it, the
last cold start of a runner for its org and fleet (provisioning state) says
``provisioning`` or ``provision_failed`` instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from watchkeeper.records.queue import OrgLoad, Provision, QueuedTask, Runner, Snapshot


class Reason(StrEnum):
    """Why a queued task has not started: a stable code."""

    AWAITING_RUNNER = "awaiting_runner"
    PROVISIONING = "provisioning"
    PROVISION_FAILED = "provision_failed"
    NO_RUNNER = "no_runner"
    RUNNER_OFFLINE = "runner_offline"
    RUNNERS_BUSY = "runners_busy"
    CONCURRENCY_CAP = "concurrency_cap"
    COMPUTE_CAP = "compute_cap"
    UNKNOWN = "unknown"


#: The order :func:`lease_block` checks in; later means closer to being leased.
RULE_ORDER = (
    Reason.NO_RUNNER,
    Reason.RUNNER_OFFLINE,
    Reason.RUNNERS_BUSY,
    Reason.CONCURRENCY_CAP,
    Reason.COMPUTE_CAP,
)
PROVISION_FAILED = "failed"
PROVISIONING = "provisioning"


@dataclass(frozen=True, slots=True)
class OrgPolicy:
    """An org's caps (``None``: no cap)."""

    max_concurrent_jobs: int | None = None
    monthly_agent_minutes: float | None = None

    @property
    def capped(self) -> bool:
        """Whether any cap applies: only then must leasing count the org's load."""
        return self.max_concurrent_jobs is not None or self.monthly_agent_minutes is not None


NO_CAPS = OrgPolicy()


@dataclass(frozen=True, slots=True)
class Policy:
    """The knobs the rules read, from the configuration."""

    offline_after_s: float = 30.0
    provision_timeout_s: float = 300.0
    orgs: Mapping[str, OrgPolicy] = field(default_factory=dict)

    def org(self, name: str) -> OrgPolicy:
        """The caps of org ``name``."""
        return self.orgs.get(name, NO_CAPS)


@dataclass(frozen=True, slots=True)
class Blocked:
    """Why a queued task waits: a stable code and a sentence with the counts."""

    code: Reason
    message: str

    def as_dict(self) -> dict[str, Any]:
        """As the API shows it."""
        return {"code": self.code.value, "message": self.message}


def runner_alive(runner: Runner, now: datetime, policy: Policy) -> bool:
    """Alive by its own heartbeat (never by how recently it polled), and not stopped."""
    if runner.stopped_at is not None:
        return False
    return runner.heartbeat_at + timedelta(seconds=policy.offline_after_s) > now


def serves(runner: Runner, task: QueuedTask) -> bool:
    """Fleet routing: the runner's fleet, and its org when it is tied to one."""
    return runner.fleet == task.fleet and runner.org in (None, task.org)


def lease_block(
    task: QueuedTask, runner: Runner, load: OrgLoad, policy: Policy, now: datetime
) -> Reason | None:
    """The first reason ``runner`` may not lease ``task`` now, or ``None`` if it may."""
    if not serves(runner, task):
        return Reason.NO_RUNNER
    if not runner_alive(runner, now, policy):
        return Reason.RUNNER_OFFLINE
    if runner.running >= runner.capacity:
        return Reason.RUNNERS_BUSY
    caps = policy.org(task.org)
    # A continuation of a job that already runs does not start another job.
    cap = caps.max_concurrent_jobs
    if cap is not None and not task.job_running and load.running_jobs >= cap:
        return Reason.CONCURRENCY_CAP
    minutes = caps.monthly_agent_minutes
    if minutes is not None and load.used_minutes >= minutes:
        return Reason.COMPUTE_CAP
    return None


def leasable_by(task: QueuedTask, runner: Runner, snapshot: Snapshot, policy: Policy) -> bool:
    """The claim: leasable exactly when :func:`lease_block` finds no reason."""
    load = snapshot.loads.get(task.org, OrgLoad(task.org))
    return lease_block(task, runner, load, policy, snapshot.at) is None


def explain(task: QueuedTask, snapshot: Snapshot, policy: Policy) -> Blocked:
    """Why ``task`` is still queued, by asking :func:`lease_block` of every runner."""
    now = snapshot.at
    load = snapshot.loads.get(task.org, OrgLoad(task.org))
    found = [lease_block(task, runner, load, policy, now) for runner in snapshot.runners]
    serving = [runner for runner in snapshot.runners if serves(runner, task)]
    if any(reason is None for reason in found):
        return _awaiting(task, serving, now, policy)
    worst = max(found, key=_rank) if found else Reason.NO_RUNNER
    assert worst is not None
    if worst in (Reason.NO_RUNNER, Reason.RUNNER_OFFLINE):
        provision = snapshot.provisions.get((task.org, task.fleet))
        if provision is not None:
            return _provision(task, provision, now, policy)
    if worst is Reason.NO_RUNNER:
        return _no_runner(task, snapshot.runners)
    if worst is Reason.RUNNER_OFFLINE:
        return _offline(task, serving, now)
    if worst is Reason.RUNNERS_BUSY:
        return _busy(task, serving, now, policy)
    return _capped(worst, task, load, policy)


def explain_all(
    tasks: Sequence[QueuedTask], snapshot: Snapshot, policy: Policy
) -> dict[str, Blocked]:
    """Reasons for many tasks: computed once per (org, fleet, job running), then shared."""
    memo: dict[tuple[str, str, bool], Blocked] = {}
    result: dict[str, Blocked] = {}
    for task in tasks:
        key = (task.org, task.fleet, task.job_running)
        blocked = memo.get(key)
        if blocked is None:
            blocked = memo[key] = explain(task, snapshot, policy)
        result[task.id] = blocked
    return result


def unknown(error: BaseException) -> Blocked:
    """The reason when the explanation itself failed: the request still succeeds."""
    return Blocked(Reason.UNKNOWN, f"the reason could not be worked out ({error}); see the log")


def _rank(reason: Reason | None) -> int:
    return RULE_ORDER.index(reason) if reason is not None else len(RULE_ORDER)


def _awaiting(
    task: QueuedTask, serving: Sequence[Runner], now: datetime, policy: Policy
) -> Blocked:
    live = [r for r in serving if runner_alive(r, now, policy)]
    free = [r for r in live if r.running < r.capacity]
    slots = sum(r.capacity - r.running for r in free)
    return Blocked(
        Reason.AWAITING_RUNNER,
        f"{len(free)}/{len(serving)} runners serving fleet {task.fleet} have a free slot "
        f"({_plural(slots, 'slot')} free); waiting for one to pick it up",
    )


def _no_runner(task: QueuedTask, runners: Sequence[Runner]) -> Blocked:
    others = [r for r in runners if r.fleet == task.fleet]
    scope = f" for org {task.org}" if others else ""
    return Blocked(
        Reason.NO_RUNNER,
        f"0/{len(runners)} runners serve fleet {task.fleet}{scope}; "
        f"start one with `watchkeeper runner --fleet {task.fleet}`",
    )


def _offline(task: QueuedTask, serving: Sequence[Runner], now: datetime) -> Blocked:
    last = max(r.heartbeat_at for r in serving)
    return Blocked(
        Reason.RUNNER_OFFLINE,
        f"0/{len(serving)} runners serving fleet {task.fleet} are online; "
        f"{len(serving)} offline, last seen {ago(now - last)} ago",
    )


def _busy(task: QueuedTask, serving: Sequence[Runner], now: datetime, policy: Policy) -> Blocked:
    live = [r for r in serving if runner_alive(r, now, policy)]
    used = sum(r.running for r in live)
    slots = sum(r.capacity for r in live)
    return Blocked(
        Reason.RUNNERS_BUSY,
        f"0/{len(serving)} runners serving fleet {task.fleet} have a free slot; "
        f"{len(live)} online run {used}/{slots} tasks",
    )


def capped(reason: Reason, task: QueuedTask, load: OrgLoad, policy: Policy) -> Blocked:
    """Why an org's cap (``reason``: concurrency or compute) holds ``task`` back."""
    return _capped(reason, task, load, policy)


def _capped(reason: Reason, task: QueuedTask, load: OrgLoad, policy: Policy) -> Blocked:
    caps = policy.org(task.org)
    if reason is Reason.CONCURRENCY_CAP:
        return Blocked(
            reason, f"org {task.org} runs {load.running_jobs}/{caps.max_concurrent_jobs} jobs"
        )
    return Blocked(
        reason,
        f"org {task.org} used {load.used_minutes:,.0f}/{caps.monthly_agent_minutes or 0:,.0f} "
        "agent-minutes this month",
    )


def provision_expired(provision: Provision, now: datetime, policy: Policy) -> bool:
    """A cold start that has not produced a runner within the timeout counts as failed."""
    limit = provision.started_at + timedelta(seconds=policy.provision_timeout_s)
    return provision.state == PROVISIONING and now >= limit


def _provision(task: QueuedTask, provision: Provision, now: datetime, policy: Policy) -> Blocked:
    where = f"org {task.org} in fleet {task.fleet}"
    if provision.state == PROVISIONING and not provision_expired(provision, now, policy):
        return Blocked(
            Reason.PROVISIONING,
            f"a runner for {where} is being started (cold start began "
            f"{ago(now - provision.started_at)} ago)",
        )
    reason = provision.reason or "no reason given"
    if provision.state == PROVISIONING:
        reason = f"no runner registered within {policy.provision_timeout_s:g} s of the cold start"
    return Blocked(
        Reason.PROVISION_FAILED,
        f"the last cold start of a runner for {where} failed "
        f"{ago(now - provision.updated_at)} ago: {reason}",
    )


def ago(delta: timedelta) -> str:
    """A short human duration: ``40 s``, ``7 min``, ``3 h``, ``2 d``."""
    seconds = max(0, int(delta.total_seconds()))
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    if seconds < 172_800:
        return f"{seconds // 3600} h"
    return f"{seconds // 86400} d"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"
