"""Leases on both databases: tokens, renewals, lapses, recovery and the rollup of jobs."""

from __future__ import annotations

import pytest

from tests.integration.queue.conftest import runner, submit
from watchkeeper.clock import ManualClock
from watchkeeper.errors import Conflict, NotFound
from watchkeeper.queue.errors import LeaseLost
from watchkeeper.queue.rollup import of_tasks
from watchkeeper.queue.service import QueueService
from watchkeeper.records.queue import OUT_OF_ATTEMPTS, JobStatus, TaskStatus


def test_lease_complete_and_the_job_succeeds(queue: QueueService, clock: ManualClock) -> None:
    job = submit(queue)
    daemon = runner(queue)
    [lease] = queue.lease(daemon.id, limit=5)
    assert lease.task.job_id == job.id and lease.task.attempt == 1
    assert of_tasks(queue.job(job.id).tasks) is JobStatus.RUNNING
    assert queue.lease(daemon.id, limit=5) == []  # nothing left: never leased twice
    clock.advance(5)
    done = queue.complete(lease.task.id, lease.token, exit_code=0)
    assert done.status is TaskStatus.SUCCEEDED
    assert of_tasks(queue.job(job.id).tasks) is JobStatus.SUCCEEDED
    types = [event.type for event in queue.store.events(job.id)]
    assert types == ["queued", "leased", "succeeded"]


def test_a_wrong_or_old_token_never_moves_the_task(queue: QueueService, clock: ManualClock) -> None:
    submit(queue)
    [lease] = queue.lease(runner(queue).id)
    with pytest.raises(LeaseLost, match="is gone"):
        queue.renew(lease.task.id, "not-the-token")
    with pytest.raises(LeaseLost):
        queue.complete(lease.task.id, "not-the-token")
    assert queue.store.task(lease.task.id).status is TaskStatus.RUNNING


def test_liveness_counts_from_the_last_renewal_or_the_lease(
    queue: QueueService, clock: ManualClock
) -> None:
    submit(queue)
    [lease] = queue.lease(runner(queue).id)  # lease_s 60, never renewed: lapses at +60
    clock.advance(50)
    renewed = queue.renew(lease.task.id, lease.token, progressed=True, step="half way")
    assert renewed.step == "half way" and renewed.progress_at == clock()
    clock.advance(59)  # 109 s after the lease, 59 s after the renewal: still live
    queue.renew(lease.task.id, lease.token)
    clock.advance(60)  # 60 s after the last renewal: lapsed
    with pytest.raises(LeaseLost):
        queue.complete(lease.task.id, lease.token)  # a lapsed lease can never complete


def test_a_lapsed_lease_is_queued_again_then_runs_out_of_attempts(
    queue: QueueService, clock: ManualClock
) -> None:
    job = submit(queue)  # max_attempts 2
    first = runner(queue)
    [lease] = queue.lease(first.id)
    clock.advance(61)
    recovered = queue.recover()
    assert recovered.requeued == (lease.task.id,)
    second = runner(queue)
    [again] = queue.lease(second.id)
    assert again.task.id == lease.task.id and again.task.attempt == 2
    assert again.token != lease.token
    with pytest.raises(LeaseLost):
        queue.renew(lease.task.id, lease.token)  # the first runner must stop
    clock.advance(61)
    assert queue.recover().failed == (lease.task.id,)
    task = queue.store.task(lease.task.id)
    assert task.status is TaskStatus.FAILED and task.failure_fingerprint == OUT_OF_ATTEMPTS
    assert of_tasks(queue.job(job.id).tasks) is JobStatus.FAILED


def test_a_task_that_is_not_rerunnable_becomes_stuck(
    queue: QueueService, clock: ManualClock
) -> None:
    job = submit(queue, rerunnable=False)
    [lease] = queue.lease(runner(queue).id)
    clock.advance(61)
    assert queue.recover().stuck == (lease.task.id,)
    assert queue.store.task(lease.task.id).status is TaskStatus.STUCK
    assert of_tasks(queue.job(job.id).tasks) is JobStatus.RUNNING  # stuck: a person decides
    assert queue.retry(job.id).affected == 1
    assert queue.store.task(lease.task.id).status is TaskStatus.QUEUED


