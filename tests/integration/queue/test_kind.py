"""The queue as the kind ``task``: stuck, stalled and failed tasks, and its own buttons."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.integration.queue.conftest import make_service, runner, submit
from watchkeeper.clock import ManualClock
from watchkeeper.contract import Action, Condition, Effects, RunView
from watchkeeper.judge import judge
from watchkeeper.kinds.actions import ActionRequest
from watchkeeper.queue.service import QueueService
from watchkeeper.records.queue import TaskStatus
from watchkeeper.runtime import Runtime


def verdicts(runtime: Runtime, clock: ManualClock) -> dict[str, Condition | None]:
    adapter = runtime.sweeper.adapters["task"]
    found: dict[str, Condition | None] = {}
    for run in adapter.read(clock()):
        verdict = judge(run, adapter.spec, clock())
        found[run.run_id] = None if verdict is None else verdict.condition
    return found


def view(runtime: Runtime, clock: ManualClock, task_id: str) -> RunView:
    found = runtime.sweeper.adapters["task"].read_one(task_id, clock())
    assert found is not None
    return found


def queue_of(runtime: Runtime, tmp_path: Path, clock: ManualClock) -> QueueService:
    return make_service(tmp_path, runtime.store, clock, queue={"lease_s": 60})


def test_lapsed_stalled_and_failed_tasks(
    runtime: Runtime, tmp_path: Path, clock: ManualClock
) -> None:
    queue = queue_of(runtime, tmp_path, clock)
    daemon = runner(queue, capacity=5)
    waiting = submit(queue)  # queued work is explained, never judged
    assert runtime.sweeper.adapters["task"].spec.budget_s == 600
    assert verdicts(runtime, clock) == {waiting.tasks[0].id: None}
    clock.advance(1)  # the queue is first in, first out by submission time
    submit(queue, rerunnable=False)
    clock.advance(1)
    submit(queue)
    stalling, lapsing, failing = queue.lease(daemon.id, limit=5)  # in queue order
    assert view(runtime, clock, stalling.task.id).effects is Effects.NONE
    assert view(runtime, clock, lapsing.task.id).effects is Effects.UNKNOWN
    queue.fail(failing.task.id, failing.token, "exit status 2", fingerprint="exit-2")
    for _ in range(13):  # renewed, alive, but the timeline never moves
        clock.advance(50)
        queue.renew(stalling.task.id, stalling.token)
    found = verdicts(runtime, clock)
    assert found[lapsing.task.id] is Condition.STUCK
    assert found[stalling.task.id] is Condition.STALLED
    assert found[failing.task.id] is Condition.FAILED
    asyncio.run(runtime.sweeper.sweep())  # the sweep hook takes the lapsed lease back
    assert queue.store.task(lapsing.task.id).status is TaskStatus.STUCK  # not re-runnable
    assert verdicts(runtime, clock)[lapsing.task.id] is Condition.STUCK
    live = runtime.store.incidents.live(["task"])
    assert {i.key.run_id for i in live} == {lapsing.task.id, stalling.task.id, failing.task.id}


def test_the_kind_cancels_and_retries_its_own_tasks(
    runtime: Runtime, tmp_path: Path, clock: ManualClock
) -> None:
    queue = queue_of(runtime, tmp_path, clock)
    adapter = runtime.sweeper.adapters["task"]
    assert {Action.CANCEL, Action.RETRY} <= adapter.capabilities()
    job = submit(queue)
    [lease] = queue.lease(runner(queue).id)

    def press(action: Action) -> str:
        request = ActionRequest(action, "task", lease.task.id, 1, "ada", "test", "")
        return adapter.perform(request)

    assert press(Action.RETRY) == "queued 1 task(s) again"  # a running task loses its lease
    assert queue.store.task(lease.task.id).status is TaskStatus.QUEUED
    assert press(Action.CANCEL) == "cancelled 1 task(s)"
    assert press(Action.CANCEL) == "cancelled 0 task(s)"
    assert queue.job(job.id).tasks[0].status is TaskStatus.CANCELLED
    assert adapter.evidence(lease.task.id)["attempt"] == "0 of 3"
