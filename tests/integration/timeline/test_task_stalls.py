"""A task looping on the same change is looping while its events keep arriving, stalled once
they stop: either way, never moving."""

from __future__ import annotations

from pathlib import Path

from tests.integration.queue.conftest import ORGS, runner, submit
from watchkeeper.clock import ManualClock
from watchkeeper.judge import judge
from watchkeeper.kinds.base import AdapterContext
from watchkeeper.kinds.tasks import TasksAdapter
from watchkeeper.queue.service import QueueService
from watchkeeper.records.timeline import NewEvent
from watchkeeper.store import Store
from watchkeeper.timeline.service import TimelineService

from ...conftest import make_settings


def test_repeating_the_same_round_is_not_progress(
    tmp_path: Path, store: Store, clock: ManualClock, queue: QueueService, timeline: TimelineService
) -> None:
    settings = make_settings(
        tmp_path,
        store.url,
        orgs=ORGS,
        queue={"lease_s": 3600},
        kinds={"task": {"adapter": "tasks", "budget_s": 120}},
    )
    adapter = TasksAdapter("task", settings.kind_configs()["task"], AdapterContext(settings, store))
    submit(queue)
    lease = queue.lease(runner(queue).id)[0]
    task_id = lease.task.id

    def round_(number: int, fingerprint: str) -> None:
        for phase in ("round_start", "implementer", "verify"):
            clock.advance(20)
            queue.renew(task_id, lease.token, progressed=True)
            fp = fingerprint if phase == "verify" else None
            timeline.ingest([NewEvent(phase, task_id=task_id, round=number, fingerprint=fp)], "r")

    def verdict() -> str | None:
        found = judge(adapter.read_one(task_id, clock()), adapter.spec, clock())  # type: ignore[arg-type]
        return None if found is None else found.condition.value

    round_(1, "diff-a+failed")
    assert verdict() is None
    for number in range(2, 5):  # the same change again and again, events and renewals arriving
        round_(number, "diff-a+failed")
    # Its rounds keep coming, all the same, for longer than its budget: looping, not moving.
    assert verdict() == "looping"
    found = judge(adapter.read_one(task_id, clock()), adapter.spec, clock())  # type: ignore[arg-type]
    assert found is not None
    assert found.reason.startswith("repeating 'round fingerprint diff-a+failed' 4 times since")
    for _ in range(11):  # once they stop coming, with its runner still renewing: stalled
        clock.advance(11)
        queue.renew(task_id, lease.token)
    assert verdict() == "stalled"
    round_(5, "diff-b+passed")
    assert verdict() is None
