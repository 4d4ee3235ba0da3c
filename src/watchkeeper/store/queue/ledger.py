"""What a move of a task leaves behind: its timeline entries and the agent time it spent.

Agent time is added to one of ``SPEND_SLOTS`` rows of the org's month. On
PostgreSQL a transaction takes the first slot no other open transaction has
claimed (a non-blocking advisory lock per org and slot), so completions of one
org never wait on each other's row lock; readers sum the slots. SQLite writes
one at a time anyway and always uses slot 0.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Connection, Integer, func, insert, literal, select

from watchkeeper.store.queue.rows import month_of
from watchkeeper.store.schema.queue import queue_events, queue_spend

#: How many rows an org's month may be spread over: more completions of one org at
#: once than this and the extra ones wait for a row, as every one did before.
SPEND_SLOTS = 16


def log_events(
    conn: Connection, tasks: Iterable[tuple[str, str]], at: float, kind: str, detail: str | None
) -> None:
    """One ``kind`` entry on the timeline of each ``(task_id, job_id)``."""
    rows = [
        {
            "task_id": task_id,
            "job_id": job_id,
            "at": at,
            "type": kind,
            "detail": None if detail is None else detail[:2000],
        }
        for task_id, job_id in tasks
    ]
    if rows:
        conn.execute(insert(queue_events), rows)


def spend_slot(org: ColumnElement[Any]) -> ColumnElement[int]:
    """PostgreSQL: the spend slot of ``org`` this transaction adds to.

    The lowest slot whose advisory lock this transaction holds or can take at
    once (the locks are re-entrant, so one transaction keeps its slot); when
    every slot is held elsewhere, one picked by the backend, whose row lock the
    addition then waits for.
    """
    slot = func.generate_series(0, SPEND_SLOTS - 1, type_=Integer).column_valued("slot")
    key = func.hashtext(literal("wk-spend:") + org)
    free = select(slot).where(func.pg_try_advisory_xact_lock(key, slot)).limit(1)
    return func.coalesce(free.scalar_subquery(), func.pg_backend_pid() % SPEND_SLOTS)


def add_spend(conn: Connection, sqlite: bool, org: str, now: datetime, seconds: float) -> None:
    """Add ``seconds`` of agent time to ``org``'s month."""
    if seconds <= 0:
        return
    key = {"org": org, "month": month_of(now)}
    if sqlite:
        from sqlalchemy.dialects.sqlite import insert as upsert

        slot: Any = 0
    else:
        from sqlalchemy.dialects.postgresql import insert as upsert  # type: ignore[assignment]

        slot = spend_slot(literal(org))
    statement = upsert(queue_spend).values(**key, slot=slot, agent_seconds=seconds)
    conn.execute(
        statement.on_conflict_do_update(
            index_elements=["org", "month", "slot"],
            set_={"agent_seconds": queue_spend.c.agent_seconds + seconds},
        )
    )
