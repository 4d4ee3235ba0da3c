"""Ending several held tasks in one transaction: a batch of outcomes, each under its lease.

A runner that finishes several tasks at once, or a server gathering the
outcomes many runners send at once, records them together: one commit instead
of one each. Every outcome is still fenced by its own lease (``id``, token,
still running, not lapsed); one whose lease is gone is left out alone, the
others move. On PostgreSQL the whole batch is one statement: the moves, their
timeline entries, the agent time per org and the removal of the tokens.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Connection,
    Float,
    Integer,
    String,
    bindparam,
    column,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.dialects.postgresql import insert as pg_insert

from watchkeeper.clock import to_epoch
from watchkeeper.records.queue import Task, TaskStatus
from watchkeeper.store.queue.base import Part
from watchkeeper.store.queue.ledger import add_spend, log_events, spend_slot
from watchkeeper.store.queue.rows import RUNNING, T, month_of, task_from_row
from watchkeeper.store.queue.statements import end_statement
from watchkeeper.store.schema.queue import queue_events, queue_spend, queue_tasks

REASON_MAX = 2000


@dataclass(frozen=True, slots=True)
class End:
    """One outcome to record under a lease: succeeded or failed, with its exit code."""

    task_id: str
    token: str
    status: TaskStatus
    exit_code: int | None = 0
    reason: str | None = None
    fingerprint: str | None = None


class Ends(Part):
    """Several outcomes in one transaction."""

    def end_many(self, ends: Sequence[End], now: datetime) -> list[Task | None]:
        """Record each outcome whose lease is live; ``None`` in the place of one whose
        lease is gone (that outcome is not recorded). All commit together or none."""
        if not ends:
            return []
        with self._write(f"recording {len(ends)} task outcome(s)") as conn:
            return end_within(conn, self._sqlite, ends, now)


def end_within(
    conn: Connection, sqlite: bool, ends: Sequence[End], now: datetime
) -> list[Task | None]:
    """:meth:`Ends.end_many` inside a transaction the caller holds (which may go on to
    lease the slots these outcomes free)."""
    if not ends:
        return []
    at = to_epoch(now)
    if sqlite:
        return [_end_one(conn, end, now, at) for end in ends]
    return _end_batch(conn, ends, now)


def _end_one(conn: Connection, end: End, now: datetime, at: float) -> Task | None:
    """SQLite: the single-task statement, then what PostgreSQL does in the same one."""
    row = conn.execute(end_statement(end.status.value, True), _params(end, now, at)).first()
    if row is None:
        return None
    add_spend(conn, True, row.org, now, at - row.leased_at)
    log_events(conn, [(row.id, row.job_id)], at, end.status.value, row.failure_reason)
    return task_from_row(row)


def _params(end: End, now: datetime, at: float) -> dict[str, Any]:
    return {
        "p_id": end.task_id,
        "p_token": end.token,
        "p_at": at,
        "p_exit": end.exit_code,
        "p_reason": None if end.reason is None else end.reason[:REASON_MAX],
        "p_fingerprint": end.fingerprint,
        "p_month": month_of(now),
    }


def batch_params(ends: Sequence[End], now: datetime, prefix: str) -> dict[str, Any]:
    """The outcomes of ``ends`` as one array per column (``{prefix}ids``, ``{prefix}tokens``,
    ...) with ``{prefix}at`` and ``{prefix}month``, for a statement ending them all at once.

    The first outcome sent for a task counts; a repeat in the same batch is
    refused, as it would be in a later one.
    """
    first: dict[str, End] = {}
    for end in ends:
        first.setdefault(end.task_id, end)
    given = list(first.values())
    columns = {
        "ids": [e.task_id for e in given],
        "tokens": [e.token for e in given],
        "statuses": [e.status.value for e in given],
        "exits": [e.exit_code for e in given],
        "reasons": [None if e.reason is None else e.reason[:REASON_MAX] for e in given],
        "fingerprints": [e.fingerprint for e in given],
        "at": to_epoch(now),
        "month": month_of(now),
    }
    return {prefix + name: value for name, value in columns.items()}


def _end_batch(conn: Connection, ends: Sequence[End], now: datetime) -> list[Task | None]:
    params = batch_params(ends, now, "p_")
    moved = {row.id: task_from_row(row) for row in conn.execute(end_many_statement(), params)}
    return [moved.pop(end.task_id, None) for end in ends]


@functools.cache
def end_many_statement() -> Any:
    """PostgreSQL: end a batch of held tasks, each under its own lease, in one statement.

    The outcomes arrive as parallel arrays, unnested into rows, so the statement
    is the same for any batch size and compiles once.
    """
    at = bindparam("p_at", type_=Float)
    given = (
        func.unnest(
            bindparam("p_ids", type_=ARRAY(String)),
            bindparam("p_tokens", type_=ARRAY(String)),
            bindparam("p_statuses", type_=ARRAY(String)),
            bindparam("p_exits", type_=ARRAY(Integer)),
            bindparam("p_reasons", type_=ARRAY(String)),
            bindparam("p_fingerprints", type_=ARRAY(String)),
        )
        .table_valued(
            column("id", String),
            column("token", String),
            column("status", String),
            column("exit_code", Integer),
            column("reason", String),
            column("fingerprint", String),
        )
        .render_derived(name="given", with_types=False)
    )
    moved = (
        update(queue_tasks)
        .where(
            T.id == given.c.id,
            T.lease_token == given.c.token,
            T.status == RUNNING,
            func.coalesce(T.last_renewed_at, T.leased_at) + T.lease_s > at,
        )
        .values(
            status=given.c.status,
            lease_token=None,
            finished_at=at,
            updated_at=at,
            exit_code=given.c.exit_code,
            failure_reason=given.c.reason,
            failure_fingerprint=given.c.fingerprint,
            version=T.version + 1,
        )
        .returning(*queue_tasks.c)
        .cte("moved")
    )
    # One row per org: an upsert may not touch the same row twice in one statement.
    per_org = (
        select(moved.c.org, func.sum(at - moved.c.leased_at).label("seconds"))
        .group_by(moved.c.org)
        .subquery("per_org")
    )
    spent = pg_insert(queue_spend).from_select(
        ["org", "month", "slot", "agent_seconds"],
        select(
            per_org.c.org,
            bindparam("p_month", type_=String),
            spend_slot(per_org.c.org),
            per_org.c.seconds,
        ),
    )
    spent = spent.on_conflict_do_update(
        index_elements=["org", "month", "slot"],
        set_={"agent_seconds": queue_spend.c.agent_seconds + spent.excluded.agent_seconds},
    )
    logged = insert(queue_events).from_select(
        ["task_id", "job_id", "at", "type", "detail"],
        select(moved.c.id, moved.c.job_id, at, moved.c.status, moved.c.failure_reason),
    )
    return select(moved).add_cte(spent.cte("spent"), logged.cte("logged"))
