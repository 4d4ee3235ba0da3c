"""Claimed rows that cannot be read: set aside as failed, never handed to a runner.

A queued task's row spoiled by hand or by a bad restore (a time before any
calendar, a payload that is no object, a lease that never ends) is claimed like
any other, since a lease reads only the few columns it judges by, and only the
claimed row, read back whole, shows it. Refusing the whole lease then would
leave the row queued, the oldest of its fleet, to be claimed and refused by
every lease after: one row would starve the fleet. So the lease sets it aside
instead, in its own transaction and before it commits, as the dead-letter
queues do with a message no consumer can read:

- the task becomes ``failed``, its reason starting with :data:`REASON_START` and
  naming the column and the value, its fingerprint taken from that reason; its
  claim is undone (no runner, no lease token, so no task token matches it; the
  attempt it never made is not counted);
- its timeline says ``failed`` with that reason, in place of the ``leased`` entry
  the claim wrote;
- it is logged once, and no lease claims it again: it is no longer queued. Once
  the row is fixed, retrying the job queues it again.

The lease then goes on to claim the next readable tasks in the same call. Only
a claim that met such a row sends anything more.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from sqlalchemy import Connection, Float, bindparam, delete, update

from watchkeeper.contract import fingerprint
from watchkeeper.records.queue import Lease, TaskStatus
from watchkeeper.store.queue.ledger import log_events
from watchkeeper.store.queue.rows import RUNNING, T, task_from_row
from watchkeeper.store.schema.queue import queue_events, queue_tasks
from watchkeeper.store.tokens import task_token
from watchkeeper.store.unreadable import UNREADABLE, tell_moved

#: How the failure reason of a task set aside starts: the state's name in words.
REASON_START = "its stored row cannot be read"
_REASON_MAX = 2000
_FAILED = TaskStatus.FAILED.value


class Unreadable(NamedTuple):
    """A claimed row that could not be read, and what was wrong with it."""

    task_id: str
    job_id: str
    #: The lease token the claim gave it: the set-aside moves that claim and no other.
    token: str
    error: BaseException


def read_claimed(rows: Iterable[Any]) -> tuple[list[Lease], list[Unreadable]]:
    """The leases of the claimed ``rows`` that can be read (each with its task token), and
    those that cannot."""
    leases: list[Lease] = []
    odd: list[Unreadable] = []
    for row in rows:
        mapping: Mapping[str, Any] = row if isinstance(row, Mapping) else row._mapping
        try:
            task = task_from_row(mapping)
        except UNREADABLE as exc:
            odd.append(
                Unreadable(str(mapping["id"]), str(mapping["job_id"]), mapping["lease_token"], exc)
            )
            continue
        token = mapping["lease_token"]
        leases.append(Lease(task, token, task_token(task.id, token)))
    return leases, odd


def reason_for(error: BaseException) -> str:
    """The failure reason of a task set aside because its row holds ``error``."""
    reason = (
        f"{REASON_START}: {error}; the queue set it aside instead of leasing it. "
        "Fix the row (or delete the job), then retry the job"
    )
    return reason[:_REASON_MAX]


#: Undo one claim and fail the task, for the claim's own lease token only.
_FAIL_CLAIMED = (
    update(queue_tasks)
    .where(
        T.id == bindparam("p_id"),
        T.lease_token == bindparam("p_token"),
        T.status == RUNNING,
    )
    .values(
        status=_FAILED,
        runner_id=None,
        lease_token=None,
        leased_at=None,
        last_renewed_at=None,
        attempt=T.attempt - 1,
        version=T.version + 1,
        finished_at=bindparam("p_at", type_=Float),
        updated_at=bindparam("p_at", type_=Float),
        exit_code=None,
        failure_reason=bindparam("p_reason"),
        failure_fingerprint=bindparam("p_fingerprint"),
    )
)


def set_aside(conn: Connection, odd: Sequence[Unreadable], at: float) -> None:
    """Fail each of the claimed rows ``odd`` (claimed at ``at``) in the caller's
    transaction, with a reason naming what cannot be read; log each."""
    reasons = {row.task_id: reason_for(row.error) for row in odd}
    conn.execute(
        _FAIL_CLAIMED,
        [
            {
                "p_id": row.task_id,
                "p_token": row.token,
                "p_at": at,
                "p_reason": reasons[row.task_id],
                "p_fingerprint": fingerprint(reasons[row.task_id]),
            }
            for row in odd
        ],
    )
    # The claim put ``leased`` on each timeline (PostgreSQL's in the claiming statement):
    # never leased, it is taken back within the same transaction.
    conn.execute(
        delete(queue_events).where(
            queue_events.c.task_id.in_([row.task_id for row in odd]),
            queue_events.c.type == "leased",
            queue_events.c.at == at,
        )
    )
    for row in odd:
        log_events(conn, [(row.task_id, row.job_id)], at, _FAILED, reasons[row.task_id])
        tell_moved(
            "queue_tasks",
            row.task_id,
            row.error,
            f"The task was set aside as failed instead of leased (job {row.job_id}); "
            "retry the job once the row is fixed",
        )
