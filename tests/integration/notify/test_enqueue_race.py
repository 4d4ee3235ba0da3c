"""Two replicas routing the same events at once: each message enqueued once, neither fails."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from watchkeeper.clock import ManualClock
from watchkeeper.notify.message import Message, Target
from watchkeeper.store import Store
from watchkeeper.store.queueing import NewDelivery

ROUNDS = 8
KEYS = 12


def test_replicas_enqueueing_the_same_keys_together_add_each_once(
    db_url: str, clock: ManualClock
) -> None:
    if db_url.startswith("sqlite"):
        pytest.skip("one writer at a time on SQLite: the two never overlap")
    replicas = [Store(db_url, migrate=False) for _ in range(2)]
    target = Target("log", "ops").as_dict()
    try:
        for round_ in range(ROUNDS):
            items = [
                NewDelivery(
                    f"r{round_}-k{i}", None, "note", "log", target, Message(f"note {i}").as_dict()
                )
                for i in range(KEYS)
            ]
            barrier = threading.Barrier(len(replicas))

            def enqueue(
                store: Store, items: list[NewDelivery], barrier: threading.Barrier
            ) -> list[int]:
                barrier.wait()
                return store.outbox.enqueue(items, clock())

            with ThreadPoolExecutor(len(replicas)) as pool:
                created = list(pool.map(enqueue, replicas, [items] * 2, [barrier] * 2))
            first, second = (set(ids) for ids in created)
            assert not first & second
            assert len(first | second) == KEYS
            stored = replicas[0].outbox.due(clock(), limit=1000)
            keys = [d.dedup_key for d in stored if d.dedup_key.startswith(f"r{round_}-")]
            assert sorted(keys) == sorted(item.dedup_key for item in items)
            assert {d.id for d in stored if d.dedup_key in keys} == first | second
    finally:
        for store in replicas:
            store.close()
