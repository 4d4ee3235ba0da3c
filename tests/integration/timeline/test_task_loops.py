"""A queue task whose timeline keeps sending rounds with one fingerprint is looping, by count
as soon as the kind's ``loop_after`` rounds in a row say the same."""

from __future__ import annotations

from pathlib import Path

from tests.integration.queue.conftest import ORGS, runner, submit
from watchkeeper.clock import ManualClock
from watchkeeper.contract import Condition
from watchkeeper.judge import judge
from watchkeeper.kinds.base import AdapterContext
from watchkeeper.kinds.tasks import TasksAdapter
from watchkeeper.queue.service import QueueService
from watchkeeper.records.timeline import NewEvent
from watchkeeper.store import Store
from watchkeeper.timeline.service import TimelineService

from ...conftest import make_settings


def test_rounds_with_one_fingerprint_loop_by_count_within_the_budget(
    tmp_path: Path, store: Store, clock: ManualClock, queue: QueueService, timeline: TimelineService
) -> None:
    settings = make_settings(
        tmp_path,
        store.url,
        orgs=ORGS,
        queue={"lease_s": 3600},
        kinds={"task": {"adapter": "tasks", "budget_s": 600, "loop_after": 3}},
    )
    kind = TasksAdapter("task", settings.kind_configs()["task"], AdapterContext(settings, store))
    assert kind.spec.loop_after == 3
    submit(queue)
    lease = queue.lease(runner(queue).id)[0]
    task_id = lease.task.id

    def round_(number: int, fingerprint: str) -> None:
        clock.advance(5)
        queue.renew(task_id, lease.token, progressed=True)
        timeline.ingest(
            [NewEvent("verify", task_id=task_id, round=number, fingerprint=fingerprint)], "r"
        )

    def seen_and_judged() -> tuple[int, Condition | None]:
        seen = kind.read_one(task_id, clock())
        assert seen is not None
        found = judge(seen, kind.spec, clock())
        return seen.repeats, None if found is None else found.condition

    round_(1, "diff-a")
    round_(2, "diff-b")
    round_(3, "diff-b")
    assert seen_and_judged() == (2, None)
    round_(4, "diff-b")
    assert seen_and_judged() == (3, Condition.LOOPING)
    round_(5, "diff-c")
    assert seen_and_judged() == (0, None)
