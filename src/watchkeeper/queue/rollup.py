"""A job's status, rolled up from its tasks.

The rules, in order (tasks ordered by ``seq``: the first, then continuations):

1. a job without tasks is ``queued`` (it is being written);
2. any task ``running`` or ``stuck`` (a lease lapsed, a person must decide):
   the job is ``running``, e.g. the first task succeeded and its continuation runs;
3. else any task ``queued``: the job is ``queued`` (a continuation waits for a runner);
4. else every task has ended: the job ends as its latest task did, so a
   continuation that succeeded after a failed first task makes the job ``succeeded``,
   and a cancelled continuation makes it ``cancelled``.

A task whose stored row cannot be read counts by the status its row names (a
lease sets such a queued task aside as ``failed``), placed by its ``seq`` when
that can be read and after the others when not; one whose status cannot be read
either does not count.
"""

from __future__ import annotations

from collections.abc import Sequence

from watchkeeper.records.queue import Job, JobStatus, Task, TaskStatus

_ACTIVE = frozenset({TaskStatus.RUNNING, TaskStatus.STUCK})
_ENDED = {
    TaskStatus.SUCCEEDED: JobStatus.SUCCEEDED,
    TaskStatus.FAILED: JobStatus.FAILED,
    TaskStatus.CANCELLED: JobStatus.CANCELLED,
}


def job_status(statuses: Sequence[TaskStatus]) -> JobStatus:
    """The job's status from its tasks' statuses, in ``seq`` order."""
    if not statuses:
        return JobStatus.QUEUED
    if any(status in _ACTIVE for status in statuses):
        return JobStatus.RUNNING
    if TaskStatus.QUEUED in statuses:
        return JobStatus.QUEUED
    return _ENDED[statuses[-1]]


def of_tasks(tasks: Sequence[Task]) -> JobStatus:
    """The job's status from its task records (sorted by ``seq`` here)."""
    return job_status([task.status for task in sorted(tasks, key=lambda task: task.seq)])


def of_job(job: Job) -> JobStatus:
    """The job's status from its tasks, those whose rows cannot be read included."""
    if not job.unreadable:
        return of_tasks(job.tasks)
    last = max((task.seq for task in job.tasks), default=0) + 1
    placed = [(task.seq, task.status) for task in job.tasks]
    placed += [
        (last if odd.seq is None else odd.seq, odd.status)
        for odd in job.unreadable
        if odd.status is not None
    ]
    return job_status([status for _, status in sorted(placed, key=lambda pair: pair[0])])
