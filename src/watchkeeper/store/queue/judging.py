"""The task kind's read: tasks that can be judged in full, queued ones as the few columns shown.

A queued task is never judged (its blocked reason says why it waits), yet
every read of every kind lists it. At 10,000 queued tasks, filling whole
:class:`Task` records (payload JSON, every time column) was most of a
dashboard page's wait after anything moved; the queued ones are read here as
only what their line in the read model shows.

A task whose row cannot be read whole is left out (logged once), except one
whose row still says it failed, with a reason: such as a queued task a lease
set aside (``setaside.py``). Its line shows that, so it is judged failed and
people are told, as of any failed task.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import select

from watchkeeper.clock import from_epoch, to_epoch
from watchkeeper.records.filling import UnreadableValue
from watchkeeper.records.queue import Task, TaskStatus
from watchkeeper.store.queue.base import Part
from watchkeeper.store.queue.rows import QUEUED, J, T, task_from_row, unreadable_task
from watchkeeper.store.schema.queue import queue_jobs, queue_tasks
from watchkeeper.store.unreadable import UNREADABLE, each_readable, tell_unreadable

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


class FailedLine(NamedTuple):
    """What the line of a failed task whose row cannot be read whole shows."""

    id: str
    seq: int | None
    state_token: str
    finished_at: datetime | None
    failure_reason: str
    failure_fingerprint: str
    title: str


class KindReads(NamedTuple):
    """What one read of the ``task`` kind finds."""

    #: Running and stuck tasks, and those that ended in the window, with job titles.
    whole: list[tuple[Task, str]]
    #: Queued tasks, as the columns their line shows.
    queued: list[QueuedLine]
    #: Failed tasks whose rows cannot be read whole (a lease set them aside).
    failed_unreadable: list[FailedLine]


class JudgingReads(Part):
    """Reads the tasks the ``task`` kind lists."""

    def for_judging_split(self, finished_since: datetime) -> KindReads:
        """Running and stuck tasks and those that ended after ``finished_since`` (whole,
        with job titles), the queued ones (the columns their line shows), and the failed
        ones whose rows cannot be read whole."""
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
        tasks: list[tuple[Task, str]] = []
        failed: list[FailedLine] = []
        with self._read("reading tasks") as conn:
            for row in conn.execute(whole):
                try:
                    tasks.append((task_from_row(row), str(row.job_title)))
                except UNREADABLE as exc:
                    tell_unreadable("queue_tasks", str(row.id), exc, left_out=True)
                    line = _failed_line(row, exc)
                    if line is not None:
                        failed.append(line)
            waiting = list(each_readable("queue_tasks", conn.execute(queued), _queued_line))
        return KindReads(tasks, waiting, failed)


def _failed_line(row: Any, error: BaseException) -> FailedLine | None:
    """The line of a row that cannot be read whole but says it failed and why; ``None``
    for any other."""
    odd = unreadable_task(row, error)
    if odd.status is not TaskStatus.FAILED or odd.failure_reason is None:
        return None
    return FailedLine(
        odd.id,
        odd.seq,
        f"a{row.attempt}v{row.version}",
        odd.finished_at,
        odd.failure_reason,
        odd.failure_fingerprint or "",
        str(row.job_title),
    )


def _queued_line(row: Any) -> QueuedLine:
    try:
        progress_at = from_epoch(row.progress_at)
    except ValueError as exc:
        raise UnreadableValue("progress_at", row.progress_at, str(exc)) from None
    line = QueuedLine(
        row.id,
        row.seq,
        row.attempt,
        row.version,
        bool(row.rerunnable),
        progress_at,
        row.step,
        row.title,
    )
    for name, kind in (("seq", int), ("attempt", int), ("version", int)):
        if not isinstance(getattr(line, name), kind):
            raise UnreadableValue(name, getattr(line, name), f"not an {kind.__name__}")
    return line
