"""Execution records kept as they were signed: one per job and number of tasks."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from sqlalchemy import select

from watchkeeper.clock import to_epoch
from watchkeeper.store.base import Accessor, insert_ignoring_duplicates
from watchkeeper.store.schema.timeline import job_records


class JobRecordStore(Accessor):
    """Keeps signed records; the first one kept for a job and task count is the one."""

    def latest(self, job_id: str) -> tuple[int, dict[str, Any]] | None:
        """The record kept last for ``job_id`` (its task count and body), if any."""
        statement = (
            select(job_records.c.tasks, job_records.c.body)
            .where(job_records.c.job_id == job_id)
            .order_by(job_records.c.signed_at.desc(), job_records.c.tasks.desc())
            .limit(1)
        )
        with self._read("reading a kept record") as conn:
            row = conn.execute(statement).first()
        return None if row is None else (int(row.tasks), json.loads(row.body))

    def keep(self, job_id: str, tasks: int, body: dict[str, Any], now: datetime) -> dict[str, Any]:
        """Keep ``body`` unless a record of the job with ``tasks`` tasks was kept first (by
        another replica): the one kept is returned either way."""
        statement = insert_ignoring_duplicates(self._engine, job_records).values(
            job_id=job_id, tasks=tasks, body=json.dumps(body), signed_at=to_epoch(now)
        )
        kept = select(job_records.c.body).where(
            job_records.c.job_id == job_id, job_records.c.tasks == tasks
        )
        with self._write("keeping a signed record") as conn:
            conn.execute(statement.on_conflict_do_nothing())
            found: dict[str, Any] = json.loads(conn.execute(kept).scalar_one())
        return found
