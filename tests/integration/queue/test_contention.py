"""No task is ever leased twice at once: threads and processes leasing together, both databases."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

from tests.conftest import make_settings
from tests.integration.queue.contender import drain
from watchkeeper.queue.service import QueueService
from watchkeeper.records.queue import NewJob, NewRunner, TaskStatus
from watchkeeper.store import Store

TASKS = 240


def _fill(queue: QueueService, count: int) -> set[str]:
    new = NewJob("noop", "free", "cpu", {"argv": ["true"]}, "test", lease_s=600)
    return set(queue.store.submit_many([new] * count, queue.clock()))


def _runner(queue: QueueService) -> str:
    return queue.register(NewRunner("cpu", 1000, "host", 1)).id


def test_eight_threads_never_lease_the_same_task(store: Store, tmp_path: Path) -> None:
    settings = make_settings(tmp_path, store.url)
    queue = QueueService(store, settings)
    expected = _fill(queue, TASKS)
    stores = [Store(store.url, migrate=False) for _ in range(8)]
    results: list[list[str]] = [[] for _ in stores]
    start = threading.Barrier(len(stores))
    first_round = threading.Barrier(len(stores), timeout=120)

    def work(index: int) -> None:
        mine = QueueService(stores[index], settings)
        runner_id = _runner(mine)
        start.wait()
        # Each takes one batch before any drains the rest: on a loaded machine one thread
        # could otherwise drain all before the others are scheduled, and nothing competed.
        results[index] = drain(mine, runner_id, rounds=1)
        first_round.wait()
        results[index] += drain(mine, runner_id)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(stores))]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
    finally:
        for opened in stores:
            opened.close()
    leased = Counter(task_id for ids in results for task_id in ids)
    assert set(leased) == expected
    assert max(leased.values()) == 1  # no task leased twice
    assert sum(1 for ids in results if ids) > 1  # they really competed
    tasks = [queue.store.task(task_id) for task_id in list(expected)[:20]]
    assert all(t.status is TaskStatus.SUCCEEDED and t.attempt == 1 for t in tasks)


def test_three_processes_never_lease_the_same_task(store: Store, tmp_path: Path) -> None:
    queue = QueueService(store, make_settings(tmp_path, store.url))
    expected = _fill(queue, TASKS)
    outs = [tmp_path / f"leased-{i}.txt" for i in range(3)]
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.integration.queue.contender",
                store.url,
                _runner(queue),
                str(out),
            ]
        )
        for out in outs
    ]
    for proc in procs:
        assert proc.wait(timeout=120) == 0
    leased = Counter(line for out in outs for line in out.read_text().split())
    assert set(leased) == expected
    assert max(leased.values()) == 1
