"""The leader lease and the replica heartbeats: conditional updates on one row each."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Connection, delete, insert, or_, select, update
from sqlalchemy.exc import IntegrityError

from watchkeeper.clock import to_epoch
from watchkeeper.store.base import Accessor, record_from_row, upsert
from watchkeeper.store.schema.cluster import LEADER, cluster_lease, cluster_members

L = cluster_lease.c
M = cluster_members.c


@dataclass(frozen=True, slots=True)
class LeaseState:
    """Who holds the leader lease, at which epoch, and until when."""

    holder: str | None
    epoch: int
    expires_at: datetime
    acquired_at: datetime | None


@dataclass(frozen=True, slots=True)
class Member:
    """One replica, as its latest heartbeat left it."""

    replica: str
    host: str
    pid: int
    version: str
    started_at: datetime
    beat_at: datetime


class ClusterStore(Accessor):
    """Takes, renews and gives up the leader lease; records and reads replica heartbeats."""

    def beat(self, member: Member) -> None:
        """Record that ``member`` is alive now."""
        values = {
            "host": member.host[:200],
            "pid": member.pid,
            "version": member.version[:64],
            "started_at": to_epoch(member.started_at),
            "beat_at": to_epoch(member.beat_at),
        }
        with self._write("recording a replica heartbeat") as conn:
            upsert(conn, cluster_members, {"replica": member.replica}, values)

    def leave(self, replica: str) -> None:
        """Forget ``replica`` at once (a clean shutdown): what it claimed is recoverable now."""
        with self._write("removing a replica") as conn:
            conn.execute(delete(cluster_members).where(M.replica == replica))

    def members(self) -> list[Member]:
        """Every replica that has a heartbeat row, oldest start first."""
        with self._read("reading replicas") as conn:
            rows = conn.execute(select(cluster_members).order_by(M.started_at, M.replica)).all()
        return [record_from_row(Member, row, times=("started_at", "beat_at")) for row in rows]

    def live(self, now: datetime, within: timedelta) -> set[str]:
        """Replicas whose last heartbeat is no older than ``within``."""
        statement = select(M.replica).where(M.beat_at >= to_epoch(now - within))
        with self._read("reading live replicas") as conn:
            return set(conn.execute(statement).scalars())

    def forget_gone(self, now: datetime, after: timedelta) -> int:
        """Drop heartbeat rows silent for longer than ``after``; returns how many."""
        statement = delete(cluster_members).where(M.beat_at < to_epoch(now - after))
        with self._write("forgetting gone replicas") as conn:
            return int(conn.execute(statement).rowcount or 0)

    def lease(self) -> LeaseState | None:
        """The leader lease as stored, or ``None`` before any replica took it."""
        with self._read("reading the leader lease") as conn:
            row = conn.execute(select(cluster_lease).where(L.name == LEADER)).first()
        if row is None:
            return None
        return record_from_row(LeaseState, row, times=("expires_at", "acquired_at"))

    def renew(self, replica: str, epoch: int, now: datetime, ttl: timedelta) -> bool:
        """Extend the lease ``replica`` holds at ``epoch``; False when it moved on."""
        statement = (
            update(cluster_lease)
            .where(L.name == LEADER, L.holder == replica, L.epoch == epoch)
            .values(expires_at=to_epoch(now + ttl))
        )
        with self._write("renewing the leader lease") as conn:
            return conn.execute(statement).rowcount == 1

    def take(
        self, replica: str, now: datetime, ttl: timedelta, *, force: bool = False
    ) -> int | None:
        """Take the lease when it is free or lapsed (always, with ``force``); the new epoch.

        One conditional update decides among replicas trying together: the
        epoch grows by one, so every write of the holder before is refused.
        """
        at = to_epoch(now)
        condition = [L.name == LEADER]
        if not force:
            condition.append(or_(L.holder.is_(None), L.expires_at < at))
        statement = (
            update(cluster_lease)
            .where(*condition)
            .values(
                holder=replica, epoch=L.epoch + 1, expires_at=to_epoch(now + ttl), acquired_at=at
            )
            .returning(L.epoch)
        )
        with self._write("taking the leader lease") as conn:
            self._ensure_row(conn)
            return conn.execute(statement).scalar_one_or_none()

    def release(self, replica: str, epoch: int, now: datetime) -> bool:
        """Give the lease up at once (a clean shutdown), so another replica takes it now."""
        statement = (
            update(cluster_lease)
            .where(L.name == LEADER, L.holder == replica, L.epoch == epoch)
            .values(holder=None, expires_at=to_epoch(now))
        )
        with self._write("releasing the leader lease") as conn:
            return conn.execute(statement).rowcount == 1

    def _ensure_row(self, conn: Connection) -> None:
        if conn.execute(select(L.name).where(L.name == LEADER)).first() is not None:
            return
        try:
            with conn.begin_nested():  # another replica may insert it at the same moment
                conn.execute(insert(cluster_lease).values(name=LEADER, epoch=0, expires_at=0.0))
        except IntegrityError:
            pass
