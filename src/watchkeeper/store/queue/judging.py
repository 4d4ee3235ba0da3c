"""The task kind's read: tasks that can be judged in full, queued ones as the few columns shown.

A queued task is never judged (its blocked reason says why it waits), yet
every read of every kind lists it. At 10,000 queued tasks, filling whole
:class:`Task` records (payload JSON, every time column) was most of a
dashboard page's wait after anything moved; the queued ones are read here as
only what their line in the read model shows.
"""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from sqlalchemy import select

from watchkeeper.clock import from_epoch, to_epoch
from watchkeeper.records.queue import Task, TaskStatus
from watchkeeper.store.queue.base import Part
from watchkeeper.store.queue.rows import QUEUED, J, T, task_from_row
from watchkeeper.store.schema_queue import queue_jobs, queue_tasks

_UNQUEUED_ACTIVE = [TaskStatus.RUNNING.value, TaskStatus.STUCK.value]


class QueuedLine(NamedTuple):
    """What a queued task's line in the read model shows."""

    id: str
    seq: int
    attempt: int
    version: int
    rerunnable: bool
    progress_at: datetime | None
    step: str | None
    title: str

    @property
    def state_token(self) -> str:
        """The same token :attr:`Task.state_token` gives."""
        return f"a{self.attempt}v{self.version}"


class JudgingReads(Part):
    """Reads the tasks the ``task`` kind lists."""

    def for_judging_split(
        self, finished_since: datetime
    ) -> tuple[list[tuple[Task, str]], list[QueuedLine]]:
        """Running and stuck tasks and those that ended after ``finished_since`` (whole,
        with job titles), and the queued ones (the columns their line shows)."""
        since = to_epoch(finished_since)
        whole = (
            select(queue_tasks, J.title.label("job_title"))
            .join(queue_jobs, J.id == T.job_id)
            .where(
                T.status.in_(_UNQUEUED_ACTIVE) | ((T.finished_at >= since) & (T.status != QUEUED))
            )
        )
        queued = (
            select(T.id, T.seq, T.attempt, T.version, T.rerunnable, T.progress_at, T.step, J.title)
            .join(queue_jobs, J.id == T.job_id)
            .where(T.status == QUEUED)
        )
        with self._read("reading tasks") as conn:
            tasks = [(task_from_row(row), row.job_title) for row in conn.execute(whole)]
            waiting = [
                QueuedLine(
                    task_id,
                    seq,
                    attempt,
                    version,
                    bool(rerunnable),
                    None if progress_at is None else from_epoch(progress_at),
                    step,
                    title,
                )
                for task_id, seq, attempt, version, rerunnable, progress_at, step, title in (
                    conn.execute(queued)
                )
            ]
        return tasks, waiting
