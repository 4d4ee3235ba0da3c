"""A task's own token, on both databases: made with each lease, bound to its task,
and dead in the same transaction that ends the lease (whatever ends it). It is
derived from the lease, so no row is written for it."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from alembic import command
from sqlalchemy import Table, func, insert, select

from tests.integration.queue.conftest import runner, submit
from watchkeeper.clock import ManualClock, to_epoch
from watchkeeper.queue.service import QueueService
from watchkeeper.records.queue import Lease
from watchkeeper.store import Store
from watchkeeper.store.migrate import alembic_config, current_revision, head_revision, upgrade
from watchkeeper.store.schema import api_tokens
from watchkeeper.store.schema.queue import queue_events
from watchkeeper.store.tokens import Role, TaskToken, hash_token


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


def _rows(store: Store, table: Table) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(table)).scalar_one())


def test_leasing_and_ending_write_no_token_row(queue: QueueService, store: Store) -> None:
    store.tokens.create(Role.ADMIN, "person", queue.clock())
    held = runner(queue, capacity=3)
    for _ in range(4):
        submit(queue)
    first = queue.lease(held.id, limit=2)
    _, second = queue.report_and_lease(held.id, [], limit=1)  # the one-statement pass
    assert _rows(store, api_tokens) == 1  # the person's; the task tokens are derived
    for lease in [*first, *second]:
        assert isinstance(store.tokens.lookup(str(lease.task_token)), TaskToken)
    queue.complete(first[0].task.id, first[0].token)
    assert store.tokens.lookup(str(first[0].task_token)) is None
    assert _rows(store, api_tokens) == 1


def test_a_task_token_is_refused_when_altered_or_moved_to_another_task(
    queue: QueueService, store: Store
) -> None:
    one, two = leased(queue), leased(queue)
    assert one.task_token is not None and two.task_token is not None
    secret, task_id = one.task_token[: -len(one.task.id)], one.task.id
    flipped = secret[:10] + ("A" if secret[10] != "A" else "B") + secret[11:]
    assert store.tokens.lookup(flipped + task_id) is None
    assert store.tokens.lookup(secret + two.task.id) is None  # its mac names task one only
    assert store.tokens.lookup(secret + "t-0") is None  # no such task
    assert store.tokens.lookup(secret) is None  # no task: no operator token either
    assert isinstance(store.tokens.lookup(one.task_token), TaskToken)


def test_a_token_stored_before_tokens_were_derived_lives_while_its_lease_lasts(
    queue: QueueService, store: Store, clock: ManualClock
) -> None:
    """Tasks running across the upgrade keep the token their process was given."""
    lease = leased(queue)
    stored = "wk_" + "s" * 43
    leased_at = lease.task.leased_at
    assert leased_at is not None
    with store.engine.begin() as conn:
        conn.execute(
            insert(api_tokens).values(
                name=f"task {lease.task.id}",
                role="task",
                token_hash=hash_token(stored),
                created_at=to_epoch(leased_at),
                task_id=lease.task.id,
                job_id=lease.task.job_id,
            )
        )
    found = store.tokens.lookup(stored)
    assert isinstance(found, TaskToken) and found.task_id == lease.task.id
    clock.advance(61)  # the lease lapses and the task is leased again: a new lease
    [again] = queue.lease(runner(queue).id)
    assert again.task.id == lease.task.id
    assert store.tokens.lookup(stored) is None


def test_migration_0023_keeps_the_timeline_and_the_stored_tokens_of_running_tasks(
    queue: QueueService, store: Store
) -> None:
    running, ended = leased(queue), leased(queue)
    queue.complete(ended.task.id, ended.token)
    _downgrade_to_0022(store)
    # As an older server left them: a stored token per lease, one of them ended since.
    stored = {running.task.id: "wk_" + "x" * 43, ended.task.id: "wk_" + "y" * 43}
    with store.engine.begin() as conn:
        for lease in (running, ended):
            conn.execute(
                insert(api_tokens).values(
                    name=f"task {lease.task.id}",
                    role="task",
                    token_hash=hash_token(stored[lease.task.id]),
                    created_at=to_epoch(lease.task.leased_at or queue.clock()),
                    task_id=lease.task.id,
                    job_id=lease.task.job_id,
                )
            )
    timeline = _rows(store, queue_events)
    upgrade(store.engine)
    assert current_revision(store.engine) == head_revision()
    assert _rows(store, queue_events) == timeline
    found = store.tokens.lookup(stored[running.task.id])
    assert isinstance(found, TaskToken) and found.task_id == running.task.id
    assert store.tokens.lookup(stored[ended.task.id]) is None
    assert _task_rows(store, ended.task.id) == 0  # the ended task's row went
    assert isinstance(store.tokens.lookup(str(running.task_token)), TaskToken)


def _task_rows(store: Store, task_id: str) -> int:
    statement = select(func.count()).where(api_tokens.c.task_id == task_id)
    with store.engine.connect() as conn:
        return int(conn.execute(statement).scalar_one())


def _downgrade_to_0022(store: Store) -> None:
    with store.engine.connect() as connection, connection.begin():
        config = alembic_config()
        config.attributes["connection"] = connection
        command.downgrade(config, "0022")


def test_a_downgrade_stores_running_tasks_tokens_so_an_older_server_takes_them(
    queue: QueueService, store: Store
) -> None:
    """A task leased by this server keeps reporting after a rollback to one that looks
    task tokens up by their stored hash."""
    running, ended = leased(queue), leased(queue)
    queue.complete(ended.task.id, ended.token)
    _downgrade_to_0022(store)
    # What the older server's lookup reads: a live row of role task under the token's hash.
    statement = select(api_tokens).where(
        api_tokens.c.token_hash == hash_token(str(running.task_token)),
        api_tokens.c.revoked_at.is_(None),
    )
    with store.engine.connect() as conn:
        [row] = conn.execute(statement).all()
    assert (row.role, row.task_id, row.job_id) == ("task", running.task.id, running.task.job_id)
    assert _task_rows(store, ended.task.id) == 0
    upgrade(store.engine)  # and forward again: the token still speaks for its task
    found = store.tokens.lookup(str(running.task_token))
    assert isinstance(found, TaskToken) and found.task_id == running.task.id
