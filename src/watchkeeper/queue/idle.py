"""Why a lease came back empty: one reason a runner can log and a person can act on.

A runner that asks for work and gets none is told why, in the lease answer's
``reason`` (``{"code", "message"}``): the queue is empty, no queued task is for
its fleet (or org), it already runs its capacity, an org's cap holds the tasks
back, or other runners took them first. A lease is also the runner's proof of
life: a runner the queue had counted offline (it started slowly, or its
heartbeats were lost) is told it is back, whether or not it got work.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum
from typing import Any

from watchkeeper.queue import rules
from watchkeeper.records.queue import OrgLoad, Runner
from watchkeeper.store.queue import QueueStore


class IdleCode(StrEnum):
    """Why a lease answer holds no task (or, with tasks, that the runner is back)."""

    QUEUE_EMPTY = "queue_empty"
    NO_MATCH = "no_match"
    RUNNER_FULL = "runner_full"
    CONCURRENCY_CAP = "concurrency_cap"
    COMPUTE_CAP = "compute_cap"
    TAKEN = "taken"
    BACK_ONLINE = "back_online"


@dataclass(frozen=True, slots=True)
class Idle:
    """A lease answer's ``reason``: a stable code and a sentence."""

    code: IdleCode
    message: str

    def as_dict(self) -> dict[str, Any]:
        """As the lease answer carries it."""
        return {"code": self.code.value, "message": self.message}


def idle_reason(
    store: QueueStore, policy: rules.Policy, seen: Runner, leased: int, now: datetime
) -> Idle | None:
    """Why a lease of ``leased`` tasks for ``seen`` (the runner as read before the lease
    beat for it) came back empty; ``None`` when it got work and was never counted offline."""
    back = None
    if not rules.runner_alive(seen, now, policy):
        back = (
            f"this runner was marked offline (no heartbeat for {rules.ago(now - seen.heartbeat_at)}"
            f", over runner_offline_after_s = {policy.offline_after_s:g} s); it is back now"
        )
    if leased:
        return None if back is None else Idle(IdleCode.BACK_ONLINE, back)
    cause = _empty_because(store, policy, replace(seen, heartbeat_at=now), now)
    return cause if back is None else replace(cause, message=f"{back}; {cause.message}")


def _empty_because(store: QueueStore, policy: rules.Policy, runner: Runner, now: datetime) -> Idle:
    if runner.running >= runner.capacity:
        return Idle(
            IdleCode.RUNNER_FULL,
            f"this runner already runs {runner.running} task(s), its capacity",
        )
    oldest = store.oldest_queued_for(runner.fleet, runner.org)
    if oldest is None:
        fleets = store.queued_fleets()
        if not fleets:
            return Idle(IdleCode.QUEUE_EMPTY, "the queue is empty")
        serves = f"fleet {runner.fleet}" + (f" for org {runner.org}" if runner.org else "")
        return Idle(
            IdleCode.NO_MATCH,
            f"no queued task matches this runner ({serves}); tasks wait for fleet(s) "
            f"{', '.join(fleets)}",
        )
    load = OrgLoad(oldest.org)
    if policy.org(oldest.org).capped:
        load = store.snapshot(now, {oldest.org}).loads.get(oldest.org, load)
    block = rules.lease_block(oldest, runner, load, policy, now)
    if block in (rules.Reason.CONCURRENCY_CAP, rules.Reason.COMPUTE_CAP):
        held = rules.capped(block, oldest, load, policy)
        waiting = f"the queued tasks of fleet {runner.fleet} wait: {held.message}"
        return Idle(IdleCode(block.value), waiting)
    return Idle(
        IdleCode.TAKEN,
        f"other runners took the queued tasks of fleet {runner.fleet} first; ask again",
    )
