"""A leasing process for the contention test: lease and complete until the queue is empty.

Run as ``python -m tests.integration.queue.contender URL RUNNER_ID OUT``; writes
the ids it leased to OUT, one a line.
"""

from __future__ import annotations

import sys
from pathlib import Path

from watchkeeper import config
from watchkeeper.queue.service import QueueService
from watchkeeper.store import Store


def drain(queue: QueueService, runner_id: str, batch: int = 4) -> list[str]:
    """Lease and complete until a lease comes back empty; returns the leased task ids."""
    leased: list[str] = []
    while True:
        leases = queue.lease(runner_id, limit=batch)
        if not leases:
            return leased
        for lease in leases:
            leased.append(lease.task.id)
            queue.complete(lease.task.id, lease.token)


def main() -> None:
    url, runner_id, out = sys.argv[1:4]
    store = Store(url, migrate=False)
    try:
        settings = config.parse({"database_url": url}, "contender")
        ids = drain(QueueService(store, settings), runner_id)
    finally:
        store.close()
    Path(out).write_text("".join(f"{task_id}\n" for task_id in ids), encoding="utf-8")


if __name__ == "__main__":
    main()
