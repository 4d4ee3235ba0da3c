"""What the service hands the store for a lease and for outcomes: the rule and the reads.

The store walks the queue; the lease rule of ``rules`` judges each task it
meets, with the page size and whether any org is capped (which decides what
the store must lock and count first).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from watchkeeper.contract import fingerprint as failure_fingerprint
from watchkeeper.queue import rules
from watchkeeper.records.queue import OrgLoad, QueuedTask, Runner, TaskStatus
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
    }


def fingerprinted(ends: Sequence[End]) -> list[End]:
    """``ends``, each failure without a fingerprint given one from its reason."""
    return [
        end
        if end.status is not TaskStatus.FAILED or end.fingerprint
        else replace(end, fingerprint=failure_fingerprint(end.reason or ""))
        for end in ends
    ]
