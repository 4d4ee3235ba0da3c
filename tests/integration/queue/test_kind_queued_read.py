"""The task kind reads queued tasks as a few columns: the read model must not change by it."""

from __future__ import annotations

from pathlib import Path

from tests.integration.queue.conftest import make_service, runner, submit
from watchkeeper.clock import ManualClock
from watchkeeper.contract import RunStatus
from watchkeeper.kinds.tasks import FINISHED_WINDOW, view
from watchkeeper.runtime import Runtime
from watchkeeper.store.queue import QueueStore


def test_every_task_reads_as_the_whole_record_made_it(
    runtime: Runtime, tmp_path: Path, clock: ManualClock
) -> None:
    """A guard: the queued ones' short read gives the very views the whole rows gave."""
    queue = make_service(tmp_path, runtime.store, clock, queue={"lease_s": 60, "max_attempts": 3})
    daemon = runner(queue, capacity=10)
    lapsing = submit(queue, title="fails after a step, is retried")
    clock.advance(1)
    ended = submit(queue, title="ends, then resumes")
    clock.advance(1)
    submit(queue, title="runs")
    leases = {lease.task.job_id: lease for lease in queue.lease(daemon.id, limit=10)}
    submit(queue, title="waits")
    submit(queue, title="waits, effects unknown", rerunnable=False)
    queue.renew(leases[lapsing.id].task.id, leases[lapsing.id].token, progressed=True, step="s2")
    queue.complete(leases[ended.id].task.id, leases[ended.id].token)
    queue.resume(ended.id)  # a continuation task, queued with seq 1
    clock.advance(30)
    queue.fail(leases[lapsing.id].task.id, leases[lapsing.id].token, "exit status 1")
    queue.retry(lapsing.id)  # queued again, its step and last progress kept

    now = clock()
    whole = QueueStore(runtime.store.engine).for_judging(now - FINISHED_WINDOW)
    expected = {task.id: view("task", task, title, now) for task, title in whole}
    found = {run.run_id: run for run in runtime.sweeper.adapters["task"].read(now)}

    assert found == expected
    statuses = sorted(run.status.value for run in found.values())
    assert statuses.count(RunStatus.QUEUED.value) == 4, statuses
    requeued = found[leases[lapsing.id].task.id]
    assert requeued.status is RunStatus.QUEUED and requeued.step == "s2"
    assert requeued.progress_at is not None and requeued.state_token != "a0v1"
    assert any(run.title.endswith("(continuation 1)") for run in found.values())
