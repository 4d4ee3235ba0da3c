"""Runners: register, heartbeat, stop, and who holds what."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Row, delete, exists, func, insert, or_, select, update

from watchkeeper.clock import to_epoch
from watchkeeper.errors import Conflict
from watchkeeper.records.queue import NewRunner, Runner, Task
from watchkeeper.store.queue.base import Part
from watchkeeper.store.queue.rows import (
    RUNNING,
    R,
    T,
    columns_of,
    found,
    new_id,
    runner_from_row,
    tasks_from_rows,
)
from watchkeeper.store.schema.queue import queue_runners, queue_tasks

log = logging.getLogger(__name__)

#: A runner stopped, or silent, this long is forgotten (when a runner registers, and at
#: start-up) unless a task still names it running. Longer than any lease and offline window.
RUNNER_RETENTION = timedelta(days=7)

#: Runner ids whose unreadable row was already logged: each is told once per process,
#: not on every topology poll. Bounded, so rows that keep changing cannot grow it forever.
_told: set[str] = set()
_TOLD_MAX = 1000


class Runners(Part):
    """The runners' own rows, and the tasks they hold."""

    def register(self, new: NewRunner, now: datetime) -> Runner:
        """Record a runner; it counts as alive from this first heartbeat.

        Runners gone longer than :data:`RUNNER_RETENTION` are forgotten in the same
        transaction: new runners are what makes old rows pile up.
        """
        at = to_epoch(now)
        runner_id = new_id("r")
        with self._write("registering a runner") as conn:
            prune_runners(conn, at)
            conn.execute(
                insert(queue_runners).values(
                    id=runner_id,
                    registered_at=at,
                    heartbeat_at=at,
                    **columns_of(new, queue_runners),
                )
            )
        return self.runner(runner_id)

    def heartbeat(self, runner_id: str, now: datetime) -> Runner:
        """The runner is alive; a stopped runner must register again."""
        self._move_live("recording a heartbeat", runner_id, heartbeat_at=to_epoch(now))
        return self.runner(runner_id)

    def stop_runner(self, runner_id: str, now: datetime) -> None:
        """Mark a runner stopped (it said goodbye); its leases are recovered by the caller."""
        self._move_live("stopping a runner", runner_id, stopped_at=to_epoch(now))

    def _move_live(self, action: str, runner_id: str, **values: float) -> None:
        """Apply ``values`` to a runner that has not stopped, or explain why not."""
        statement = update(queue_runners).where(R.id == runner_id, R.stopped_at.is_(None))
        with self._write(action) as conn:
            moved = conn.execute(statement.values(**values)).rowcount
        if not moved:
            self._explain_runner(runner_id)

    def _explain_runner(self, runner_id: str) -> None:
        runner = self.runner(runner_id)
        raise Conflict(
            f"runner {runner_id} stopped at {runner.stopped_at}: register again to serve"
        )

    def runner(self, runner_id: str) -> Runner:
        """One runner with its running count, or :class:`NotFound`."""
        with self._read("reading a runner") as conn:
            missing = f"no runner {runner_id!r}: register first"
            row = found(conn, select(queue_runners).where(R.id == runner_id), missing)
            statement = select(func.count()).where(T.runner_id == runner_id, T.status == RUNNING)
            running = int(conn.execute(statement).scalar_one())
        return runner_from_row(row, running)

    def prune_runners(self, now: datetime) -> int:
        """Forget the runners gone longer than :data:`RUNNER_RETENTION`; how many."""
        with self._write("forgetting runners long gone") as conn:
            return prune_runners(conn, to_epoch(now))

    def runners(self, *, include_stopped: bool = False) -> list[Runner]:
        """Registered runners with how many tasks each runs."""
        with self._read("listing runners") as conn:
            return read_runners(conn, include_stopped)

    def running_tasks(self) -> list[Task]:
        """Every task a runner holds now."""
        statement = select(queue_tasks).where(T.status == RUNNING).order_by(T.leased_at)
        with self._read("reading running tasks") as conn:
            return tasks_from_rows(conn.execute(statement))


def read_runners(conn: Connection, include_stopped: bool) -> list[Runner]:
    """Runners by fleet, oldest first, each with how many tasks it runs.

    A row whose times cannot be read (written by hand, or restored from a bad
    copy: non-finite or beyond any calendar) is left out and logged once, so
    one odd row does not take the topology and every blocked reason with it.
    """
    statement = select(queue_runners).order_by(R.fleet, R.registered_at)
    if not include_stopped:
        statement = statement.where(R.stopped_at.is_(None))
    rows = conn.execute(statement).all()
    counts: dict[str, int] = dict(
        conn.execute(
            select(T.runner_id, func.count())
            .where(T.status == RUNNING, T.runner_id.is_not(None))
            .group_by(T.runner_id)
        ).all()
    )
    return list(_readable(rows, counts))


def _readable(rows: Iterable[Row[Any]], counts: dict[str, int]) -> Iterable[Runner]:
    for row in rows:
        try:
            yield runner_from_row(row, int(counts.get(row.id, 0)))
        except (TypeError, ValueError, OverflowError, OSError) as exc:
            _tell_unreadable(row, exc)


def _tell_unreadable(row: Row[Any], error: Exception) -> None:
    if row.id in _told:
        return
    if len(_told) >= _TOLD_MAX:
        _told.clear()
    _told.add(row.id)
    times = {name: row._mapping[name] for name in ("registered_at", "heartbeat_at", "stopped_at")}
    log.warning(
        "Runner %s is left out of every listing: its row holds a time no clock can read "
        "(%s; %s). Fix the row, or delete it if the runner is gone",
        row.id,
        ", ".join(f"{name}={value!r}" for name, value in times.items()),
        error,
        extra={"action": "queue_runner_unreadable", "runner_id": row.id},
    )


def prune_runners(conn: Connection, at: float) -> int:
    """Delete the runners gone longer than :data:`RUNNER_RETENTION` before ``at``; how many.

    Gone means stopped, or silent (no heartbeat) for that long. A runner a task
    still names running is kept: recovery takes that lease back first.
    """
    cutoff = at - RUNNER_RETENTION.total_seconds()
    holds = exists().where(T.runner_id == R.id, T.status == RUNNING)
    gone = or_(R.stopped_at < cutoff, (R.stopped_at.is_(None)) & (R.heartbeat_at < cutoff))
    return int(conn.execute(delete(queue_runners).where(gone, ~holds)).rowcount or 0)
