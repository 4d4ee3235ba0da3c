"""Rows of the queue's tables as records, and the column expressions every part shares."""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import ColumnElement, Connection, Executable, Row, Table, and_, func

from watchkeeper.errors import NotFound
from watchkeeper.records.queue import Runner, Task, TaskStatus
from watchkeeper.store.base import record_from_row
from watchkeeper.store.schema_queue import queue_jobs, queue_runners, queue_tasks

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = queue_tasks.c
J = queue_jobs.c
R = queue_runners.c
QUEUED = TaskStatus.QUEUED.value
RUNNING = TaskStatus.RUNNING.value
ACTIVE = [TaskStatus.QUEUED.value, TaskStatus.RUNNING.value, TaskStatus.STUCK.value]
META = queue_tasks.c["metadata"]
_TASK_TIMES = (
    "queued_at",
    "leased_at",
    "last_renewed_at",
    "progress_at",
    "finished_at",
)
_RUNNER_TIMES = ("registered_at", "heartbeat_at", "stopped_at")


def month_of(now: datetime) -> str:
    """The spend month ``now`` falls in (UTC), as stored."""
    return now.strftime("%Y-%m")


def new_id(prefix: str) -> str:
    """A fresh id: short, unguessable, safe in paths and URLs."""
    return f"{prefix}-{secrets.token_hex(6)}"


def found(
    conn: Connection, statement: Executable, missing: str, params: dict[str, Any] | None = None
) -> Row[Any]:
    """The first row ``statement`` reads, or :class:`NotFound` saying ``missing``."""
    row = conn.execute(statement, params).first()
    if row is None:
        raise NotFound(missing)
    return row


def columns_of(new: DataclassInstance, table: Table) -> dict[str, Any]:
    """The fields of ``new`` that ``table`` has columns of the same names for: a row's values."""
    names = (field.name for field in dataclasses.fields(new))
    return {name: getattr(new, name) for name in names if name in table.c}


def task_from_row(row: Row[Any] | Mapping[str, Any]) -> Task:
    """A ``queue_tasks`` row (or its columns by name, as JSON gives them) as a record."""
    # Every read selects the table's typed columns, so ``rerunnable`` is a bool on both dialects.
    status = TaskStatus((row._mapping if isinstance(row, Row) else row)["status"])
    return record_from_row(Task, row, times=_TASK_TIMES, status=status)


def runner_from_row(row: Row[Any] | Mapping[str, Any], running: int = 0) -> Runner:
    """A ``queue_runners`` row as a record, with how many tasks it runs."""
    return record_from_row(Runner, row, times=_RUNNER_TIMES, running=running)


def live_lease(at: float) -> ColumnElement[bool]:
    """Whether a task's lease is still live at ``at``."""
    # Liveness counts from the last renewal, or from the lease itself: never from a NULL.
    return func.coalesce(T.last_renewed_at, T.leased_at) + T.lease_s > at


def held(task_id: str, token: str, at: float) -> ColumnElement[bool]:
    """The task, running under ``token`` on a live lease."""
    return and_(T.id == task_id, T.lease_token == token, T.status == RUNNING, live_lease(at))


def requeue_values(at: float) -> dict[str, Any]:
    """The values that put a task back in the queue, its lease and outcome forgotten."""
    return {
        "status": QUEUED,
        "runner_id": None,
        "lease_token": None,
        "leased_at": None,
        "last_renewed_at": None,
        "finished_at": None,
        "exit_code": None,
        "failure_reason": None,
        "failure_fingerprint": None,
        "updated_at": at,
        "version": T.version + 1,
    }
