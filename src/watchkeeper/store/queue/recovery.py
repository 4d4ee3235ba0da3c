"""Taking back leases whose runner is gone: lapsed, or given up when the runner said goodbye."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Connection, func, select, update

from watchkeeper.clock import to_epoch
from watchkeeper.records.queue import OUT_OF_ATTEMPTS, Recovery, TaskStatus
from watchkeeper.store.queue.base import Part
from watchkeeper.store.queue.ledger import add_spend, log_events
from watchkeeper.store.queue.rows import RUNNING, T, requeue_values
from watchkeeper.store.schema.queue import queue_tasks

_COLUMNS = (
    T.id,
    T.job_id,
    T.org,
    T.rerunnable,
    T.attempt,
    T.max_attempts,
    T.leased_at,
    T.last_renewed_at,
    T.lease_s,
)
# Every move below is guarded by it: a task another move ended meanwhile stays as it is.
_STILL_RUNNING = T.status == RUNNING
_LAPSED = "lease lapsed"


@dataclass(frozen=True)
class _Outcomes:
    """The taken-back tasks sorted by where each goes next."""

    stuck: list[Any]  # not re-runnable: its effects are unknown, so a person decides
    spent: list[Any]  # re-runnable but out of attempts: it fails
    again: list[Any]  # re-runnable with attempts left: back to the queue

    @classmethod
    def of(cls, rows: Sequence[Any]) -> _Outcomes:
        rerunnable = [row for row in rows if row.rerunnable]
        return cls(
            stuck=[row for row in rows if not row.rerunnable],
            spent=[row for row in rerunnable if row.attempt >= row.max_attempts],
            again=[row for row in rerunnable if row.attempt < row.max_attempts],
        )


class Recoveries(Part):
    """Takes back leases nobody holds any more."""

    def recover(self, now: datetime, *, runner_id: str | None = None) -> Recovery:
        """Take back lapsed leases (or every lease of ``runner_id``, which said goodbye).

        A re-runnable task goes back to the queue as a new attempt, until its
        attempts run out (then it fails as ``out_of_attempts``); a task that is
        not re-runnable (its effects are unknown) becomes stuck for a person.
        """
        at = to_epoch(now)
        statement = select(*_COLUMNS).where(_STILL_RUNNING, _lapsed(at, runner_id))
        if not self._sqlite:
            statement = statement.with_for_update(skip_locked=True)
        with self._write("recovering lapsed leases") as conn:
            rows = conn.execute(statement).all()
            if not rows:
                return Recovery()
            return self._take_back(conn, rows, at, now)

    def _take_back(
        self, conn: Connection, rows: Sequence[Any], at: float, now: datetime
    ) -> Recovery:
        outcomes = _Outcomes.of(rows)
        self._charge(conn, rows, at, now)
        _mark_stuck(conn, outcomes.stuck, at)
        _fail_spent(conn, outcomes.spent, at)
        _requeue(conn, outcomes.again, at)
        _log(conn, outcomes, at)
        return Recovery(
            tuple(row.id for row in outcomes.again),
            tuple(row.id for row in outcomes.stuck),
            tuple(row.id for row in outcomes.spent),
        )

    def _charge(self, conn: Connection, rows: Sequence[Any], at: float, now: datetime) -> None:
        # A lapsed lease is charged until it lapsed, not until it was noticed.
        for row in rows:
            ended = min(at, (row.last_renewed_at or row.leased_at) + row.lease_s)
            add_spend(conn, self._sqlite, row.org, now, ended - row.leased_at)


def lease_lapsed(at: float) -> ColumnElement[bool]:
    """A task's lease ran out by ``at`` (epoch seconds): neither leased nor renewed within it."""
    return func.coalesce(T.last_renewed_at, T.leased_at) + T.lease_s <= at


def _lapsed(at: float, runner_id: str | None) -> ColumnElement[bool]:
    if runner_id is not None:
        return T.runner_id == runner_id
    return lease_lapsed(at)


def _mark_stuck(conn: Connection, rows: Sequence[Any], at: float) -> None:
    if not rows:
        return
    conn.execute(
        update(queue_tasks)
        .where(T.id.in_([row.id for row in rows]), _STILL_RUNNING)
        .values(
            status=TaskStatus.STUCK.value,
            lease_token=None,
            updated_at=at,
            version=T.version + 1,
        )
    )


def _fail_spent(conn: Connection, rows: Sequence[Any], at: float) -> None:
    for row in rows:
        conn.execute(
            update(queue_tasks)
            .where(T.id == row.id, _STILL_RUNNING)
            .values(
                status=TaskStatus.FAILED.value,
                lease_token=None,
                finished_at=at,
                updated_at=at,
                failure_reason=f"its lease lapsed on attempt {row.attempt} of "
                f"{row.max_attempts}: out of attempts",
                failure_fingerprint=OUT_OF_ATTEMPTS,
                version=T.version + 1,
            )
        )


def _requeue(conn: Connection, rows: Sequence[Any], at: float) -> None:
    if rows:
        conn.execute(
            update(queue_tasks)
            .where(T.id.in_([row.id for row in rows]), _STILL_RUNNING)
            .values(requeue_values(at))
        )


def _log(conn: Connection, outcomes: _Outcomes, at: float) -> None:
    for rows, kind in (
        (outcomes.stuck, "stuck"),
        (outcomes.spent, OUT_OF_ATTEMPTS),
        (outcomes.again, "requeued"),
    ):
        log_events(conn, [(row.id, row.job_id) for row in rows], at, kind, _LAPSED)
