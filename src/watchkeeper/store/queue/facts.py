"""The read-only facts the lease and blocked-reason rules judge by."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime

from sqlalchemy import Connection, func, literal, select, text

from watchkeeper.clock import to_epoch
from watchkeeper.records.queue import OrgLoad, QueuedTask, Snapshot
from watchkeeper.store.queue.base import Part
from watchkeeper.store.queue.provisions import read_provisions
from watchkeeper.store.queue.rows import QUEUED, RUNNING, T, month_of
from watchkeeper.store.queue.runners import read_runners
from watchkeeper.store.schema.queue import queue_spend


class Facts(Part):
    """Runners, org loads, provisions and queued tasks, as the rules see them."""

    def snapshot(self, now: datetime, orgs: Collection[str]) -> Snapshot:
        """Runners, the loads of ``orgs`` and the provisions, read in one transaction."""
        with self._read("reading the queue's facts") as conn:
            runners = tuple(read_runners(conn, include_stopped=False))
            loads = org_loads(conn, sorted(orgs), now, lock=False) if orgs else {}
            provisions = {(p.org, p.fleet): p for p in read_provisions(conn)}
        return Snapshot(now, runners, loads, provisions)

    def queued(
        self, *, job_ids: Collection[str] | None = None, task_ids: Collection[str] | None = None
    ) -> list[QueuedTask]:
        """Queued tasks (all, or of some jobs or ids), with whether their job already runs.

        One set-based query, however many tasks are queued.
        """
        running = select(T.job_id.label("job_id")).where(T.status == RUNNING).distinct()
        busy = running.subquery("busy")
        statement = (
            select(T.id, T.job_id, T.org, T.fleet, busy.c.job_id)
            .outerjoin(busy, busy.c.job_id == T.job_id)
            .where(T.status == QUEUED)
            .order_by(T.queued_at, T.id)
        )
        if job_ids is not None:
            statement = statement.where(T.job_id.in_(list(job_ids)))
        if task_ids is not None:
            statement = statement.where(T.id.in_(list(task_ids)))
        with self._read("reading queued tasks") as conn:
            return [
                QueuedTask(row[0], row[1], row[2], row[3], row[4] is not None)
                for row in conn.execute(statement)
            ]

    def oldest_queued_for(self, fleet: str, org: str | None) -> QueuedTask | None:
        """The oldest queued task a runner of ``fleet`` (tied to ``org``, unless ``None``)
        serves, as the rules see it; ``None`` when there is none."""
        statement = select(T.id).where(T.status == QUEUED, T.fleet == fleet)
        if org is not None:
            statement = statement.where(T.org == org)
        with self._read("reading the oldest queued task") as conn:
            task_id = conn.execute(statement.order_by(T.queued_at, T.id).limit(1)).scalar()
        found = [] if task_id is None else self.queued(task_ids=[task_id])
        return found[0] if found else None

    def queued_fleets(self, most: int = 5) -> list[str]:
        """Up to ``most`` fleets that have queued tasks, by name."""
        statement = select(T.fleet).where(T.status == QUEUED).distinct().order_by(T.fleet)
        with self._read("reading queued fleets") as conn:
            return list(conn.execute(statement.limit(most)).scalars())

    def queued_orgs(self) -> list[str]:
        """Orgs that have queued tasks."""
        statement = select(T.org).where(T.status == QUEUED).distinct()
        with self._read("reading queued orgs") as conn:
            return list(conn.execute(statement).scalars())


def org_loads(
    conn: Connection, orgs: Sequence[str], now: datetime, *, lock: bool
) -> dict[str, OrgLoad]:
    """Each org's running jobs and agent-minutes this month, the running ones included.

    With ``lock`` on PostgreSQL, each org is locked for the rest of the
    transaction, so two leases never both take an org's last slot.
    """
    at = to_epoch(now)
    if lock and conn.dialect.name != "sqlite":
        for org in orgs:  # sorted by the caller: two leases never wait on each other in turn
            conn.execute(
                text("SELECT pg_advisory_xact_lock(hashtext(:org))"), {"org": f"wk-org:{org}"}
            )
    running = conn.execute(
        select(
            T.org,
            func.count(T.job_id.distinct()),
            func.coalesce(func.sum(literal(at) - T.leased_at), 0.0),
        )
        .where(T.status == RUNNING, T.org.in_(list(orgs)))
        .group_by(T.org)
    ).all()
    spent = dict(
        conn.execute(
            select(queue_spend.c.org, func.sum(queue_spend.c.agent_seconds))
            .where(queue_spend.c.month == month_of(now), queue_spend.c.org.in_(list(orgs)))
            .group_by(queue_spend.c.org)  # an org's month is spread over slots
        ).all()
    )
    loads = {org: OrgLoad(org, 0, float(spent.get(org, 0.0)) / 60.0) for org in orgs}
    for org, jobs, seconds in running:
        loads[org] = OrgLoad(org, int(jobs), (float(spent.get(org, 0.0)) + seconds) / 60.0)
    return loads
