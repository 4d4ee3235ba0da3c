"""Job control: cancel, retry and delete, of a whole job or of chosen tasks."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Connection, Row, delete, select, update

from watchkeeper.clock import to_epoch
from watchkeeper.errors import Conflict
from watchkeeper.records.queue import CANCELLABLE, RETRYABLE, TaskStatus
from watchkeeper.store.queue.base import Part
from watchkeeper.store.queue.ledger import add_spend, log_events
from watchkeeper.store.queue.rows import RUNNING, J, T, found, requeue_values
from watchkeeper.store.schema.queue import (
    queue_events,
    queue_jobs,
    queue_task_output,
    queue_task_shipped,
    queue_task_shipped_pieces,
    queue_tasks,
)

_CANCELLABLE = [status.value for status in CANCELLABLE]
_RETRYABLE = [status.value for status in RETRYABLE]


class Control(Part):
    """Moves a person asks for; each is one transaction over the rows it locks."""

    def cancel(
        self, now: datetime, *, job_id: str | None = None, task_ids: Collection[str] = ()
    ) -> list[str]:
        """Cancel the unfinished tasks of a job (or the given tasks); returns their ids.

        A running task's lease is revoked with it: its runner's next renewal fails.
        """
        at = to_epoch(now)
        cancelled = {
            "status": TaskStatus.CANCELLED.value,
            "lease_token": None,
            "finished_at": at,
            "updated_at": at,
            "version": T.version + 1,
        }
        with self._write("cancelling") as conn:
            scope = _scope(conn, job_id, task_ids)
            rows = self._move(conn, scope, _CANCELLABLE, cancelled, "cancelled", at)
            running = [row for row in rows if row.status == RUNNING]
            for row in running:
                if row.leased_at is not None:
                    add_spend(conn, self._sqlite, row.org, now, at - row.leased_at)
        return [row.id for row in rows]

    def retry(
        self, now: datetime, *, job_id: str | None = None, task_ids: Collection[str] = ()
    ) -> list[str]:
        """Queue failed, cancelled and stuck tasks again, with fresh attempts; returns their ids."""
        at = to_epoch(now)
        requeued = requeue_values(at) | {"attempt": 0, "queued_at": at}
        with self._write("retrying") as conn:
            scope = _scope(conn, job_id, task_ids)
            rows = self._move(conn, scope, _RETRYABLE, requeued, "retried", at)
        return [row.id for row in rows]

    def _move(
        self,
        conn: Connection,
        scope: ColumnElement[bool],
        statuses: list[str],
        values: dict[str, Any],
        event: str,
        at: float,
    ) -> Sequence[Row[Any]]:
        """Lock the tasks in ``scope`` that are in ``statuses``, move them and log ``event``."""
        found = select(T.id, T.job_id, T.org, T.status, T.leased_at)
        rows = self._locked(conn, found.where(scope, T.status.in_(statuses)))
        if rows:
            ids = [row.id for row in rows]
            moved = update(queue_tasks).where(T.id.in_(ids), T.status.in_(statuses))
            conn.execute(moved.values(values))
            log_events(conn, [(row.id, row.job_id) for row in rows], at, event, None)
        return rows

    def delete(self, job_id: str) -> int:
        """Delete a job whose tasks are not running; returns how many tasks went with it."""
        with self._write("deleting a job") as conn:
            _scope(conn, job_id, ())
            rows = self._locked(conn, select(T.id, T.status).where(T.job_id == job_id))
            running = [row.id for row in rows if row.status == RUNNING]
            if running:
                raise Conflict(
                    f"job {job_id} has {len(running)} running task(s): cancel it first "
                    f"(`watchkeeper cancel {job_id}`)"
                )
            # SQLite enforces the cascade only with foreign keys on; delete children explicitly.
            conn.execute(delete(queue_events).where(queue_events.c.job_id == job_id))
            ids = select(T.id).where(T.job_id == job_id).scalar_subquery()
            for output in (queue_task_output, queue_task_shipped, queue_task_shipped_pieces):
                conn.execute(delete(output).where(output.c.task_id.in_(ids)))
            conn.execute(delete(queue_tasks).where(T.job_id == job_id))
            conn.execute(delete(queue_jobs).where(J.id == job_id))
        return len(rows)

    def _locked(self, conn: Connection, statement: Any) -> Sequence[Row[Any]]:
        if not self._sqlite:
            statement = statement.with_for_update()
        return conn.execute(statement).all()


def _scope(conn: Connection, job_id: str | None, task_ids: Collection[str]) -> ColumnElement[bool]:
    if job_id is None:
        return T.id.in_(list(task_ids))
    found(conn, select(J.id).where(J.id == job_id), f"no job {job_id!r}: see `watchkeeper jobs`")
    return T.job_id == job_id
