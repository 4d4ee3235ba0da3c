"""Leases: take queued tasks for a runner, renew them, and end them with an outcome.

Leasing is one write transaction: candidates are read with ``SELECT ... FOR
UPDATE SKIP LOCKED`` on PostgreSQL (inside ``BEGIN IMMEDIATE`` on SQLite, which
holds the write lock), the lease rule passed in by the caller admits them, and
each admitted task is claimed with ``UPDATE ... WHERE status = 'queued'
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
from watchkeeper.store.queue.facts import org_loads
from watchkeeper.store.queue.ledger import add_spend, log_events
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
    RUNNER_WITH_LOAD,
    candidates_statement,
    claim_statement,
    end_statement,
)
from watchkeeper.store.schema_queue import queue_tasks
from watchkeeper.store.tokens import mint_task_tokens, revoke_task_tokens

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
        window: int = 64,
    ) -> list[Lease]:
        """Lease up to ``limit`` queued tasks of the runner's fleet that ``admit`` allows.

        Candidates are the oldest ``window`` queued tasks (locked rows skipped);
        the org loads ``admit`` reads are counted in the same transaction, and
        on PostgreSQL an org with caps is locked for its duration, so two
        runners never both take the last slot of an org.
        """
        at = to_epoch(now)
        with self._write("leasing tasks") as conn:
            runner = _serving_runner(conn, runner_id)
            candidates = self._candidates(conn, runner, max(window, limit))
            if not candidates:
                return []
            chosen = _admit(conn, runner, candidates, limit, admit, load_needed, now)
            leases = self._claim(conn, runner_id, chosen, at) if chosen else []
            log_events(conn, [(x.task.id, x.task.job_id) for x in leases], at, "leased", runner_id)
        return leases

    def _candidates(self, conn: Connection, runner: Runner, window: int) -> Sequence[Any]:
        statement = candidates_statement(runner.org is not None, self._sqlite)
        params = {"p_fleet": runner.fleet, "p_org": runner.org, "p_window": window}
        return conn.execute(statement, params).all()

    def _claim(
        self, conn: Connection, runner_id: str, task_ids: list[str], at: float
    ) -> list[Lease]:
        rows = conn.execute(
            claim_statement(self._sqlite),
            {"p_ids": task_ids, "p_runner": runner_id, "p_at": at},
        ).all()
        order = {task_id: index for index, task_id in enumerate(task_ids)}
        minted = mint_task_tokens(conn, [(row.id, row.job_id) for row in rows], at)
        leases = [Lease(task_from_row(row), row.lease_token, minted[row.id]) for row in rows]
        return sorted(leases, key=lambda lease: order[lease.task.id])

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
                revoke_task_tokens(conn, [row.id])
        return task_from_row(row)


def _serving_runner(conn: Connection, runner_id: str) -> Runner:
    missing = f"no runner {runner_id!r}: register first"
    row = found(conn, RUNNER_WITH_LOAD, missing, {"p_runner": runner_id})
    if row.stopped_at is not None:
        raise Conflict(f"runner {runner_id} has stopped: register again to serve")
    return runner_from_row(row, int(row.running))


def _admit(
    conn: Connection,
    runner: Runner,
    candidates: Sequence[Any],
    limit: int,
    admit: Admit,
    load_needed: Callable[[str], bool],
    now: datetime,
) -> list[str]:
    capped = sorted({row.org for row in candidates if load_needed(row.org)})
    loads = org_loads(conn, capped, now, lock=True) if capped else {}
    running_jobs = _running_jobs(conn, candidates) if capped else set()
    chosen: list[str] = []
    for row in candidates:
        if len(chosen) >= limit:
            break
        task = QueuedTask(row.id, row.job_id, row.org, row.fleet, row.job_id in running_jobs)
        load = loads.get(row.org) or OrgLoad(row.org)
        if not admit(task, runner, load):
            continue
        chosen.append(row.id)
        # Count what this lease adds, so the next candidate is judged against it.
        runner = dataclasses.replace(runner, running=runner.running + 1)
        if not task.job_running:
            running_jobs.add(row.job_id)
            loads[row.org] = dataclasses.replace(load, running_jobs=load.running_jobs + 1)
    return chosen


def _running_jobs(conn: Connection, candidates: Sequence[Any]) -> set[str]:
    jobs = list({row.job_id for row in candidates})
    statement = select(T.job_id).where(T.job_id.in_(jobs), T.status == RUNNING).distinct()
    return set(conn.execute(statement).scalars())
