"""The store's side of shipped output, on both databases: a piece sent twice at once is
kept once, a lapsed lease ships nothing, and migration 0015 comes and goes without
touching the tails kept before it."""

from __future__ import annotations

import threading
from pathlib import Path

from alembic import command
from sqlalchemy import inspect

from watchkeeper.clock import ManualClock
from watchkeeper.queue.output import Piece, Shipped, ship
from watchkeeper.queue.service import QueueService
from watchkeeper.store import Store
from watchkeeper.store.migrate import alembic_config, current_revision, head_revision, upgrade

from .conftest import make_service, runner, submit


def _leased(queue: QueueService) -> tuple[str, str]:
    job = submit(queue)
    (lease,) = queue.lease(runner(queue).id, 1)
    assert lease.task.id == job.tasks[0].id
    return lease.task.id, lease.token


def test_the_same_piece_shipped_twice_at_once_is_kept_once(
    queue: QueueService, clock: ManualClock
) -> None:
    task_id, token = _leased(queue)
    piece = Piece(0, 6, "hello\n")
    answers: list[Shipped | None] = []
    start = threading.Barrier(2)

    def send() -> None:
        start.wait()
        answers.append(ship(queue.store, task_id, token, piece, clock()))

    threads = [threading.Thread(target=send) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(answer.kept for answer in answers if answer) == [False, True]
    assert all(answer is not None and answer.next_offset == 6 for answer in answers)
    kept = queue.store.shipped_output(task_id)
    assert kept is not None and kept.text == "hello\n" and kept.kept_bytes == 6


def test_a_lapsed_lease_ships_nothing(queue: QueueService, clock: ManualClock) -> None:
    task_id, token = _leased(queue)
    assert ship(queue.store, task_id, token, Piece(0, 4, "one\n"), clock()) is not None
    clock.advance(61)  # the service's leases last 60 s, and this one was never renewed
    assert ship(queue.store, task_id, token, Piece(4, 8, "two\n"), clock()) is None
    kept = queue.store.shipped_output(task_id)
    assert kept is not None and kept.text == "one\n"


def test_migration_0015_goes_and_comes_back_keeping_the_tails(
    tmp_path: Path, clock: ManualClock
) -> None:
    store = Store(f"sqlite:///{tmp_path / 'wk.db'}")
    try:
        queue = make_service(tmp_path, store, clock)
        task_id, token = _leased(queue)
        kept_by = queue.store
        assert kept_by.record_output(task_id, token, "the tail\n", clock())
        assert ship(kept_by, task_id, token, Piece(0, 4, "one\n"), clock()) is not None

        with store.engine.connect() as connection, connection.begin():
            config = alembic_config()
            config.attributes["connection"] = connection
            command.downgrade(config, "0014")
        assert current_revision(store.engine) == "0014"
        tables = set(inspect(store.engine).get_table_names())
        assert "queue_task_shipped" not in tables
        assert "queue_task_shipped_pieces" not in tables

        upgrade(store.engine)
        assert current_revision(store.engine) == head_revision()
        kept = kept_by.output(task_id)
        assert kept is not None and kept.tail == "the tail\n"
        assert kept_by.shipped_output(task_id) is None
        assert ship(kept_by, task_id, token, Piece(0, 4, "two\n"), clock()) is not None
        again = kept_by.shipped_output(task_id)
        assert again is not None and again.text == "two\n"
    finally:
        store.close()
