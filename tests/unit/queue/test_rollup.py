"""A job's status from its tasks, rule by rule."""

from __future__ import annotations

import pytest

from watchkeeper.queue.rollup import job_status
from watchkeeper.records.queue import JobStatus, TaskStatus

Q, R, X = TaskStatus.QUEUED, TaskStatus.RUNNING, TaskStatus.STUCK
S, F, C = TaskStatus.SUCCEEDED, TaskStatus.FAILED, TaskStatus.CANCELLED


@pytest.mark.parametrize(
    ("tasks", "expected"),
    [
        ([], JobStatus.QUEUED),
        ([Q], JobStatus.QUEUED),
        ([R], JobStatus.RUNNING),
        ([X], JobStatus.RUNNING),  # stuck: still holds the job until a person decides
        ([S], JobStatus.SUCCEEDED),
        ([F], JobStatus.FAILED),
        ([C], JobStatus.CANCELLED),
        ([S, R], JobStatus.RUNNING),  # the first succeeded, its continuation runs
        ([S, Q], JobStatus.QUEUED),  # the continuation waits for a runner
        ([F, Q], JobStatus.QUEUED),  # resumed after a failure
        ([S, F], JobStatus.FAILED),
        ([F, S], JobStatus.SUCCEEDED),  # the continuation redid it: the latest decides
        ([S, C], JobStatus.CANCELLED),
        ([C, R, Q], JobStatus.RUNNING),  # running beats queued
        ([S, S, S], JobStatus.SUCCEEDED),
    ],
)
def test_rollup(tasks: list[TaskStatus], expected: JobStatus) -> None:
    assert job_status(tasks) is expected
