"""What a move of a task leaves behind: its timeline entries and the agent time it spent."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from sqlalchemy import Connection, insert

from watchkeeper.store.queue.rows import month_of
from watchkeeper.store.schema_queue import queue_events, queue_spend


def log_events(
    conn: Connection, tasks: Iterable[tuple[str, str]], at: float, kind: str, detail: str | None
) -> None:
    """One ``kind`` entry on the timeline of each ``(task_id, job_id)``."""
    rows = [
        {"task_id": task_id, "job_id": job_id, "at": at, "type": kind,
         "detail": None if detail is None else detail[:2000]}
        for task_id, job_id in tasks
    ]  # fmt: skip
    if rows:
        conn.execute(insert(queue_events), rows)


def add_spend(conn: Connection, sqlite: bool, org: str, now: datetime, seconds: float) -> None:
    """Add ``seconds`` of agent time to ``org``'s month."""
    if seconds <= 0:
        return
    key = {"org": org, "month": month_of(now)}
    if sqlite:
        from sqlalchemy.dialects.sqlite import insert as upsert
    else:
        from sqlalchemy.dialects.postgresql import insert as upsert  # type: ignore[assignment]
    statement = upsert(queue_spend).values(**key, agent_seconds=seconds)
    conn.execute(
        statement.on_conflict_do_update(
            index_elements=["org", "month"],
            set_={"agent_seconds": queue_spend.c.agent_seconds + seconds},
        )
    )
