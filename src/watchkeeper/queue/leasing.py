"""What the service hands the store for a lease and for outcomes: the rule and the reads.

The store walks the queue; the lease rule of ``rules`` judges each task it
meets, with the page size and whether any org is capped (which decides what
the store must lock and count first).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from watchkeeper.contract import fingerprint as failure_fingerprint
from watchkeeper.queue import rules
from watchkeeper.queue.errors import LeaseLost
from watchkeeper.queue.idle import Idle
from watchkeeper.records.queue import Lease, OrgLoad, QueuedTask, Runner, Task, TaskStatus
from watchkeeper.store.queue import End


def lease_terms(policy: rules.Policy, now: datetime, limit: int) -> dict[str, Any]:
    """The keyword arguments of a store lease at ``now`` of up to ``limit`` tasks."""

    def admit(task: QueuedTask, runner: Runner, load: OrgLoad) -> bool:
        return rules.lease_block(task, runner, load, policy, now) is None

    return {
        "limit": limit,
        "admit": admit,
        "load_needed": lambda org: policy.org(org).capped,
        # Enough to pass over what other leases are taking meanwhile, no more to build.
        "page": max(64, 8 * limit),
        "caps_possible": any(org.capped for org in policy.orgs.values()),
        # A lease is proof of life; written only once the heartbeat is half-way to offline.
        "beat_before": now - timedelta(seconds=policy.offline_after_s / 2),
    }


def fingerprinted(ends: Sequence[End]) -> list[End]:
    """``ends``, each failure without a fingerprint given one from its reason."""
    return [
        end
        if end.status is not TaskStatus.FAILED or end.fingerprint
        else replace(end, fingerprint=failure_fingerprint(end.reason or ""))
        for end in ends
    ]


@dataclass(frozen=True, slots=True)
class LeasePass:
    """A runner's pass: its outcomes, its leases, and why none was leased (or that the
    runner was counted offline and is back)."""

    outcomes: list[Task | LeaseLost]
    leases: list[Lease]
    reason: Idle | None = None
