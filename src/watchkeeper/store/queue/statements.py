"""The statements leasing runs on every call, built once.

Building one of these costs more than running it.
"""

from __future__ import annotations

import functools
from typing import Any

from sqlalchemy import (
    Float,
    Integer,
    String,
    bindparam,
    cast,
    func,
    insert,
    literal,
    select,
    tuple_,
    update,
)

from watchkeeper.store.queue.ledger import spend_slot
from watchkeeper.store.queue.rows import QUEUED, RUNNING, R, T
from watchkeeper.store.schema.queue import queue_events, queue_runners, queue_spend, queue_tasks

#: The runner and how many tasks it holds, in one read.
RUNNER_WITH_LOAD = select(
    queue_runners,
    select(func.count())
    .where(T.runner_id == R.id, T.status == RUNNING)
    .scalar_subquery()
    .label("running"),
).where(R.id == bindparam("p_runner"))


@functools.lru_cache(maxsize=4)
def candidates_statement(tied_to_org: bool, after: bool) -> Any:
    """One page of a fleet's queued tasks, oldest first, read without locks.

    With ``after``, the page starts past the task at ``(p_after_at, p_after_id)``,
    so paging goes on from where the last page ended however many tasks the
    lease passed over.
    """
    statement = (
        select(T.id, T.job_id, T.org, T.fleet, T.queued_at)
        .where(T.status == QUEUED, T.fleet == bindparam("p_fleet"))
        .order_by(T.queued_at, T.id)
        .limit(bindparam("p_page", type_=Integer))
    )
    if tied_to_org:
        statement = statement.where(T.org == bindparam("p_org"))
    if after:
        last = tuple_(
            bindparam("p_after_at", type_=T.queued_at.type),
            bindparam("p_after_id", type_=T.id.type),
        )
        statement = statement.where(tuple_(T.queued_at, T.id) > last)
    return statement


@functools.lru_cache(maxsize=2)
def locked_candidates_statement(tied_to_org: bool) -> Any:
    """PostgreSQL: the oldest ``p_page`` queued tasks of the fleet no other lease holds,
    locked for this lease as they are read (``FOR UPDATE SKIP LOCKED``: never waits, so
    leases never deadlock, and runners leasing together each get different rows).

    The first read of a lease no capped org is in: it asks for as many rows as the
    lease wants, so when the rules admit them all, reading and locking is one round
    trip. A row read this way that the rules refuse stays locked until the lease
    commits; other leases pass over it meanwhile, as over any row a lease holds.
    """
    return candidates_statement(tied_to_org, False).with_for_update(
        skip_locked=True, of=queue_tasks
    )


@functools.lru_cache(maxsize=2)
def queued_orgs_statement(tied_to_org: bool) -> Any:
    """The orgs with queued tasks in a fleet: those whose caps a lease must lock first."""
    statement = select(T.org).where(T.status == QUEUED, T.fleet == bindparam("p_fleet"))
    if tied_to_org:
        statement = statement.where(T.org == bindparam("p_org"))
    return statement.distinct()


#: PostgreSQL: take one queued task's row for this lease, or nothing when another
#: lease holds it or already took it; never waits, so leases never deadlock.
LOCK_QUEUED = (
    select(T.id)
    .where(T.id == bindparam("p_id"), T.status == QUEUED)
    .with_for_update(skip_locked=True, of=queue_tasks)
)


#: PostgreSQL: take the oldest ``p_want`` of a page's admitted tasks for this lease,
#: skipping any another lease holds or already took; never waits, so leases never
#: deadlock, and runners leasing together each get different rows in one statement.
LOCK_QUEUED_MANY = (
    select(T.id)
    .where(T.id.in_(bindparam("p_ids", expanding=True)), T.status == QUEUED)
    .order_by(T.queued_at, T.id)
    .limit(bindparam("p_want", type_=Integer))
    .with_for_update(skip_locked=True, of=queue_tasks)
)


@functools.lru_cache(maxsize=2)
def claim_statement(sqlite: bool) -> Any:
    """Claim a batch in one statement; each row gets a fresh random token from the
    database (PostgreSQL's gen_random_uuid, SQLite's randomblob).

    On PostgreSQL the same statement also puts ``leased`` on each task's timeline:
    a lease is one round trip after the rows are picked. Task tokens need no
    writing: they are derived from the new lease tokens (``store/tokens.py``).
    """
    if sqlite:
        token: Any = func.lower(func.hex(func.randomblob(16)))
    else:
        token = func.replace(cast(func.gen_random_uuid(), String), "-", "")
    at = bindparam("p_at", type_=Float)
    claimed = (
        update(queue_tasks)
        .where(T.id.in_(bindparam("p_ids", expanding=True)), T.status == QUEUED)
        .values(
            status=RUNNING,
            runner_id=bindparam("p_runner", type_=String),
            lease_token=token,
            leased_at=at,
            last_renewed_at=None,
            progress_at=at,
            attempt=T.attempt + 1,
            version=T.version + 1,
            updated_at=at,
        )
        .returning(*queue_tasks.c)
    )
    if sqlite:
        return claimed
    claim = claimed.cte("claimed")
    logged = insert(queue_events).from_select(
        ["task_id", "job_id", "at", "type", "detail"],
        select(claim.c.id, claim.c.job_id, at, literal("leased", String), claim.c.runner_id),
    )
    return select(claim).add_cte(logged.cte("logged"))


@functools.lru_cache(maxsize=16)
def end_statement(status: str, sqlite: bool) -> Any:
    """The end of a held task.

    On PostgreSQL the move, its agent-minutes, its timeline entry and the
    removal of the task's token are one statement (data-modifying CTEs), so
    ending a task is one round trip.
    """
    at = bindparam("p_at", type_=Float)
    moved = (
        update(queue_tasks)
        .where(
            T.id == bindparam("p_id"),
            T.lease_token == bindparam("p_token"),
            T.status == RUNNING,
            func.coalesce(T.last_renewed_at, T.leased_at) + T.lease_s > at,
        )
        .values(
            status=status,
            lease_token=None,
            finished_at=at,
            updated_at=at,
            exit_code=bindparam("p_exit", type_=Integer),
            failure_reason=bindparam("p_reason", type_=String),
            failure_fingerprint=bindparam("p_fingerprint", type_=String),
            version=T.version + 1,
        )
        .returning(*queue_tasks.c)
    )
    if sqlite:
        return moved
    from sqlalchemy.dialects.postgresql import insert as pg_insert

    task = moved.cte("moved")
    spent = pg_insert(queue_spend).from_select(
        ["org", "month", "slot", "agent_seconds"],
        select(
            task.c.org,
            bindparam("p_month", type_=String),
            spend_slot(task.c.org),
            at - task.c.leased_at,
        ),
    )
    spent = spent.on_conflict_do_update(
        index_elements=["org", "month", "slot"],
        set_={"agent_seconds": queue_spend.c.agent_seconds + spent.excluded.agent_seconds},
    )
    logged = insert(queue_events).from_select(
        ["task_id", "job_id", "at", "type", "detail"],
        select(task.c.id, task.c.job_id, at, literal(status, String), task.c.failure_reason),
    )
    return select(task).add_cte(spent.cte("spent"), logged.cte("logged"))
