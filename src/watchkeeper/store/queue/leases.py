"""Leases: take queued tasks for a runner, renew them, and end them with an outcome.

Leasing is one write transaction (``BEGIN IMMEDIATE`` on SQLite, which holds
the write lock). The fleet's queued tasks are read oldest first, page after
page, until the runner has what it asked for or the queue is exhausted: no
fixed window, so a backlog the caps block never hides a task behind it, and
the lease takes exactly the tasks the blocked reasons call leasable. The lease
rule passed in by the caller judges each; on PostgreSQL an admitted task's row
is then locked alone with ``FOR UPDATE SKIP LOCKED``, so a lease holds only
the rows it takes and runners leasing together share the queue out. When no
capped org is in play the first read locks as it reads, as many rows as the
lease wants (one round trip when the rule admits them all; a refused one stays
locked, passed over by other leases, until this one commits). The
chosen tasks are claimed with ``UPDATE ... WHERE status = 'queued'
RETURNING``. Every later move of a leased task is ``UPDATE ... WHERE id = ? AND
lease_token = ?`` and the lease still live: zero rows means the lease is gone.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, select, update

from watchkeeper.clock import to_epoch
from watchkeeper.errors import Conflict
from watchkeeper.records.queue import Lease, OrgLoad, QueuedTask, Runner, Task, TaskStatus
from watchkeeper.store.queue.base import Part
from watchkeeper.store.queue.ends import End, end_within
from watchkeeper.store.queue.facts import org_loads
from watchkeeper.store.queue.ledger import add_spend, log_events
from watchkeeper.store.queue.markers import INTERRUPTED
from watchkeeper.store.queue.onepass import RuleRefused, pass_in_one
from watchkeeper.store.queue.rows import (
    RUNNING,
    T,
    found,
    held,
    month_of,
    runner_from_row,
    task_from_row,
)
from watchkeeper.store.queue.statements import (
    LOCK_QUEUED,
    LOCK_QUEUED_MANY,
    RUNNER_WITH_LOAD,
    candidates_statement,
    claim_statement,
    end_statement,
    locked_candidates_statement,
    queued_orgs_statement,
)
from watchkeeper.store.schema_queue import queue_tasks
from watchkeeper.store.tokens import task_token

#: Admits a queued task for a runner given the org's load; the lease rule of ``queue/rules.py``.
Admit = Callable[[QueuedTask, Runner, OrgLoad], bool]


class Leases(Part):
    """A runner's side of the queue: lease, renew, complete, fail."""

    def lease(
        self,
        runner_id: str,
        now: datetime,
        *,
        limit: int,
        admit: Admit,
        load_needed: Callable[[str], bool],
        page: int = 256,
        caps_possible: bool = True,
    ) -> list[Lease]:
        """Lease up to ``limit`` queued tasks of the runner's fleet that ``admit`` allows.

        Every queued task of the fleet is a candidate, read ``page`` at a time,
        oldest first; rows other leases hold are passed over. The loads
        ``admit`` reads are counted in the same transaction, after every capped
        org with queued tasks is locked (on PostgreSQL), so two runners never
        both take the last slot of an org.
        """
        return self.lease_marked(
            runner_id, now, limit=limit, admit=admit, load_needed=load_needed, page=page,
            caps_possible=caps_possible,
        )[0]  # fmt: skip

    def lease_marked(
        self,
        runner_id: str,
        now: datetime,
        *,
        limit: int,
        admit: Admit,
        load_needed: Callable[[str], bool],
        page: int = 256,
        caps_possible: bool = True,
    ) -> tuple[list[Lease], set[str]]:
        """:meth:`lease`, and the ids of the leased tasks a restart had marked
        interrupted (read from the claimed rows: no second read for the usual none).

        ``caps_possible=False`` (no org has a cap) spares reading the queued orgs.
        """
        with self._write("leasing tasks") as conn:
            return self._lease_within(
                conn, runner_id, now, limit, admit, load_needed, page, caps_possible
            )

    def end_and_lease(
        self,
        ends: Sequence[End],
        runner_id: str,
        now: datetime,
        *,
        limit: int,
        admit: Admit,
        load_needed: Callable[[str], bool],
        page: int = 256,
        caps_possible: bool = True,
    ) -> tuple[list[Task | None], list[Lease], set[str]]:
        """Record ``ends`` (as :meth:`Ends.end_many`), then :meth:`lease_marked` up to
        ``limit`` tasks (none for 0), in one transaction: one commit for a runner's
        pass. The lease counts the slots the outcomes freed. All commit or none: when
        the lease is refused (the runner is unknown or stopped) no outcome is recorded.
        """
        action = f"recording {len(ends)} task outcome(s) and leasing" if ends else "leasing tasks"
        if limit > 0 and not self._sqlite and not caps_possible:
            try:
                with self._write(action) as conn:
                    return pass_in_one(
                        conn, ends, runner_id, now, limit=limit, admit=admit,
                        load_needed=load_needed, marked=_marked,
                    )  # fmt: skip
            except RuleRefused:
                pass  # rolled back: the general path below judges task by task
        with self._write(action) as conn:
            ended = end_within(conn, self._sqlite, ends, now)
            if limit <= 0:
                return ended, [], set()
            # Read after the outcomes, so the runner's count no longer holds the ended tasks.
            leases, marked = self._lease_within(
                conn, runner_id, now, limit, admit, load_needed, page, caps_possible
            )
            return ended, leases, marked

    def _lease_within(
        self,
        conn: Connection,
        runner_id: str,
        now: datetime,
        limit: int,
        admit: Admit,
        load_needed: Callable[[str], bool],
        page: int,
        caps_possible: bool,
    ) -> tuple[list[Lease], set[str]]:
        runner = _serving_runner(conn, runner_id)
        return self._pick_and_claim(
            conn, runner, now, limit, admit, load_needed, page, caps_possible
        )

    def _pick_and_claim(
        self,
        conn: Connection,
        runner: Runner,
        now: datetime,
        limit: int,
        admit: Admit,
        load_needed: Callable[[str], bool],
        page: int,
        caps_possible: bool,
    ) -> tuple[list[Lease], set[str]]:
        picker = _Picker(conn, runner, admit, now, lock_rows=not self._sqlite)
        chosen = picker.pick(limit, load_needed, page, caps_possible=caps_possible)
        return self._claim(conn, runner.id, chosen, to_epoch(now)) if chosen else ([], set())

    def _claim(
        self, conn: Connection, runner_id: str, task_ids: list[str], at: float
    ) -> tuple[list[Lease], set[str]]:
        params: dict[str, Any] = {"p_ids": task_ids, "p_runner": runner_id, "p_at": at}
        order = {task_id: index for index, task_id in enumerate(task_ids)}
        rows = conn.execute(claim_statement(self._sqlite), params).all()
        if self._sqlite:  # PostgreSQL's claim writes the timeline entries itself
            log_events(conn, [(row.id, row.job_id) for row in rows], at, "leased", runner_id)
        leases = [
            Lease(task_from_row(row), row.lease_token, task_token(row.id, row.lease_token))
            for row in rows
        ]
        marked = {row.id for row in rows if _marked(row._mapping["metadata"])}
        return sorted(leases, key=lambda lease: order[lease.task.id]), marked

    def renew(
        self,
        task_id: str,
        token: str,
        now: datetime,
        *,
        progressed: bool = False,
        step: str | None = None,
    ) -> Task | None:
        """Renew a live lease (and record progress); ``None`` when the lease is gone."""
        at = to_epoch(now)
        values: dict[str, Any] = {"last_renewed_at": at, "updated_at": at}
        if progressed or step is not None:
            values.update(progress_at=at, version=T.version + 1)
        if step is not None:
            values["step"] = step[:2000]
        with self._write("renewing a lease") as conn:
            row = conn.execute(
                update(queue_tasks)
                .where(held(task_id, token, at))
                .values(**values)
                .returning(*queue_tasks.c)
            ).first()
        return None if row is None else task_from_row(row)

    def complete(
        self, task_id: str, token: str, now: datetime, *, exit_code: int | None = 0
    ) -> Task | None:
        """The task succeeded; ``None`` when the lease is gone (the outcome is not recorded)."""
        return self._end(task_id, token, now, TaskStatus.SUCCEEDED, exit_code, None, None)

    def fail(
        self,
        task_id: str,
        token: str,
        now: datetime,
        *,
        reason: str,
        fingerprint: str,
        exit_code: int | None = None,
    ) -> Task | None:
        """The task failed; ``None`` when the lease is gone."""
        return self._end(task_id, token, now, TaskStatus.FAILED, exit_code, reason, fingerprint)

    def _end(
        self,
        task_id: str,
        token: str,
        now: datetime,
        status: TaskStatus,
        exit_code: int | None,
        reason: str | None,
        fingerprint: str | None,
    ) -> Task | None:
        at = to_epoch(now)
        params = {
            "p_id": task_id,
            "p_token": token,
            "p_at": at,
            "p_exit": exit_code,
            "p_reason": None if reason is None else reason[:2000],
            "p_fingerprint": fingerprint,
            "p_month": month_of(now),
        }
        statement = end_statement(status.value, self._sqlite)
        with self._write(f"recording a task {status.value}") as conn:
            row = conn.execute(statement, params).first()
            if row is None:
                return None
            if self._sqlite:  # PostgreSQL did these in the same statement
                add_spend(conn, self._sqlite, row.org, now, at - row.leased_at)
                log_events(conn, [(row.id, row.job_id)], at, status.value, reason)
        return task_from_row(row)


def _marked(meta: Any) -> bool:
    return isinstance(meta, dict) and bool(meta.get(INTERRUPTED))


def _serving_runner(conn: Connection, runner_id: str) -> Runner:
    missing = f"no runner {runner_id!r}: register first"
    row = found(conn, RUNNER_WITH_LOAD, missing, {"p_runner": runner_id})
    if row.stopped_at is not None:
        raise Conflict(f"runner {runner_id} has stopped: register again to serve")
    return runner_from_row(row, int(row.running))


class _Picker:
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
