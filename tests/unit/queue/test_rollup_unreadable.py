"""A job's status counts the tasks whose stored rows cannot be read, by the status they name."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest

from watchkeeper.queue.rollup import of_job
from watchkeeper.records.queue import Job, JobStatus, Task, TaskStatus, UnreadableTask

AT = datetime(2026, 1, 1, tzinfo=UTC)
TASK = Task("t-1", "j-1", 0, "o", "cpu", {}, TaskStatus.SUCCEEDED, True, 1, 3, 2, 60.0, AT)


def job(tasks: list[Task], unreadable: list[UnreadableTask]) -> Job:
    return Job("j-1", "t", "o", "cpu", {}, "me", AT, tuple(tasks), None, tuple(unreadable))


def odd(status: TaskStatus | None, seq: int | None) -> UnreadableTask:
    return UnreadableTask("t-odd", "queued_at=-1e+20: no time", status, seq)


@pytest.mark.parametrize(
    ("tasks", "unreadable", "expected"),
    [
        ([], [odd(TaskStatus.FAILED, 0)], JobStatus.FAILED),  # a queued task set aside
        ([], [odd(TaskStatus.FAILED, None)], JobStatus.FAILED),
        ([], [odd(None, 0)], JobStatus.QUEUED),  # nothing to count: as a job without tasks
        ([TASK], [odd(TaskStatus.FAILED, 1)], JobStatus.FAILED),  # the continuation failed
        ([dataclasses.replace(TASK, seq=1)], [odd(TaskStatus.FAILED, 0)], JobStatus.SUCCEEDED),
        ([TASK], [odd(TaskStatus.FAILED, None)], JobStatus.FAILED),  # no seq: counted last
        ([TASK], [odd(TaskStatus.RUNNING, None)], JobStatus.RUNNING),
        ([TASK], [], JobStatus.SUCCEEDED),
    ],
)
def test_unreadable_tasks_count_by_the_status_their_rows_name(
    tasks: list[Task], unreadable: list[UnreadableTask], expected: JobStatus
) -> None:
    assert of_job(job(tasks, unreadable)) is expected