def test_the_lease_path_recovers_lapsed_leases_itself(
    queue: QueueService, clock: ManualClock
) -> None:
    submit(queue)
    [lease] = queue.lease(runner(queue).id)
    clock.advance(61)
    [again] = queue.lease(runner(queue).id)  # no sweep needed
    assert again.task.id == lease.task.id and again.task.attempt == 2


def test_a_runner_that_stops_gives_its_leases_back(queue: QueueService) -> None:
    submit(queue)
    daemon = runner(queue)
    [lease] = queue.lease(daemon.id)
    assert queue.stop_runner(daemon.id).requeued == (lease.task.id,)
    with pytest.raises(Conflict, match="stopped"):
        queue.lease(daemon.id)
    with pytest.raises(Conflict, match="register again"):
        queue.heartbeat(daemon.id)


def test_capacity_limits_one_lease_batch(queue: QueueService) -> None:
    for _ in range(5):
        submit(queue)
    daemon = runner(queue, capacity=3)
    assert len(queue.lease(daemon.id, limit=10)) == 3
    assert queue.lease(daemon.id, limit=10) == []


def test_cancel_retry_delete_say_how_many_tasks_they_affected(
    queue: QueueService, clock: ManualClock
) -> None:
    job = submit(queue)
    [lease] = queue.lease(runner(queue).id)
    with pytest.raises(Conflict, match="cancel it first"):
        queue.delete(job.id)
    assert queue.cancel(job.id).affected == 1
    with pytest.raises(LeaseLost):  # the lease was revoked with the cancel
        queue.renew(lease.task.id, lease.token)
    assert queue.cancel(job.id).affected == 0  # all finished: succeeds, says 0
    assert of_tasks(queue.job(job.id).tasks) is JobStatus.CANCELLED
    assert queue.retry(job.id).affected == 1
    assert queue.retry(job.id).affected == 0  # queued already: nothing to retry
    assert of_tasks(queue.job(job.id).tasks) is JobStatus.QUEUED
    assert queue.delete(job.id).affected == 1
    with pytest.raises(NotFound):
        queue.cancel(job.id)


def test_a_finished_job_cancels_nothing(queue: QueueService, clock: ManualClock) -> None:
    job = submit(queue)
    [lease] = queue.lease(runner(queue).id)
    queue.complete(lease.task.id, lease.token)
    clock.advance(1)
    assert queue.cancel(job.id).affected == 0
    assert of_tasks(queue.job(job.id).tasks) is JobStatus.SUCCEEDED


def test_a_resumed_job_runs_its_continuation(queue: QueueService, clock: ManualClock) -> None:
    job = submit(queue)
    daemon = runner(queue)
    [first] = queue.lease(daemon.id)
    with pytest.raises(Conflict, match="still has task"):
        queue.resume(job.id)
    queue.complete(first.task.id, first.token)
    continuation = queue.resume(job.id, {"argv": ["echo", "more"]})
    assert continuation.seq == 1 and continuation.payload == {"argv": ["echo", "more"]}
    assert of_tasks(queue.job(job.id).tasks) is JobStatus.QUEUED
    [second] = queue.lease(daemon.id)
    assert second.task.id == continuation.id
    assert of_tasks(queue.job(job.id).tasks) is JobStatus.RUNNING  # first succeeded, next runs
    queue.fail(second.task.id, second.token, "exit status 3", exit_code=3)
    assert of_tasks(queue.job(job.id).tasks) is JobStatus.FAILED
    assert queue.jobs(status=JobStatus.FAILED) == [queue.job(job.id)]
    assert queue.jobs(status=JobStatus.RUNNING) == []
