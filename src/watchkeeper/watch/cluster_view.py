"""The replicas sharing one database, as this one sees them: who leads, who is alive, is all well.

A follower sweeps nothing, so its own sweep record says nothing about
supervision: what matters is that some replica holds a live lease. Whether
the leader is alive is read from the lease row itself (its holder renews it
every half check interval), so every replica answers the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from watchkeeper.clock import Now, rfc3339
from watchkeeper.errors import StoreError
from watchkeeper.store import Store
from watchkeeper.store.cluster import LeaseState, Member
from watchkeeper.watch.leader import Leadership
from watchkeeper.watch.selfcheck import SupervisionHealth


@dataclass(frozen=True, slots=True)
class ClusterHealth:
    """This replica's part in the cluster, and what (if anything) is wrong with supervision."""

    replica: str
    leader: bool
    epoch: int | None
    leader_replica: str | None
    leader_alive: bool
    lease_expires_at: datetime | None
    #: Why this replica must not be trusted with traffic, in words; ``None`` while all is well.
    problem: str | None

    def as_dict(self) -> dict[str, Any]:
        """The ``cluster`` part of ``/healthz``."""
        return {
            "replica": self.replica,
            "leader": self.leader,
            "epoch": self.epoch,
            "leader_replica": self.leader_replica,
            "leader_alive": self.leader_alive,
            "lease_expires_at": rfc3339(self.lease_expires_at),
        }


def _live_holder(lease: LeaseState | None, now: datetime) -> tuple[str | None, int | None]:
    """Who holds an unexpired lease, and its epoch; ``(None, None)`` when nobody does."""
    if lease is None or lease.holder is None or lease.expires_at < now:
        return None, None
    return lease.holder, lease.epoch


class ClusterView:
    """Reads the lease and the heartbeats for ``/healthz`` and the replica listing."""

    def __init__(
        self, store: Store, leadership: Leadership, supervision: SupervisionHealth, clock: Now
    ) -> None:
        self.store = store
        self.leadership = leadership
        self.supervision = supervision
        self.clock = clock

    def schema_revisions(self) -> tuple[str | None, str | None]:
        """``(database, code)``: the database's schema revision and the newest shipped."""
        from watchkeeper.watch.schema import schema_revisions

        return schema_revisions(self.store)

    def health(self) -> ClusterHealth:
        """Whether this replica leads, whether anyone does, and whether that is healthy.

        Unhealthy: the database does not answer; no replica has held the lease
        for longer than a lease (a failover takes less); or this replica leads
        and its own sweeps fail.
        """
        now = self.clock()
        leadership = self.leadership
        try:
            lease = self.store.cluster.lease()
        except StoreError as exc:
            return ClusterHealth(
                leadership.replica,
                leadership.is_leader,
                leadership.epoch,
                None,
                False,
                None,
                f"cannot read the leader lease: {exc}; check that this replica reaches "
                "the database",
            )
        holder, epoch = _live_holder(lease, now)
        leads = leadership.is_leader and holder == leadership.replica
        expires_at = None if lease is None else lease.expires_at
        problem = None
        if holder is None and lease is not None and now - lease.expires_at > leadership.ttl:
            # With no lease row at all no replica has ticked yet: nothing to judge.
            problem = (
                f"no replica has held the leader lease since {rfc3339(lease.expires_at)}: "
                "nothing sweeps or routes notices; start a replica, or check that the "
                "replicas reach the database"
            )
        elif leads and not self.supervision.working:
            problem = (
                f"this replica leads and its sweeps fail: {self.supervision.last_error}; "
                "see its log"
            )
        return ClusterHealth(
            leadership.replica, leads, epoch, holder, holder is not None, expires_at, problem
        )

    def replicas(self) -> dict[str, Any]:
        """Every replica with a heartbeat row, whether it is alive and whether it leads."""
        now = self.clock()
        members = self.store.cluster.members()
        holder, epoch = _live_holder(self.store.cluster.lease(), now)
        return {
            "at": rfc3339(now),
            "answered_by": self.leadership.replica,
            "leader": holder,
            "epoch": epoch,
            "replicas": [self._member(member, holder, now) for member in members],
        }

    def _member(self, member: Member, holder: str | None, now: datetime) -> dict[str, Any]:
        age = now - member.beat_at
        return {
            "name": member.replica,
            "host": member.host,
            "pid": member.pid,
            "version": member.version,
            "started_at": rfc3339(member.started_at),
            "beat_at": rfc3339(member.beat_at),
            "beat_age_s": round(age.total_seconds(), 3),
            "alive": age <= self.leadership.live_within,
            "leader": member.replica == holder,
        }
