"""Choosing the tasks one lease takes: the fleet's queued tasks read oldest first, page
after page, each judged by the lease rule against its org's load, and on PostgreSQL each
admitted row locked alone (``FOR UPDATE SKIP LOCKED``) so leases running together share
the queue out. See :mod:`watchkeeper.store.queue.leases` for the lease around it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, select

from watchkeeper.records.queue import OrgLoad, QueuedTask, Runner
from watchkeeper.store.queue.facts import org_loads
from watchkeeper.store.queue.rows import RUNNING, T
from watchkeeper.store.queue.statements import (
    LOCK_QUEUED,
    LOCK_QUEUED_MANY,
    candidates_statement,
    locked_candidates_statement,
    queued_orgs_statement,
)

#: Admits a queued task for a runner given the org's load; the lease rule of ``queue/rules.py``.
Admit = Callable[[QueuedTask, Runner, OrgLoad], bool]


class Picker:
    """Walks the queue for one lease, counting what each admitted task adds."""

    def __init__(
        self, conn: Connection, runner: Runner, admit: Admit, now: datetime, *, lock_rows: bool
    ) -> None:
        self.conn = conn
        self.runner = runner
        self.admit = admit
        self.now = now
        self.lock_rows = lock_rows
        self.loads: dict[str, OrgLoad] = {}
        self.running_jobs: set[str] = set()
        self.chosen: list[str] = []

    def pick(
        self, limit: int, load_needed: Callable[[str], bool], page: int, *, caps_possible: bool
    ) -> list[str]:
        """The ids of up to ``limit`` tasks to claim, oldest first."""
        scope = {"p_fleet": self.runner.fleet, "p_org": self.runner.org}
        tied = self.runner.org is not None
        # Every queued task of the fleet is read for its org: a cost only caps need.
        orgs: Any = []
        if caps_possible:
            orgs = self.conn.execute(queued_orgs_statement(tied), scope).scalars()
        # All capped orgs are locked up front, in one sorted pass: locking them as
        # pages reveal them could have two leases wait on each other.
        capped = sorted(org for org in orgs if load_needed(org))
        self.loads = org_loads(self.conn, capped, self.now, lock=True) if capped else {}
        after: dict[str, Any] = {}
        if not capped and self.lock_rows and self._wants(limit):
            asked = self._want(limit)
            rows = self._take_locked(scope, tied, asked, limit, load_needed)
            if len(rows) < asked or not self._wants(limit):
                return self.chosen  # all taken, or no row left that no other lease holds
            after = {"p_after_at": rows[-1].queued_at, "p_after_id": rows[-1].id}
        while self._wants(limit):
            params = {**scope, "p_page": page, **after}
            rows = self.conn.execute(candidates_statement(tied, bool(after)), params).all()
            self._judge(rows, limit, capped_orgs=set(capped), load_needed=load_needed)
            if len(rows) < page:
                break
            after = {"p_after_at": rows[-1].queued_at, "p_after_id": rows[-1].id}
        return self.chosen

    def _take_locked(
        self,
        scope: dict[str, Any],
        tied: bool,
        asked: int,
        limit: int,
        load_needed: Callable[[str], bool],
    ) -> Sequence[Any]:
        """PostgreSQL, no capped org in play: read and lock the oldest rows no other lease
        holds, as many as the lease wants, and take those the rules admit (their order
        is the queue's, so the lease still takes the oldest admitted)."""
        params = {**scope, "p_page": asked}
        rows = self.conn.execute(locked_candidates_statement(tied), params).all()
        for row in rows:
            if not self._wants(limit) or load_needed(row.org):
                continue  # capped: queued after the caps were read; the next lease judges it
            task = QueuedTask(row.id, row.job_id, row.org, row.fleet, False)
            if self.admit(task, self.runner, OrgLoad(row.org)):
                self.chosen.append(row.id)
                self.runner = dataclasses.replace(self.runner, running=self.runner.running + 1)
        return rows

    def _want(self, limit: int) -> int:
        return min(limit - len(self.chosen), self.runner.capacity - self.runner.running)

    def _wants(self, limit: int) -> bool:
        # A full runner is refused every task by the rule: reading on would be waste.
        return len(self.chosen) < limit and self.runner.running < self.runner.capacity

    def _judge(
        self,
        rows: Sequence[Any],
        limit: int,
        *,
        capped_orgs: set[str],
        load_needed: Callable[[str], bool],
    ) -> None:
        if not capped_orgs and self.lock_rows:
            self._take_uncapped(rows, limit, load_needed)
            return
        if capped_orgs:
            self.running_jobs |= _running_jobs(self.conn, [r for r in rows if r.org in capped_orgs])
        for row in rows:
            if not self._wants(limit):
                return
            if row.org not in capped_orgs and load_needed(row.org):
                continue  # queued after the caps were locked: the next lease judges it
            task = QueuedTask(
                row.id, row.job_id, row.org, row.fleet, row.job_id in self.running_jobs
            )
            load = self.loads.get(row.org) or OrgLoad(row.org)
            if not self.admit(task, self.runner, load) or not self._lock(row.id):
                continue
            self.chosen.append(row.id)
            # Count what this lease adds, so the next candidate is judged against it.
            self.runner = dataclasses.replace(self.runner, running=self.runner.running + 1)
            if not task.job_running:
                self.running_jobs.add(row.job_id)
                self.loads[row.org] = dataclasses.replace(load, running_jobs=load.running_jobs + 1)

    def _take_uncapped(
        self, rows: Sequence[Any], limit: int, load_needed: Callable[[str], bool]
    ) -> None:
        """PostgreSQL, no capped org in play: what one admits depends on the others only
        through the runner's count, so the oldest admitted rows no other lease holds
        are locked together, in one statement for the page."""
        needed = {org: load_needed(org) for org in {row.org for row in rows}}
        admitted = [
            row.id
            for row in rows
            if not needed[row.org]
            and self.admit(
                QueuedTask(row.id, row.job_id, row.org, row.fleet, False),
                self.runner,
                OrgLoad(row.org),
            )
        ]
        want = min(limit - len(self.chosen), self.runner.capacity - self.runner.running)
        if not admitted or want <= 0:
            return
        params = {"p_ids": admitted, "p_want": want}
        taken = list(self.conn.execute(LOCK_QUEUED_MANY, params).scalars())
        self.chosen += taken
        self.runner = dataclasses.replace(self.runner, running=self.runner.running + len(taken))

    def _lock(self, task_id: str) -> bool:
        if not self.lock_rows:
            return True  # SQLite: the write transaction already keeps other leases out
        return self.conn.execute(LOCK_QUEUED, {"p_id": task_id}).first() is not None


def _running_jobs(conn: Connection, candidates: Sequence[Any]) -> set[str]:
    jobs = list({row.job_id for row in candidates})
    if not jobs:
        return set()
    statement = select(T.job_id).where(T.job_id.in_(jobs), T.status == RUNNING).distinct()
    return set(conn.execute(statement).scalars())
