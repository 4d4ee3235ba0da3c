"""Rows of the queue's tables as records, and the column expressions every part shares."""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import ColumnElement, Connection, Executable, Row, Table, and_, func

from watchkeeper.clock import from_epoch
from watchkeeper.errors import NotFound
from watchkeeper.records.filling import UnreadableValue, enum_of
from watchkeeper.records.queue import Runner, Task, TaskStatus, UnreadableTask
from watchkeeper.store.base import record_from_row
from watchkeeper.store.schema.queue import queue_jobs, queue_runners, queue_tasks
from watchkeeper.store.unreadable import each_readable, is_epoch

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
    """A ``queue_tasks`` row (or its columns by name, as JSON gives them) as a record;
    :class:`UnreadableValue` when a column holds what the record cannot."""
    # Every read selects the table's typed columns, so ``rerunnable`` is a bool on both dialects.
    status = enum_of(TaskStatus, row._mapping if isinstance(row, Row) else row, "status")
    task = record_from_row(Task, row, times=_TASK_TIMES, check=True, status=status)
    if task.leased_at is not None:
        try:
            task.lease_expires_at  # noqa: B018 - every reader shows it: it must be a time
        except OverflowError as exc:
            raise UnreadableValue("lease_s", task.lease_s, f"no lease ends then ({exc})") from None
    return task


def unreadable_task(row: Row[Any] | Mapping[str, Any], error: BaseException) -> UnreadableTask:
    """What can be read of a ``queue_tasks`` row :func:`task_from_row` refused with ``error``:
    each column taken only when it holds what its field may."""
    mapping: Mapping[Any, Any] = row._mapping if isinstance(row, Row) else row
    status = mapping.get("status")
    seq = mapping.get("seq")
    finished_at = mapping.get("finished_at")
    reason = mapping.get("failure_reason")
    fingerprint = mapping.get("failure_fingerprint")
    return UnreadableTask(
        id=str(mapping.get("id")),
        problem=str(error),
        status=TaskStatus(status) if status in _STATUS_VALUES else None,
        seq=seq if type(seq) is int else None,
        finished_at=from_epoch(finished_at) if is_epoch(finished_at) else None,
        failure_reason=reason if isinstance(reason, str) else None,
        failure_fingerprint=fingerprint if isinstance(fingerprint, str) else None,
    )


_STATUS_VALUES = frozenset(status.value for status in TaskStatus)


def tasks_from_rows(rows: Iterable[Row[Any]]) -> list[Task]:
    """The tasks ``rows`` hold, leaving out (and logging once) those that cannot be read."""
    return list(each_readable("queue_tasks", rows, task_from_row))


def runner_from_row(row: Row[Any] | Mapping[str, Any], running: int = 0) -> Runner:
    """A ``queue_runners`` row as a record, with how many tasks it runs."""
    return record_from_row(Runner, row, times=_RUNNER_TIMES, check=True, running=running)


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
