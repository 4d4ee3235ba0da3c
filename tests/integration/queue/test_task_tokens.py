"""A task's own token, on both databases: minted with each lease, bound to its task,
and gone in the same transaction that ends the lease (whatever ends it)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.integration.queue.conftest import runner, submit
from watchkeeper.clock import ManualClock
from watchkeeper.queue.service import QueueService
from watchkeeper.records.queue import Lease
from watchkeeper.store import Store
from watchkeeper.store.tokens import Role, TaskToken


def leased(queue: QueueService) -> Lease:
    submit(queue)
    [lease] = queue.lease(runner(queue).id)
    return lease


def test_a_lease_mints_a_token_bound_to_its_task(queue: QueueService, store: Store) -> None:
    store.tokens.create(Role.ADMIN, "person", queue.clock())
    lease = leased(queue)
    assert lease.task_token is not None and lease.task_token != lease.token
    found = store.tokens.lookup(lease.task_token)
    assert isinstance(found, TaskToken)
    assert (found.task_id, found.job_id) == (lease.task.id, lease.task.job_id)
    # It is no operator token: not for the dashboard login, not listed, not counted.
    assert store.tokens.authenticate(lease.task_token) is None
    assert [token.name for token in store.tokens.list()] == ["person"]
    assert store.tokens.count_live() == 1


Ending = Callable[[QueueService, Lease, ManualClock], object]
ENDINGS: dict[str, Ending] = {
    "completed": lambda q, lease, _: q.complete(lease.task.id, lease.token),
    "failed": lambda q, lease, _: q.fail(lease.task.id, lease.token, "it broke"),
    "cancelled": lambda q, lease, _: q.cancel(lease.task.job_id),
    "runner stopped": lambda q, lease, _: q.stop_runner(str(lease.task.runner_id)),
    "lease lapsed": lambda q, _, clock: (clock.advance(21), q.recover()),
}


@pytest.mark.parametrize("ending", list(ENDINGS))
def test_the_token_dies_with_the_lease(
    queue: QueueService, store: Store, clock: ManualClock, ending: str
) -> None:
    lease = leased(queue)
    other = leased(queue)  # another task's token lives on
    assert lease.task_token is not None and other.task_token is not None
    clock.advance(40)
    queue.renew(other.task.id, other.token)  # leased 61 s ago at the lapse, renewed 21 s ago
    ENDINGS[ending](queue, lease, clock)
    assert store.tokens.lookup(lease.task_token) is None
    assert isinstance(store.tokens.lookup(other.task_token), TaskToken)


def test_a_re_lease_mints_a_new_token_and_the_old_one_is_gone(
    queue: QueueService, store: Store, clock: ManualClock
) -> None:
    first = leased(queue)
    clock.advance(61)  # the lease lapses; the next lease recovers it and leases it again
    [again] = queue.lease(runner(queue).id)
    assert again.task.id == first.task.id and again.task.attempt == 2
    assert first.task_token is not None and again.task_token is not None
    assert store.tokens.lookup(first.task_token) is None
    found = store.tokens.lookup(again.task_token)
    assert isinstance(found, TaskToken) and found.task_id == first.task.id
