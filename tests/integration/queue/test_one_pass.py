"""A runner's pass with no capped org: outcomes and the next lease in one statement.

On PostgreSQL, when no org has a cap, the pass is one statement (``store/queue/
onepass.py``); the lease rule still judges each claimed task before the commit,
and a refusal sends the pass down the general path. Every test here runs on
both databases (SQLite takes the general path), so the two paths are held to
the same answers: outcomes fenced by their leases, only the freed slots
filled, an unknown or stopped runner refused with nothing recorded, a runner
counted offline recorded and leased again (a pass is proof of life), tokens,
timeline and agent time as every other move leaves them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, func, select, update

from tests.integration.queue.conftest import make_service, runner, submit
from watchkeeper.clock import ManualClock
from watchkeeper.errors import Conflict, NotFound
from watchkeeper.queue.errors import LeaseLost
from watchkeeper.queue.service import QueueService
from watchkeeper.records.queue import TaskStatus
from watchkeeper.store import Store
from watchkeeper.store.queue import End
from watchkeeper.store.schema.queue import queue_events, queue_runners, queue_spend
from watchkeeper.store.tokens import TaskToken


@pytest.fixture
def free(tmp_path: Path, store: Store, clock: ManualClock) -> QueueService:
    """A queue service where no org has a cap."""
    return make_service(tmp_path, store, clock, orgs={})


def _done(lease: Any, status: TaskStatus = TaskStatus.SUCCEEDED) -> End:
    return End(
        lease.task.id,
        lease.token,
        status,
        0 if status is TaskStatus.SUCCEEDED else 3,
        None if status is TaskStatus.SUCCEEDED else "it broke",
    )


def _types(store: Store, task_id: str) -> list[str]:
    with store.engine.connect() as conn:
        rows = conn.execute(
            select(queue_events.c.type)
            .where(queue_events.c.task_id == task_id)
            .order_by(queue_events.c.id)
        )
        return list(rows.scalars())


def test_a_pass_records_outcomes_fenced_and_fills_only_the_freed_slots(
    free: QueueService, store: Store, clock: ManualClock
) -> None:
    held = runner(free, capacity=3)
    jobs = []
    for _ in range(6):
        jobs.append(submit(free).id)
        clock.advance(1)
    first, second, third = free.lease(held.id, limit=3)
    assert [x.task.job_id for x in (first, second, third)] == jobs[:3]
    clock.advance(20)  # the runner stays alive (30 s) and so do the leases (60 s)

    ends = [
        _done(first),
        _done(second, TaskStatus.FAILED),
        End(third.task.id, "not-the-token", TaskStatus.SUCCEEDED, 0),
        _done(first),  # a repeat in the same batch is refused, as it would be later
    ]
    outcomes, leases = free.report_and_lease(held.id, ends, limit=5)

    assert [type(x).__name__ for x in outcomes] == ["Task", "Task", "LeaseLost", "LeaseLost"]
    assert not isinstance(outcomes[0], LeaseLost) and not isinstance(outcomes[1], LeaseLost)
    assert outcomes[0].status is TaskStatus.SUCCEEDED and outcomes[0].exit_code == 0
    assert outcomes[1].status is TaskStatus.FAILED and outcomes[1].failure_reason == "it broke"
    assert outcomes[1].failure_fingerprint  # one is given from the reason
    # Two slots freed (the third task still runs): the two oldest queued tasks, in order.
    assert [x.task.job_id for x in leases] == jobs[3:5]
    assert all(x.task.status is TaskStatus.RUNNING and x.task.runner_id == held.id for x in leases)
    assert free.task(third.task.id).status is TaskStatus.RUNNING
    assert _types(store, first.task.id) == ["queued", "leased", "succeeded"]
    assert _types(store, second.task.id) == ["queued", "leased", "failed"]
    assert _types(store, leases[0].task.id) == ["queued", "leased"]
    with store.engine.connect() as conn:
        spent = conn.execute(select(func.sum(queue_spend.c.agent_seconds))).scalar()
    assert spent == pytest.approx(2 * 20.0)  # the two recorded outcomes, 20 s each


def test_a_pass_mints_each_lease_its_own_token_and_revokes_the_ended_ones(
    free: QueueService, store: Store
) -> None:
    held = runner(free, capacity=2)
    for _ in range(4):
        submit(free)
    before = free.lease(held.id, limit=2)
    _, after = free.report_and_lease(held.id, [_done(x) for x in before], limit=2)
    for lease in before:
        assert lease.task_token is not None and store.tokens.lookup(lease.task_token) is None
    assert len(after) == 2 and len({x.task_token for x in after}) == 2
    for lease in after:
        assert lease.task_token is not None
        found = store.tokens.lookup(lease.task_token)
        assert isinstance(found, TaskToken)
        assert (found.task_id, found.job_id) == (lease.task.id, lease.task.job_id)
        assert lease.token and free.renew(lease.task.id, lease.token).id == lease.task.id


def test_an_unknown_or_stopped_runner_is_refused_and_nothing_is_recorded(
    free: QueueService, store: Store
) -> None:
    held = runner(free, capacity=1)
    submit(free)
    submit(free)
    [lease] = free.lease(held.id)
    with pytest.raises(NotFound):
        free.report_and_lease("r-0000", [_done(lease)], limit=1)
    assert free.task(lease.task.id).status is TaskStatus.RUNNING

    other = runner(free, capacity=1)
    [taken] = free.lease(other.id)
    with store.engine.begin() as conn:  # stopped without its leases taken back yet
        conn.execute(
            update(queue_runners)
            .where(queue_runners.c.id == other.id)
            .values(stopped_at=queue_runners.c.registered_at)
        )
    with pytest.raises(Conflict):
        free.report_and_lease(other.id, [_done(taken)], limit=1)
    assert free.task(taken.task.id).status is TaskStatus.RUNNING
    assert _types(store, taken.task.id) == ["queued", "leased"]


def test_a_runner_counted_offline_has_its_outcomes_recorded_and_leases_again(
    free: QueueService, clock: ManualClock
) -> None:
    held = runner(free, capacity=1)
    jobs = {submit(free).id, submit(free).id}
    [lease] = free.lease(held.id)
    [waiting] = jobs - {lease.task.job_id}
    clock.advance(31)  # past runner_offline_after_s, within the 60 s lease
    # The pass is the runner's proof of life: it is alive again, and leases.
    outcomes, leases = free.report_and_lease(held.id, [_done(lease)], limit=1)
    assert not isinstance(outcomes[0], LeaseLost)
    assert outcomes[0].status is TaskStatus.SUCCEEDED
    assert [x.task.job_id for x in leases] == [waiting]
    assert free.store.queued() == []
    assert free.alive(free.store.runner(held.id))


def test_a_runner_tied_to_an_org_takes_only_its_orgs_tasks_of_its_fleet(
    free: QueueService, clock: ManualClock
) -> None:
    jobs = []
    for org, fleet in [("beta", "cpu"), ("acme", "gpu"), ("acme", "cpu"), ("beta", "cpu")]:
        jobs.append(submit(free, org=org, fleet=fleet).id)
        clock.advance(1)
    tied = runner(free, capacity=4, org="acme")
    _, leases = free.report_and_lease(tied.id, [], limit=4)
    assert [x.task.job_id for x in leases] == [jobs[2]]
    anyone = runner(free, capacity=4)
    _, leases = free.report_and_lease(anyone.id, [], limit=4)
    assert [x.task.job_id for x in leases] == [jobs[0], jobs[3]]


@pytest.fixture
def statements(store: Store) -> Iterator[list[str]]:
    """The statements sent to the database while the test runs."""
    sent: list[str] = []

    def note(*args: Any) -> None:
        sent.append(args[2])

    event.listen(store.engine, "before_cursor_execute", note)
    yield sent
    event.remove(store.engine, "before_cursor_execute", note)


def test_on_postgresql_a_pass_is_one_statement(
    free: QueueService, store: Store, statements: list[str]
) -> None:
    if store.engine.dialect.name != "postgresql":
        pytest.skip("SQLite writes one statement at a time anyway")
    held = runner(free, capacity=2)
    for _ in range(4):
        submit(free)
    first = free.lease(held.id, limit=2)  # lapsed leases were just taken back: not again
    statements.clear()
    _, second = free.report_and_lease(held.id, [_done(x) for x in first], limit=2)
    assert len(second) == 2
    assert len(statements) == 1, statements
